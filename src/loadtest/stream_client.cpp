// Event loop of the load generator; see stream_client.h.
// NOTE: one thread drives every stream. Per token the work is one read(), one
// incremental parse and one small JSON parse, a few microseconds; the report
// prints the measured CPU time per token so an overloaded client is visible.
#include "loadtest/stream_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "loadtest/http_response_parser.h"
#include "loadtest/sse_parser.h"
#include "util/check.h"
#include "util/json_parse.h"

namespace parallm::loadtest {

double monotonic_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

namespace {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

int start_connect(const ServerAddress& server, int* err) {
  const int fd = socket(server.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&server.addr), server.addr_len) != 0 && errno != EINPROGRESS) {
    *err = errno;
    close(fd);
    return -1;
  }
  return fd;
}

namespace {

constexpr size_t kMaxErrorBodyBytes = 512;
// The server under test is untrusted: its events and error bodies are parsed
// with the limit parallm puts on requests.
const JsonLimits kResponseJsonLimits{kRequestJsonDepth};

// One request on one connection, from issue to the end of its stream; after
// the stream ends the connection may drain the rest of the HTTP message.
struct Stream {
  int fd = -1;
  bool connecting = false;
  bool reused = false;      // the connection served an earlier request
  bool retried = false;     // already retried once on a fresh connection
  bool finished = false;    // the record is final; only draining the connection
  bool done_event = false;  // saw "data: [DONE]"
  bool finish_reason = false;
  PreparedRequest request;
  size_t written = 0;
  size_t response_bytes = 0;
  HttpResponseParser http;
  SseParser sse;
  std::string error_body;  // non-200 body, for the message
  RequestRecord rec;
  double deadline_s = 0;
};

class LevelRunner {
 public:
  LevelRunner(const ServerAddress& server, const Workload& workload, const LevelSpec& spec)
      : server_(server), workload_(workload), spec_(spec), rng_(spec.seed * 31 + spec.level + 1) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    PARALLM_CHECK_MSG(epoll_fd_ >= 0, "epoll_create1: " + errno_text(errno));
  }
  ~LevelRunner() {
    for (auto& [id, s] : streams_) close(s->fd);
    for (auto& [id, fd] : idle_) close(fd);
    close(epoll_fd_);
  }

  LevelRun run();

 private:
  void issue(double now);
  void open_connection(Stream& s, uint64_t id);
  void on_event(uint64_t id, uint32_t events);
  void on_writable(Stream& s, uint64_t id);
  void on_readable(Stream& s, uint64_t id);
  void on_closed(Stream& s, uint64_t id, const std::string& why);
  void handle_body(Stream& s, const std::string& body, double now);
  void handle_event(Stream& s, const std::string& data, double now);
  void finish(Stream& s, ErrorKind kind, const std::string& message, double now);
  void after_http_done(Stream& s, uint64_t id);
  void release(uint64_t id, bool keep_connection);
  void check_timeouts(double now);
  bool issuing_open(double now) const;

  const ServerAddress& server_;
  const Workload& workload_;
  const LevelSpec spec_;
  uint64_t rng_;
  int epoll_fd_ = -1;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Stream>> streams_;
  std::unordered_map<uint64_t, int> idle_;  // id -> fd of an idle keep-alive connection
  std::priority_queue<std::pair<double, uint64_t>, std::vector<std::pair<double, uint64_t>>, std::greater<>> deadlines_;
  int64_t admitted_ = 0;  // requests the bound has let in (open loop: arrivals)
  int64_t issued_ = 0;    // requests actually sent
  int64_t in_flight_ = 0;
  int64_t pending_arrivals_ = 0;  // open loop: arrived while at the cap
  double start_s_ = 0;
  double next_arrival_s_ = 0;
  LevelRun out_;
};

bool LevelRunner::issuing_open(double now) const {
  if (spec_.num_requests > 0 && admitted_ >= spec_.num_requests) return false;
  if (spec_.duration_s > 0 && now >= start_s_ + spec_.duration_s) return false;
  return true;
}

void LevelRunner::open_connection(Stream& s, uint64_t id) {
  int err = 0;
  s.fd = start_connect(server_, &err);
  s.connecting = true;
  s.reused = false;
  s.written = 0;
  if (s.fd < 0) {
    s.fd = -1;
    return;  // caller sees fd < 0
  }
  ++out_.connections_opened;
  epoll_event ev{};
  ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = id;
  PARALLM_CHECK(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, s.fd, &ev) == 0);
}

void LevelRunner::issue(double now) {
  const uint64_t id = next_id_++;
  auto owned = std::make_unique<Stream>();
  Stream& s = *owned;
  s.request = workload_.make(spec_.level, issued_);
  s.rec.index = issued_;
  s.rec.start_s = now;
  s.rec.prompt_tokens_sent = s.request.prompt_tokens_est;
  s.deadline_s = now + spec_.timeout_s;
  ++issued_;
  ++in_flight_;
  out_.max_in_flight = std::max(out_.max_in_flight, in_flight_);
  if (out_.start_s == 0) out_.start_s = now;
  streams_.emplace(id, std::move(owned));
  deadlines_.emplace(s.deadline_s, id);
  if (!idle_.empty()) {  // reuse a keep-alive connection
    auto it = idle_.begin();
    s.fd = it->second;
    idle_.erase(it);
    s.reused = true;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = id;
    PARALLM_CHECK(epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, s.fd, &ev) == 0);
    on_writable(s, id);
    return;
  }
  int err = 0;
  open_connection(s, id);
  if (s.fd < 0) {
    err = errno;
    finish(s, ErrorKind::kConnection, "connect: " + errno_text(err), now);
    release(id, false);
  }
}

void LevelRunner::finish(Stream& s, ErrorKind kind, const std::string& message, double now) {
  if (s.finished) return;
  s.finished = true;
  s.rec.end_s = now;
  s.rec.error = kind;
  s.rec.http_status = s.http.status();
  s.rec.error_message = message.substr(0, 200);
  out_.end_s = std::max(out_.end_s, now);
  out_.records.push_back(std::move(s.rec));
  --in_flight_;
}

void LevelRunner::release(uint64_t id, bool keep_connection) {
  auto it = streams_.find(id);
  PARALLM_CHECK(it != streams_.end());
  Stream& s = *it->second;
  if (s.fd >= 0) {
    if (keep_connection) {
      const uint64_t idle_id = next_id_++;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.u64 = idle_id;
      PARALLM_CHECK(epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, s.fd, &ev) == 0);
      idle_.emplace(idle_id, s.fd);
    } else {
      close(s.fd);  // also removes it from the epoll set
    }
  }
  streams_.erase(it);
}

void LevelRunner::on_writable(Stream& s, uint64_t id) {
  const double now = monotonic_s();
  if (s.connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      finish(s, ErrorKind::kConnection, "connect: " + errno_text(err), now);
      release(id, false);
      return;
    }
    s.connecting = false;
  }
  const std::string& bytes = s.request.http_bytes;
  while (s.written < bytes.size()) {
    const ssize_t n = send(s.fd, bytes.data() + s.written, bytes.size() - s.written, MSG_NOSIGNAL);
    if (n > 0) {
      s.written += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;  // wait for EPOLLOUT
    } else {
      on_closed(s, id, "send: " + errno_text(errno));
      return;
    }
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = id;
  PARALLM_CHECK(epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, s.fd, &ev) == 0);
}

void LevelRunner::handle_event(Stream& s, const std::string& data, double now) {
  if (s.finished) return;
  if (data == "[DONE]") {
    s.done_event = true;
    finish(s, ErrorKind::kNone, "", now);
    return;
  }
  const auto parsed = try_parse_json<nlohmann::json>(data, kResponseJsonLimits);
  if (!parsed || !parsed->is_object()) {
    finish(s, ErrorKind::kBadResponse, "unparseable SSE data: " + data.substr(0, 100), now);
    return;
  }
  const nlohmann::json& j = *parsed;
  if (j.contains("error") && !j["error"].is_null()) {
    const auto& e = j["error"];
    std::string msg =
        e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : e.dump();
    finish(s, ErrorKind::kStreamError, msg, now);
    return;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
      s.rec.usage_prompt_tokens = u["prompt_tokens"].get<int64_t>();
    }
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      s.rec.usage_completion_tokens = u["completion_tokens"].get<int64_t>();
    }
  }
  const auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty()) return;
  const auto& c = (*choices)[0];
  if (!c.is_object()) return;
  bool has_text = false;
  if (c.contains("delta") && c["delta"].is_object()) {
    const auto& d = c["delta"];
    for (const char* key : {"content", "reasoning_content", "reasoning"}) {
      if (d.contains(key) && d[key].is_string() && !d[key].get_ref<const std::string&>().empty()) {
        has_text = true;
      }
    }
    if (d.contains("tool_calls") && d["tool_calls"].is_array() && !d["tool_calls"].empty()) has_text = true;
  } else if (c.contains("text") && c["text"].is_string()) {
    has_text = !c["text"].get_ref<const std::string&>().empty();
  }
  if (c.contains("finish_reason") && !c["finish_reason"].is_null()) s.finish_reason = true;
  if (!has_text) return;
  if (s.rec.first_token_s < 0) {
    s.rec.first_token_s = now;
  } else {
    s.rec.itl_ms.push_back(static_cast<float>((now - s.rec.last_token_s) * 1e3));
  }
  s.rec.last_token_s = now;
  ++s.rec.chunks_with_text;
}

void LevelRunner::handle_body(Stream& s, const std::string& body, double now) {
  if (s.http.status() != 200) {
    if (s.error_body.size() < kMaxErrorBodyBytes) s.error_body.append(body.substr(0, kMaxErrorBodyBytes));
    return;
  }
  if (s.finished) return;  // draining after [DONE]
  std::vector<std::string> events;
  s.sse.feed(body, events);
  for (const auto& e : events) handle_event(s, e, now);
}

// The HTTP message is complete: settle the record and keep or drop the connection.
void LevelRunner::after_http_done(Stream& s, uint64_t id) {
  const double now = monotonic_s();
  const int status = s.http.status();
  if (status != 200) {
    std::string msg = "HTTP " + std::to_string(status);
    const auto j = try_parse_json<nlohmann::json>(s.error_body, kResponseJsonLimits);
    if (j && j->is_object() && j->contains("error")) {
      const auto& e = (*j)["error"];
      msg +=
          ": " + (e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                                                     : e.dump());
    } else if (!s.error_body.empty()) {
      msg += ": " + s.error_body.substr(0, 150);
    }
    const ErrorKind kind = status >= 500 && status < 600   ? ErrorKind::kHttp5xx
                           : status >= 400 && status < 500 ? ErrorKind::kHttp4xx
                                                           : ErrorKind::kBadResponse;
    finish(s, kind, msg, now);
  } else if (!s.finished) {
    if (s.http.content_type().find("text/event-stream") == std::string::npos) {
      finish(s, ErrorKind::kBadResponse, "HTTP 200 without a stream (Content-Type: " + s.http.content_type() + ")",
             now);
    } else if (s.finish_reason) {  // a clean end without [DONE]: accept it
      finish(s, ErrorKind::kNone, "", now);
    } else {
      finish(s, ErrorKind::kDroppedStream, "response ended before the stream finished", now);
    }
  }
  release(id, s.http.keep_alive());
}

void LevelRunner::on_closed(Stream& s, uint64_t id, const std::string& why) {
  const double now = monotonic_s();
  if (s.finished) {  // draining after [DONE]: just drop the connection
    release(id, false);
    return;
  }
  if (s.response_bytes == 0 && s.reused && !s.retried) {
    // The server closed an idle keep-alive connection just as we reused it:
    // retry once on a fresh connection, as HTTP clients do for idempotent sends.
    close(s.fd);
    s.retried = true;
    s.rec.start_s = now;
    open_connection(s, id);
    if (s.fd < 0) {
      finish(s, ErrorKind::kConnection, "connect: " + errno_text(errno), now);
      release(id, false);
    }
    return;
  }
  if (s.http.on_eof() == HttpResponseParser::State::kDone) {
    after_http_done(s, id);
    return;
  }
  if (s.response_bytes == 0) {
    finish(s, ErrorKind::kConnection, "connection closed before any response: " + why, now);
  } else if (s.http.headers_done() && s.http.status() != 200) {
    after_http_done(s, id);  // an error body cut short is still an HTTP error
    return;
  } else {
    finish(s, ErrorKind::kDroppedStream, "connection lost mid-response: " + why, now);
  }
  release(id, false);
}

void LevelRunner::on_readable(Stream& s, uint64_t id) {
  char buf[64 * 1024];
  std::string body;
  while (true) {
    const ssize_t n = read(s.fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      on_closed(s, id, n == 0 ? "closed by peer" : errno_text(errno));
      return;
    }
    const double now = monotonic_s();
    s.response_bytes += static_cast<size_t>(n);
    body.clear();
    const auto state = s.http.feed(std::string_view(buf, static_cast<size_t>(n)), body);
    if (!body.empty()) handle_body(s, body, now);
    if (state == HttpResponseParser::State::kError) {
      finish(s, ErrorKind::kBadResponse, s.http.error(), now);
      release(id, false);
      return;
    }
    if (state == HttpResponseParser::State::kDone) {
      after_http_done(s, id);
      return;
    }
    if (s.finished && s.rec.error != ErrorKind::kNone) {  // stream error or bad data: stop reading
      release(id, false);
      return;
    }
  }
}

void LevelRunner::on_event(uint64_t id, uint32_t events) {
  if (auto idle = idle_.find(id); idle != idle_.end()) {
    close(idle->second);  // an idle connection closed (or sent junk): forget it
    idle_.erase(idle);
    return;
  }
  auto it = streams_.find(id);
  if (it == streams_.end()) return;  // released earlier in this batch
  Stream& s = *it->second;
  if (s.connecting && (events & (EPOLLERR | EPOLLHUP))) {
    on_writable(s, id);  // reports the SO_ERROR
    return;
  }
  if (events & EPOLLOUT) {
    on_writable(s, id);
    if (streams_.find(id) == streams_.end()) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(s, id);
}

void LevelRunner::check_timeouts(double now) {
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const uint64_t id = deadlines_.top().second;
    deadlines_.pop();
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;
    Stream& s = *it->second;
    if (!s.finished) {
      finish(s, ErrorKind::kTimeout, "no end of stream within " + std::to_string(spec_.timeout_s) + " s", now);
    }
    release(id, false);
  }
}

LevelRun LevelRunner::run() {
  const double cpu0 = thread_cpu_s();
  start_s_ = monotonic_s();
  const bool open_loop = spec_.rate > 0;
  auto exp_gap = [&] {
    const double u = (static_cast<double>(splitmix64(rng_) >> 11) + 0.5) * 0x1.0p-53;
    return -std::log(u) / spec_.rate;
  };
  next_arrival_s_ = start_s_;
  std::vector<epoll_event> events(256);
  while (true) {
    double now = monotonic_s();
    if (open_loop) {
      while (issuing_open(now) && next_arrival_s_ <= now) {
        ++pending_arrivals_;
        ++admitted_;
        next_arrival_s_ += exp_gap();
      }
      while (pending_arrivals_ > 0 && (spec_.concurrency == 0 || in_flight_ < spec_.concurrency)) {
        --pending_arrivals_;
        issue(now);
      }
      // Arrivals still waiting for a slot at the time bound are never sent.
      if (spec_.duration_s > 0 && now >= start_s_ + spec_.duration_s) pending_arrivals_ = 0;
    } else {
      while (issuing_open(now) && in_flight_ < spec_.concurrency) {
        ++admitted_;
        issue(now);
      }
    }
    if (in_flight_ == 0 && pending_arrivals_ == 0 && !issuing_open(now)) break;
    check_timeouts(now);
    double wait_s = 0.1;
    if (!deadlines_.empty()) wait_s = std::min(wait_s, deadlines_.top().first - now);
    if (open_loop && issuing_open(now)) wait_s = std::min(wait_s, next_arrival_s_ - now);
    if (spec_.duration_s > 0 && issuing_open(now)) wait_s = std::min(wait_s, start_s_ + spec_.duration_s - now);
    const int wait_ms = std::max(0, static_cast<int>(std::ceil(wait_s * 1e3)));
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), wait_ms);
    if (n < 0 && errno != EINTR) PARALLM_CHECK_MSG(false, "epoll_wait: " + errno_text(errno));
    for (int i = 0; i < n; ++i) on_event(events[i].data.u64, events[i].events);
  }
  // Streams still draining their HTTP trailer after [DONE] are simply closed.
  out_.client_cpu_s = thread_cpu_s() - cpu0;
  if (out_.end_s == 0) out_.end_s = monotonic_s();
  if (out_.start_s == 0) out_.start_s = start_s_;
  return std::move(out_);
}

}  // namespace

LevelRun run_level(const ServerAddress& server, const Workload& workload, const LevelSpec& spec) {
  LevelRunner runner(server, workload, spec);
  return runner.run();
}

}  // namespace parallm::loadtest
