// HttpCore (see http_core.h). The loop thread owns every socket and every
// Conn; workers touch a connection only through its ConnShared (the output
// queue and the exchange's state, under its mutex) and wake the loop through
// the Waker (an eventfd and a list of connection ids).
//
// A client's EOF while its request is being handled means it gave up (as
// uvicorn, and so vLLM, read it): the exchange's on_gone aborts the work.
// The exception is a FIN that arrives together with requests still to be
// answered (a client that pipelined, then half-closed): those are answered.
#include "net/http_core.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "util/check.h"
#include "util/log.h"

namespace parallm::net {

using Clock = std::chrono::steady_clock;

namespace {

// Input buffered beyond the request being handled (pipelined requests);
// past it reading pauses until the response is out.
constexpr size_t kMaxBufferedInput = 256 * 1024;
// How long a closing connection reads and drops the client's bytes so that
// the error answer is not destroyed by a reset (the client may still be sending).
constexpr double kLingerS = 2.0;
constexpr size_t kMaxLingerBytes = 64u << 20;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string serialize_head(int status, const HttpHeaders& headers, const std::string* body, bool chunked,
                           int version_minor, bool close) {
  std::string out = version_minor == 0 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason_phrase(status);
  out += "\r\n";
  for (const auto& [k, v] : headers) {
    if (header_name_equal(k, "Content-Length") || header_name_equal(k, "Connection") ||
        header_name_equal(k, "Transfer-Encoding")) {
      continue;  // framing is the core's
    }
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  if (body) out += "Content-Length: " + std::to_string(body->size()) + "\r\n";
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  if (close) {
    out += "Connection: close\r\n";
  } else if (version_minor == 0) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  return out;
}

std::string peer_text(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, buf, sizeof(buf));
  } else if (a.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
      inet_ntop(AF_INET, reinterpret_cast<const uint8_t*>(&a6->sin6_addr) + 12, buf, sizeof(buf));
    } else {
      inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof(buf));
    }
  }
  return buf;
}

}  // namespace

// The loop's doorbell: workers list the connections with new output.
struct Waker {
  std::mutex mu;
  std::vector<uint64_t> pending;
  int fd = -1;
  bool dead = false;

  void wake(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    if (dead) return;
    const bool first = pending.empty();
    pending.push_back(id);
    if (first) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t r = ::write(fd, &one, sizeof(one));
    }
  }
};

// What a connection's loop side and its exchange share.
struct ConnShared {
  ConnShared(std::shared_ptr<Waker> w, uint64_t id, int version_minor, bool keep_alive, bool head)
      : waker(std::move(w)), conn_id(id), version_minor(version_minor), keep_alive(keep_alive), head(head) {}

  std::shared_ptr<Waker> waker;
  const uint64_t conn_id;
  const int version_minor;
  const bool keep_alive;  // the request allows it and the server is not stopping
  const bool head;        // HEAD: headers only

  std::mutex mu;
  std::string out;       // queued for the loop to send
  bool closed = false;   // the connection is gone
  bool started = false;  // the response's head is queued
  bool done = false;     // the response is queued whole
  bool streaming = false, chunked = false, close_after = false;
  std::function<void()> on_gone;
  std::function<void(bool)> on_finished;
  int finished_state = 0;  // 0: not yet, 1: delivered, 2: the connection died first

  void wake() { waker->wake(conn_id); }
};

// ---------------------------------------------------------------- exchange

HttpExchange::HttpExchange(HttpRequest request, std::shared_ptr<ConnShared> conn)
    : request_(std::move(request)), conn_(std::move(conn)) {}

HttpExchange::~HttpExchange() {
  // A handler that dropped its exchange unanswered: answer rather than leave
  // the client waiting forever.
  bool streaming = false, started = false;
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    streaming = conn_->streaming;
    started = conn_->started;
  }
  if (!started) {
    HttpResponse r;
    r.status = 500;
    r.set_content(
        R"({"error":{"message":"the server dropped this request","type":"server_error","param":null,"code":null}})",
        "application/json");
    respond(std::move(r));
  } else if (streaming) {
    end_stream();
  }
}

void HttpExchange::respond(HttpResponse r) {
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    if (conn_->started || conn_->closed) return;
    conn_->started = conn_->done = true;
    conn_->close_after = !conn_->keep_alive || r.close;
    conn_->out += serialize_head(r.status, r.headers, &r.body, false, conn_->version_minor, conn_->close_after);
    if (!conn_->head) conn_->out += r.body;
  }
  conn_->wake();
}

void HttpExchange::start_stream(int status, const HttpHeaders& headers) {
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    if (conn_->started || conn_->closed) return;
    conn_->started = conn_->streaming = true;
    conn_->chunked = conn_->version_minor >= 1;
    // HTTP/1.0 has no chunks: the end of the body is the end of the connection.
    conn_->close_after = !conn_->keep_alive || !conn_->chunked;
    conn_->out += serialize_head(status, headers, nullptr, conn_->chunked, conn_->version_minor, conn_->close_after);
  }
  conn_->wake();
}

namespace {

// Appends one chunk of a streamed body (under the connection's lock).
void append_chunk(ConnShared& c, std::string_view data) {
  if (data.empty() || c.head) return;
  if (c.chunked) {
    char size[24];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    c.out += size;
    c.out.append(data);
    c.out += "\r\n";
  } else {
    c.out.append(data);
  }
}

}  // namespace

bool HttpExchange::write(std::string_view data) {
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    if (conn_->closed) return false;
    if (!conn_->streaming || conn_->done || data.empty()) return true;
    append_chunk(*conn_, data);
  }
  conn_->wake();
  return true;
}

void HttpExchange::end_stream(std::string_view last) {
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    if (!conn_->streaming || conn_->done || conn_->closed) return;
    append_chunk(*conn_, last);
    conn_->done = true;
    if (conn_->chunked && !conn_->head) conn_->out += "0\r\n\r\n";
  }
  conn_->wake();
}

bool HttpExchange::gone() const {
  std::lock_guard<std::mutex> lock(conn_->mu);
  return conn_->closed;
}

bool HttpExchange::answered() const {
  std::lock_guard<std::mutex> lock(conn_->mu);
  return conn_->done;
}

void HttpExchange::on_gone(std::function<void()> fn) {
  bool now = false;
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    if (conn_->closed && !conn_->done) {
      now = true;
    } else {
      conn_->on_gone = std::move(fn);
    }
  }
  if (now) fn();
}

void HttpExchange::on_finished(std::function<void(bool)> fn) {
  int state;
  {
    std::lock_guard<std::mutex> lock(conn_->mu);
    state = conn_->finished_state;
    if (state == 0) conn_->on_finished = std::move(fn);
  }
  if (state != 0) fn(state == 1);
}

// -------------------------------------------------------------------- loop

struct HttpCore::Loop {
  enum class Phase { kIdle, kReading, kHandling, kLingering };

  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    HttpRequestParser parser;
    std::string in;
    size_t in_pos = 0;
    std::shared_ptr<ConnShared> sh;  // the exchange in progress (kHandling)
    std::string wbuf;                // output taken from sh (or the loop's own)
    size_t wpos = 0;
    Phase phase = Phase::kIdle;
    Clock::time_point deadline;
    Clock::time_point last_progress;
    uint32_t events = 0;
    bool eof = false;
    bool half_closed = false;         // EOF behind requests still to answer
    bool close_when_flushed = false;  // after the loop's own error answer
    size_t lingered = 0;

    explicit Conn(const HttpLimits& l) : parser(l) {}
  };

  Loop(HttpCore& core, Handler handler, ErrorResponder er, InlinePredicate runs_inline)
      : core(core),
        options(core.options_),
        handler(std::move(handler)),
        error_responder(std::move(er)),
        runs_inline(std::move(runs_inline)) {
    waker = std::make_shared<Waker>();
    waker->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epfd = ::epoll_create1(EPOLL_CLOEXEC);
    reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    PARALLM_CHECK(waker->fd >= 0 && epfd >= 0);
  }
  ~Loop() {
    {
      std::lock_guard<std::mutex> lock(waker->mu);
      waker->dead = true;
      ::close(waker->fd);
    }
    if (listen_fd >= 0) ::close(listen_fd);
    if (reserve_fd >= 0) ::close(reserve_fd);
    ::close(epfd);
  }

  HttpCore& core;
  const HttpCoreOptions& options;
  Handler handler;
  ErrorResponder error_responder;
  InlinePredicate runs_inline;
  std::shared_ptr<Waker> waker;
  int epfd = -1, listen_fd = -1, reserve_fd = -1;
  std::atomic<bool> stopping{false};
  uint64_t next_id = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, int> per_client;
  std::mutex tick_mu;
  std::function<void()> tick;
  Clock::time_point last_scan = Clock::now();

  // ------------------------------------------------------------ helpers
  void set_events(Conn& c, uint32_t ev) {
    if (ev == c.events) return;
    epoll_event e{};
    e.events = ev;
    e.data.u64 = c.id;
    ::epoll_ctl(epfd, EPOLL_CTL_MOD, c.fd, &e);
    c.events = ev;
  }
  void update_events(Conn& c) {
    uint32_t ev = 0;
    const bool pending_out = c.wpos < c.wbuf.size();
    const bool paused = c.phase == Phase::kHandling && c.in.size() - c.in_pos > kMaxBufferedInput;
    if (!c.eof && !paused) ev |= EPOLLIN | EPOLLRDHUP;
    if (pending_out) ev |= EPOLLOUT;
    set_events(c, ev);
  }

  // Runs a callback on a worker, or here when the workers are gone.
  void run_soon(std::function<void()> fn) {
    if (!fn) return;
    auto shared = std::make_shared<std::function<void()>>(std::move(fn));
    if (!core.work_->post([shared] { (*shared)(); })) (*shared)();
  }

  void close_conn(Conn& c) {
    ::epoll_ctl(epfd, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    auto it = per_client.find(c.peer);
    if (it != per_client.end() && --it->second <= 0) per_client.erase(it);
    core.n_connections_--;
    if (c.sh) {
      std::function<void()> gone;
      std::function<void(bool)> finished;
      {
        std::lock_guard<std::mutex> lock(c.sh->mu);
        c.sh->closed = true;
        if (!c.sh->done) gone = std::move(c.sh->on_gone);
        finished = std::move(c.sh->on_finished);
        c.sh->finished_state = 2;
      }
      run_soon(std::move(gone));
      if (finished) finished(false);
    }
    conns.erase(c.id);  // c is destroyed here
  }

  // Stops writing, reads and drops what the client still sends for a while,
  // then closes: a close with unread input would reset the connection and
  // could destroy the answer before the client read it.
  void linger(Conn& c) {
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Phase::kLingering;
    c.deadline = Clock::now() + seconds(kLingerS);
    c.in.clear();
    c.in_pos = 0;
    update_events(c);
  }

  void reply_error(Conn& c, int status, const std::string& message) {
    HttpResponse r = error_responder(status, message);
    c.wbuf += serialize_head(r.status, r.headers, &r.body, false, 1, true);
    c.wbuf += r.body;
    c.close_when_flushed = true;
    c.phase = Phase::kHandling;  // nothing more is parsed
    flush(c);
  }

  // Sends what is queued; returns false when the connection was closed.
  bool flush(Conn& c) {
    bool done = false;
    if (c.sh) {
      std::lock_guard<std::mutex> lock(c.sh->mu);
      if (!c.sh->out.empty()) {
        if (c.wpos == c.wbuf.size()) {
          c.wbuf.swap(c.sh->out);
          c.sh->out.clear();
          c.wpos = 0;
        } else {
          c.wbuf.append(c.sh->out);
          c.sh->out.clear();
        }
      }
      done = c.sh->done;
    }
    if (c.wbuf.size() - c.wpos > options.max_queued_output) {
      log_warn("http: closing a connection from " + c.peer + " that does not read its response");
      close_conn(c);
      return false;
    }
    const Clock::time_point now = Clock::now();
    while (c.wpos < c.wbuf.size()) {
      const ssize_t n = ::send(c.fd, c.wbuf.data() + c.wpos, c.wbuf.size() - c.wpos, MSG_NOSIGNAL);
      if (n > 0) {
        c.wpos += static_cast<size_t>(n);
        c.last_progress = now;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      close_conn(c);  // the client is gone
      return false;
    }
    if (c.wpos == c.wbuf.size()) {
      c.wbuf.clear();
      c.wpos = 0;
      if (c.close_when_flushed) {
        c.close_when_flushed = false;
        linger(c);
        return true;
      }
      if (done && c.sh) return finish_exchange(c);
    } else if (c.wpos > (1u << 20) && c.wpos * 2 > c.wbuf.size()) {
      c.wbuf.erase(0, c.wpos);
      c.wpos = 0;
    }
    update_events(c);
    return true;
  }

  // The response left whole: the next request, or the end of the connection.
  bool finish_exchange(Conn& c) {
    std::function<void(bool)> finished;
    bool close_after;
    {
      std::lock_guard<std::mutex> lock(c.sh->mu);
      finished = std::move(c.sh->on_finished);
      close_after = c.sh->close_after;
      c.sh->finished_state = 1;
    }
    c.sh.reset();
    if (finished) finished(true);  // here, so that counters agree with what the client has seen
    if (close_after || stopping || (c.half_closed && c.in_pos == c.in.size())) {
      linger(c);
      return true;
    }
    c.phase = Phase::kIdle;
    c.deadline = Clock::now() + seconds(options.keep_alive_timeout_s);
    return process_input(c);
  }

  void dispatch(Conn& c, HttpRequest req) {
    req.remote_addr = c.peer;
    c.sh = std::make_shared<ConnShared>(waker, c.id, req.version_minor, req.keep_alive() && !stopping,
                                        req.method == "HEAD");
    c.phase = Phase::kHandling;
    auto ex = std::make_shared<HttpExchange>(std::move(req), c.sh);
    Handler* h = &handler;
    if (runs_inline && runs_inline(ex->request())) {
      try {
        (*h)(ex);  // its answer is flushed when this loop drains the wake-ups
      } catch (const std::exception& e) {
        log_warn(std::string("http: handler failed: ") + e.what());
      }
      return;
    }
    if (!core.work_->post([h, ex] {
          try {
            (*h)(ex);
          } catch (const std::exception& e) {
            log_warn(std::string("http: handler failed: ") + e.what());
          }
        })) {
      std::lock_guard<std::mutex> lock(c.sh->mu);
      c.sh->closed = true;  // stopping: nobody will answer
    }
  }

  // Parses buffered input while no request is being handled.
  bool process_input(Conn& c) {
    const uint64_t id = c.id;
    const Clock::time_point now = Clock::now();
    while ((c.phase == Phase::kIdle || c.phase == Phase::kReading) && c.in_pos < c.in.size()) {
      size_t used = 0;
      const HttpRequestParser::Status st = c.parser.feed(c.in.data() + c.in_pos, c.in.size() - c.in_pos, &used);
      c.in_pos += used;
      if (c.phase == Phase::kIdle && c.parser.started()) {
        c.phase = Phase::kReading;
        c.deadline = now + seconds(options.header_timeout_s);
      }
      if (st == HttpRequestParser::Status::kNeedMore) break;
      if (st == HttpRequestParser::Status::kHeadersDone) {
        if (c.parser.expects_continue()) c.wbuf += "HTTP/1.1 100 Continue\r\n\r\n";
        c.deadline = now + seconds(options.body_timeout_s);
        continue;
      }
      if (st == HttpRequestParser::Status::kError) {
        c.in.clear();
        c.in_pos = 0;
        reply_error(c, c.parser.error_status(), c.parser.error_message());
        return conns.count(id) > 0;
      }
      dispatch(c, c.parser.take_request());
    }
    if (c.in_pos == c.in.size()) {
      c.in.clear();
      c.in_pos = 0;
    } else if (c.in_pos > 64 * 1024) {
      c.in.erase(0, c.in_pos);
      c.in_pos = 0;
    }
    if (c.wpos < c.wbuf.size()) return flush(c);
    update_events(c);
    return true;
  }

  void on_readable(Conn& c) {
    char buf[64 * 1024];
    bool got_eof = false;
    while (true) {
      if (c.phase == Phase::kHandling && c.in.size() - c.in_pos > kMaxBufferedInput) break;
      const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        if (c.phase == Phase::kLingering) {
          c.lingered += static_cast<size_t>(n);
          if (c.lingered > kMaxLingerBytes) return close_conn(c);
          continue;
        }
        c.in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        got_eof = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return close_conn(c);  // reset
    }
    if (c.phase == Phase::kLingering) {
      if (got_eof) close_conn(c);
      return;
    }
    const bool was_handling = c.phase == Phase::kHandling;
    if (!was_handling && !process_input(c)) return;
    if (!got_eof) {
      update_events(c);
      return;
    }
    c.eof = true;
    if (c.phase != Phase::kHandling) return close_conn(c);              // nothing to answer
    if (was_handling && c.in_pos == c.in.size()) return close_conn(c);  // gave up waiting: abort
    c.half_closed = true;  // FIN right behind requests: answer them, then close
    update_events(c);
  }

  void accept_all() {
    for (int k = 0; k < 256; ++k) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: accept with the one held back and close at
          // once, or the listening socket stays readable and the loop spins.
          log_warn("http: out of file descriptors; refusing a connection (raise ulimit -n or lower --max-connections)");
          ::close(reserve_fd);
          const int f = ::accept(listen_fd, nullptr, nullptr);
          if (f >= 0) ::close(f);
          reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        return;
      }
      const std::string peer = peer_text(addr);
      int status = 0;
      std::string why;
      if (core.n_connections_.load() >= options.max_connections) {
        status = 503;
        why = "the server holds its maximum of " + std::to_string(options.max_connections) +
              " connections (--max-connections); retry later";
      } else if (per_client[peer] >= options.max_connections_per_client) {
        status = 429;
        why = "this client address holds " + std::to_string(options.max_connections_per_client) +
              " connections, the most allowed (--max-connections-per-client)";
      }
      if (status != 0) {
        if (per_client[peer] == 0) per_client.erase(peer);
        refuse(fd, status, why);
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto c = std::make_unique<Conn>(options.limits);
      c->id = next_id++;
      c->fd = fd;
      c->peer = peer;
      c->deadline = Clock::now() + seconds(options.header_timeout_s);
      c->events = EPOLLIN | EPOLLRDHUP;
      epoll_event e{};
      e.events = c->events;
      e.data.u64 = c->id;
      if (::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
        ::close(fd);
        continue;
      }
      per_client[peer]++;
      core.n_connections_++;
      conns.emplace(c->id, std::move(c));
    }
  }

  // A connection over a cap: a short answer and close, without a Conn.
  void refuse(int fd, int status, const std::string& why) {
    HttpResponse r = error_responder(status, why);
    r.set_header("Retry-After", "1");
    const std::string out = serialize_head(r.status, r.headers, &r.body, false, 1, true) + r.body;
    [[maybe_unused]] ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    char drop[4096];
    while (::recv(fd, drop, sizeof(drop), 0) > 0) {
    }
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
  }

  void on_wake() {
    uint64_t v;
    while (::read(waker->fd, &v, sizeof(v)) > 0) {
    }
    std::vector<uint64_t> ids;
    {
      std::lock_guard<std::mutex> lock(waker->mu);
      ids.swap(waker->pending);
    }
    for (uint64_t id : ids) {
      auto it = conns.find(id);
      if (it != conns.end() && it->second->sh) flush(*it->second);
    }
  }

  void scan(Clock::time_point now) {
    std::vector<uint64_t> ids;
    ids.reserve(conns.size());
    for (auto& [id, c] : conns) ids.push_back(id);
    for (uint64_t id : ids) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      switch (c.phase) {
        case Phase::kIdle:
          if (now >= c.deadline) close_conn(c);
          break;
        case Phase::kReading:
          if (now >= c.deadline) {
            reply_error(c, 408,
                        c.parser.in_body() ? "the request body did not arrive in time"
                                           : "the request headers did not arrive in time");
          }
          break;
        case Phase::kHandling:
          if (c.wpos < c.wbuf.size() && now - c.last_progress > seconds(options.write_timeout_s)) close_conn(c);
          break;
        case Phase::kLingering:
          if (now >= c.deadline) close_conn(c);
          break;
      }
    }
  }

  void run() {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = 0;  // connection ids start at 1
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &e);
    epoll_event w{};
    w.events = EPOLLIN;
    w.data.u64 = UINT64_MAX;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, waker->fd, &w);
    std::vector<epoll_event> events(512);
    while (!stopping) {
      const int n = ::epoll_wait(epfd, events.data(), static_cast<int>(events.size()), 100);
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[static_cast<size_t>(i)].data.u64;
        const uint32_t ev = events[static_cast<size_t>(i)].events;
        if (id == 0) {
          accept_all();
          continue;
        }
        if (id == UINT64_MAX) {
          on_wake();
          continue;
        }
        auto it = conns.find(id);
        if (it == conns.end()) continue;
        Conn& c = *it->second;
        if (ev & EPOLLERR) {
          close_conn(c);
          continue;
        }
        if (ev & EPOLLOUT) {
          if (!flush(c)) continue;
        }
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) on_readable(c);
      }
      const Clock::time_point now = Clock::now();
      if (now - last_scan >= std::chrono::milliseconds(100)) {
        last_scan = now;
        scan(now);
        std::function<void()> t;
        {
          std::lock_guard<std::mutex> lock(tick_mu);
          t = tick;
        }
        if (t) t();
      }
    }
    std::vector<uint64_t> ids;
    for (auto& [id, c] : conns) ids.push_back(id);
    for (uint64_t id : ids) close_conn(*conns.at(id));
  }
};

// -------------------------------------------------------------------- core

HttpCore::HttpCore(const HttpCoreOptions& options, Handler handler, ErrorResponder error_responder,
                   InlinePredicate runs_inline)
    : options_(options), work_(std::make_shared<WorkQueue>()) {
  if (options_.worker_threads < 1) throw InputError("--http-threads must be >= 1");
  if (options_.max_connections < 1 || options_.max_connections_per_client < 1) {
    throw InputError("--max-connections and --max-connections-per-client must be >= 1");
  }
  loop_ = std::make_unique<Loop>(*this, std::move(handler), std::move(error_responder), std::move(runs_inline));
}

HttpCore::~HttpCore() { stop(); }

int HttpCore::bind() {
  if (options_.port < 0 || options_.port > 65535) {
    throw InputError("--port must be in 0..65535 (0 = any free port), not " + std::to_string(options_.port));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(options_.port);
  const std::string where = options_.host + ":" + port;
  const int gai = ::getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) throw InputError("cannot listen on " + where + ": " + ::gai_strerror(gai) + " (pass --host)");
  int fd = -1;
  std::string why;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR only: it lets a restart bind while old connections sit in
    // TIME_WAIT. Not SO_REUSEPORT, with which a second server on the same
    // port binds too and the two share its connections.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) throw InputError("cannot listen on " + where + ": " + why + " (pass another --port, or --host)");
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  loop_->listen_fd = fd;
  options_.port = bound;
  return bound;
}

void HttpCore::set_tick(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(loop_->tick_mu);
  loop_->tick = std::move(fn);
}

void HttpCore::start() {
  PARALLM_CHECK_MSG(loop_->listen_fd >= 0, "HttpCore::start before bind");
  running_ = true;
  for (int i = 0; i < options_.worker_threads; ++i) {
    workers_.emplace_back([this] {
      std::function<void()> task;
      while (work_->next(&task)) {
        task();
        task = nullptr;
      }
    });
  }
  loop_thread_ = std::thread([this] { loop_->run(); });
}

void HttpCore::stop() {
  if (!running_.exchange(false)) return;
  // Workers first (queued handlers still run and may answer), then the loop,
  // which closes every connection.
  work_->close();
  for (auto& t : workers_) t.join();
  workers_.clear();
  loop_->stopping = true;
  loop_->waker->wake(0);
  if (loop_thread_.joinable()) loop_thread_.join();
}

}  // namespace parallm::net
