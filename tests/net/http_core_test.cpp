// The HTTP core over real sockets on loopback: deadlines, connection caps,
// pipelining, keep-alive, 100-continue, streams written from other threads,
// clients that leave, and many idle connections held without threads.
#include "net/http_core.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/check.h"

namespace parallm::net {
namespace {

using Clock = std::chrono::steady_clock;

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Reads until `needle` has appeared `times` times, the peer closes, or the
// receive timeout passes.
std::string read_until(int fd, const std::string& needle, int times = 1) {
  std::string out;
  char buf[8192];
  while (true) {
    int seen = 0;
    for (size_t p = out.find(needle); p != std::string::npos; p = out.find(needle, p + 1)) ++seen;
    if (seen >= times) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// True when the peer closed (recv returns 0) within the receive timeout.
bool closed_by_peer(int fd) {
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0) return false;
  }
}

HttpResponse plain_error(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.set_content("error: " + message, "text/plain");
  return r;
}

class HttpCoreTest : public ::testing::Test {
 protected:
  void start(HttpCoreOptions o, HttpCore::Handler h) {
    std::signal(SIGPIPE, SIG_IGN);
    o.port = 0;
    core_ = std::make_unique<HttpCore>(o, std::move(h), plain_error);
    port_ = core_->bind();
    core_->start();
  }
  void TearDown() override {
    if (core_) core_->stop();
  }
  // Answers with the path as the body.
  static HttpCore::Handler echo() {
    return [](const std::shared_ptr<HttpExchange>& ex) {
      HttpResponse r;
      r.set_content(ex->request().path + "|" + ex->request().body, "text/plain");
      ex->respond(std::move(r));
    };
  }
  std::unique_ptr<HttpCore> core_;
  int port_ = 0;
};

const std::string kGet = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";

TEST_F(HttpCoreTest, PipelinedRequestsAreAllAnsweredInOrder) {
  // The first answer comes last from the workers: order must still hold.
  start({}, [](const std::shared_ptr<HttpExchange>& ex) {
    if (ex->request().path == "/slow") std::this_thread::sleep_for(std::chrono::milliseconds(100));
    HttpResponse r;
    r.set_content(ex->request().path, "text/plain");
    ex->respond(std::move(r));
  });
  const int fd = connect_to(port_);
  send_all(fd,
           "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"
           "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /d HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string out = read_until(fd, "/d");
  const size_t a = out.find("/slow"), b = out.find("/b"), c = out.find("/c"), d = out.find("/d");
  ASSERT_NE(d, std::string::npos) << out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  ::close(fd);
}

TEST_F(HttpCoreTest, KeepAliveServesManyRequestsOnOneConnection) {
  start({}, echo());
  const int fd = connect_to(port_);
  for (int i = 0; i < 200; ++i) {
    send_all(fd, "GET /n" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string out = read_until(fd, "/n" + std::to_string(i) + "|");
    ASSERT_NE(out.find("200 OK"), std::string::npos) << i << ": " << out;
  }
  ::close(fd);
}

TEST_F(HttpCoreTest, ExpectContinueGetsAnInterimAnswerThenTheResponse) {
  start({}, echo());
  const int fd = connect_to(port_);
  send_all(fd, "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  EXPECT_NE(read_until(fd, "\r\n\r\n").find("HTTP/1.1 100 Continue"), std::string::npos);
  send_all(fd, "hello");
  EXPECT_NE(read_until(fd, "/up|hello").find("/up|hello"), std::string::npos);
  ::close(fd);
  // Too large: refused at the headers, no interim answer.
  HttpCoreOptions small;
  core_->stop();
  small.limits.max_body_bytes = 4;
  start(small, echo());
  const int fd2 = connect_to(port_);
  send_all(fd2, "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  const std::string out = read_until(fd2, "bytes");
  EXPECT_EQ(out.rfind("HTTP/1.1 413", 0), 0u) << out;
  ::close(fd2);
}

TEST_F(HttpCoreTest, SlowHeadersGet408AtTheDeadline) {
  HttpCoreOptions o;
  o.header_timeout_s = 0.4;
  start(o, echo());
  const int fd = connect_to(port_);
  const auto t0 = Clock::now();
  send_all(fd, "GET /a HTTP/1.1\r\nHo");  // and never more
  const std::string out = read_until(fd, "in time");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(out.rfind("HTTP/1.1 408", 0), 0u) << out;
  EXPECT_GE(s, 0.35);
  EXPECT_LT(s, 2.0);
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
}

TEST_F(HttpCoreTest, IdleKeepAliveConnectionsAreClosed) {
  HttpCoreOptions o;
  o.keep_alive_timeout_s = 0.3;
  start(o, echo());
  const int fd = connect_to(port_);
  send_all(fd, kGet);
  ASSERT_NE(read_until(fd, "/a|").find("200"), std::string::npos);
  const auto t0 = Clock::now();
  EXPECT_TRUE(closed_by_peer(fd));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
  ::close(fd);
}

TEST_F(HttpCoreTest, ConnectionCapsAnswer429PerClientAnd503InAll) {
  HttpCoreOptions o;
  o.max_connections_per_client = 3;
  start(o, echo());
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect_to(port_));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // accepted
  const int over = connect_to(port_);
  const std::string out = read_until(over, "per-client");
  EXPECT_EQ(out.rfind("HTTP/1.1 429", 0), 0u) << out;
  ::close(over);
  for (int fd : held) ::close(fd);

  core_->stop();
  HttpCoreOptions g;
  g.max_connections = 2;
  start(g, echo());
  held.clear();
  for (int i = 0; i < 2; ++i) held.push_back(connect_to(port_));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int over2 = connect_to(port_);
  const std::string out2 = read_until(over2, "max-connections");
  EXPECT_EQ(out2.rfind("HTTP/1.1 503", 0), 0u) << out2;
  ::close(over2);
  // The held connections still work.
  send_all(held[0], kGet);
  EXPECT_NE(read_until(held[0], "/a|").find("200 OK"), std::string::npos);
  for (int fd : held) ::close(fd);
}

TEST_F(HttpCoreTest, StreamsAreWrittenFromOtherThreadsAndEndCleanly) {
  std::vector<std::thread> writers;
  std::mutex mu;
  start({}, [&](const std::shared_ptr<HttpExchange>& ex) {
    ex->start_stream(200, {{"Content-Type", "text/event-stream"}});
    std::lock_guard<std::mutex> lock(mu);
    writers.emplace_back([ex] {
      for (int i = 0; i < 5; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ex->write("data: " + std::to_string(i) + "\n\n");
      }
      ex->end_stream();
    });
  });
  const int fd = connect_to(port_);
  send_all(fd, kGet + kGet);  // two streams, one after the other on one connection
  const std::string out = read_until(fd, "0\r\n\r\n", 2);
  EXPECT_NE(out.find("Transfer-Encoding: chunked"), std::string::npos) << out;
  EXPECT_NE(out.find("9\r\ndata: 4\n\n\r\n0\r\n\r\nHTTP/1.1 200"), std::string::npos) << out;
  ::close(fd);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& t : writers) t.join();
}

TEST_F(HttpCoreTest, ClientThatLeavesMidRequestFiresOnGone) {
  std::mutex mu;
  std::condition_variable cv;
  std::shared_ptr<HttpExchange> parked;
  std::atomic<int> gone{0}, finished_false{0};
  start({}, [&](const std::shared_ptr<HttpExchange>& ex) {
    ex->on_gone([&] { gone++; });
    ex->on_finished([&](bool delivered) {
      if (!delivered) finished_false++;
    });
    ex->start_stream(200, {});
    std::lock_guard<std::mutex> lock(mu);
    parked = ex;  // never answered
    cv.notify_all();
  });
  const int fd = connect_to(port_);
  send_all(fd, kGet);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return parked != nullptr; }));
  }
  ::close(fd);
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (gone.load() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(gone.load(), 1);
  while (finished_false.load() == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(finished_false.load(), 1);
  EXPECT_TRUE(parked->gone());
  EXPECT_FALSE(parked->write("data: late\n\n"));
}

TEST_F(HttpCoreTest, RequestFollowedByHalfCloseIsStillAnswered) {
  start({}, [](const std::shared_ptr<HttpExchange>& ex) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    HttpResponse r;
    r.set_content("late", "text/plain");
    ex->respond(std::move(r));
  });
  const int fd = connect_to(port_);
  send_all(fd, kGet + kGet);
  ::shutdown(fd, SHUT_WR);
  const std::string out = read_until(fd, "late", 2);
  EXPECT_NE(out.find("late"), out.rfind("late")) << out;  // both answered
  ::close(fd);
}

TEST_F(HttpCoreTest, ThousandsOfIdleConnectionsDoNotDelayAnotherClient) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const int n = static_cast<int>(std::min<rlim_t>(3000, rl.rlim_cur > 200 ? (rl.rlim_cur - 200) / 2 : 0));
  if (n < 1200) GTEST_SKIP() << "open files limit too low: " << rl.rlim_cur;
  HttpCoreOptions o;
  o.max_connections_per_client = n + 10;  // all from 127.0.0.1
  start(o, echo());
  std::vector<int> idle;
  for (int i = 0; i < n; ++i) {
    const int fd = connect_to(port_);
    ASSERT_GE(fd, 0);
    send_all(fd, "GET /never HTTP/1.1\r\nHo");  // a slowloris: headers that never end
    idle.push_back(fd);
  }
  const auto t0 = Clock::now();
  const int fd = connect_to(port_);
  send_all(fd, kGet);
  EXPECT_NE(read_until(fd, "/a|").find("200 OK"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
  EXPECT_GE(core_->connections(), n);
  ::close(fd);
  for (int f : idle) ::close(f);
}

TEST_F(HttpCoreTest, BindRefusesABusyPortAndOutOfRangePorts) {
  start({}, echo());
  HttpCoreOptions o;
  o.port = port_;
  HttpCore second(o, echo(), plain_error);
  try {
    second.bind();
    FAIL() << "a second server bound the same port";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(port_)), std::string::npos) << e.what();
  }
  o.port = 99999;
  HttpCore third(o, echo(), plain_error);
  EXPECT_THROW(third.bind(), InputError);
}

}  // namespace
}  // namespace parallm::net
