// UpstreamClient (see upstream_client.h).
#include "router/upstream_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "loadtest/http_response_parser.h"
#include "util/check.h"

namespace parallm {

bool resolve_upstream(const std::string& host, int port, UpstreamAddress& out, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    error = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return false;
  }
  // NOTE: IPv4 first: "localhost" often resolves to ::1 first while servers
  // (parallm serve's default included) listen on 127.0.0.1 only.
  const addrinfo* pick = res;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  std::memcpy(&out.addr, pick->ai_addr, pick->ai_addrlen);
  out.len = pick->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Conn {
  uint64_t id = 0;
  int fd = -1;
  UpstreamCall call;
  size_t written = 0;
  bool connected = false;
  loadtest::HttpResponseParser parser;
  bool headers_reported = false;
  double connect_deadline_s = 0;
  double deadline_s = 0;  // 0 = none
};

}  // namespace

struct UpstreamClient::Loop {
  int epfd = -1;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  std::atomic<int> open{0};
  std::mutex mu;  // guards the queues below
  std::vector<std::pair<uint64_t, UpstreamCall>> pending;
  std::vector<uint64_t> cancels;
  uint64_t next_id = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;  // loop thread only

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  void finish(Conn& c, UpstreamResult r) {
    if (c.fd >= 0) {
      epoll_ctl(epfd, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
      c.fd = -1;
    }
    r.got_headers = c.headers_reported;
    const uint64_t id = c.id;
    auto owned = std::move(conns[id]);
    conns.erase(id);
    open.fetch_sub(1);
    if (owned->call.on_done) owned->call.on_done(r);
  }

  void fail(Conn& c, const std::string& error, bool connect_failed = false) {
    UpstreamResult r;
    r.error = error;
    r.connect_failed = connect_failed;
    finish(c, r);
  }

  void start(uint64_t id, UpstreamCall call) {
    auto c = std::make_unique<Conn>();
    c->id = id;
    c->call = std::move(call);
    const double t = now_s();
    c->connect_deadline_s = t + c->call.connect_timeout_s;
    if (c->call.timeout_s > 0) c->deadline_s = t + c->call.timeout_s;
    Conn& ref = *c;
    conns[id] = std::move(c);
    const auto* sa = reinterpret_cast<const sockaddr*>(&ref.call.address.addr);
    ref.fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ref.fd < 0) return fail(ref, std::string("socket: ") + std::strerror(errno), true);
    const int one = 1;
    setsockopt(ref.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int rc = ::connect(ref.fd, sa, ref.call.address.len);
    if (rc < 0 && errno != EINPROGRESS) return fail(ref, std::string("connect: ") + std::strerror(errno), true);
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = id;
    epoll_ctl(epfd, EPOLL_CTL_ADD, ref.fd, &ev);
  }

  void on_writable(Conn& c) {
    if (!c.connected) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return fail(c, std::string("connect: ") + std::strerror(err), true);
      c.connected = true;
    }
    while (c.written < c.call.request.size()) {
      const ssize_t n =
          ::send(c.fd, c.call.request.data() + c.written, c.call.request.size() - c.written, MSG_NOSIGNAL);
      if (n > 0) {
        c.written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return fail(c, std::string("send: ") + std::strerror(errno));
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c.id;
    epoll_ctl(epfd, EPOLL_CTL_MOD, c.fd, &ev);
  }

  // False when the call finished (c is gone).
  bool deliver(Conn& c, loadtest::HttpResponseParser::State st, std::string& body) {
    using State = loadtest::HttpResponseParser::State;
    if (!c.headers_reported && c.parser.headers_done()) {
      c.headers_reported = true;
      if (c.call.on_headers) c.call.on_headers(c.parser.status(), c.parser.content_type());
    }
    if (!body.empty() && c.call.on_body) c.call.on_body(body);
    body.clear();
    if (st == State::kDone) {
      UpstreamResult r;
      r.ok = true;
      finish(c, r);
      return false;
    }
    if (st == State::kError) {
      fail(c, "bad response: " + c.parser.error());
      return false;
    }
    return true;
  }

  void on_readable(Conn& c) {
    char buf[16384];
    std::string body;
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        const auto st = c.parser.feed(std::string_view(buf, static_cast<size_t>(n)), body);
        if (!deliver(c, st, body)) return;
        continue;
      }
      if (n == 0) {
        const auto st = c.parser.on_eof();
        if (st == loadtest::HttpResponseParser::State::kDone) {
          deliver(c, st, body);
          return;
        }
        return fail(c, c.headers_reported ? "backend closed the connection mid-response"
                                          : "backend closed the connection before answering");
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      return fail(c, std::string("recv: ") + std::strerror(errno), !c.connected);
    }
  }

  void run() {
    std::vector<epoll_event> events(256);
    double last_sweep = 0;
    while (!stop.load()) {
      const int n = epoll_wait(epfd, events.data(), static_cast<int>(events.size()), 50);
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[static_cast<size_t>(i)].data.u64;
        if (id == 0) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(wake_fd, &v, sizeof v);
          continue;
        }
        auto it = conns.find(id);
        if (it == conns.end()) continue;
        Conn& c = *it->second;
        const uint32_t e = events[static_cast<size_t>(i)].events;
        if (e & EPOLLOUT) {
          on_writable(c);
          if (conns.find(id) == conns.end()) continue;
        }
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
          if (!c.connected && (e & (EPOLLHUP | EPOLLERR))) {
            on_writable(c);  // reports the connect error
            continue;
          }
          on_readable(c);
        }
      }
      std::vector<std::pair<uint64_t, UpstreamCall>> starts;
      std::vector<uint64_t> cancelled;
      {
        std::lock_guard<std::mutex> lock(mu);
        starts.swap(pending);
        cancelled.swap(cancels);
      }
      for (auto& [id, call] : starts) start(id, std::move(call));
      for (uint64_t id : cancelled) {
        auto it = conns.find(id);
        if (it == conns.end()) continue;
        UpstreamResult r;
        r.cancelled = true;
        r.error = "cancelled";
        finish(*it->second, r);
      }
      const double t = now_s();
      if (t - last_sweep > 0.05) {
        last_sweep = t;
        std::vector<uint64_t> late;
        for (auto& [id, c] : conns)
          if ((!c->connected && t > c->connect_deadline_s) || (c->deadline_s > 0 && t > c->deadline_s))
            late.push_back(id);
        for (uint64_t id : late) {
          auto it = conns.find(id);
          if (it == conns.end()) continue;
          const bool connecting = !it->second->connected;
          fail(*it->second, connecting ? "connect timed out" : "timed out", connecting);
        }
      }
    }
    std::vector<uint64_t> ids;
    for (auto& [id, c] : conns) ids.push_back(id);
    for (uint64_t id : ids) {
      UpstreamResult r;
      r.cancelled = true;
      r.error = "router stopping";
      finish(*conns[id], r);
    }
  }
};

UpstreamClient::UpstreamClient() : loop_(std::make_unique<Loop>()) {
  loop_->epfd = epoll_create1(EPOLL_CLOEXEC);
  loop_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  PARALLM_CHECK(loop_->epfd >= 0 && loop_->wake_fd >= 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  epoll_ctl(loop_->epfd, EPOLL_CTL_ADD, loop_->wake_fd, &ev);
  thread_ = std::thread([this] { loop_->run(); });
}

UpstreamClient::~UpstreamClient() {
  loop_->stop = true;
  loop_->wake();
  thread_.join();
  ::close(loop_->wake_fd);
  ::close(loop_->epfd);
}

uint64_t UpstreamClient::submit(UpstreamCall call) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(loop_->mu);
    id = loop_->next_id++;
    loop_->pending.emplace_back(id, std::move(call));
  }
  loop_->open.fetch_add(1);
  loop_->wake();
  return id;
}

void UpstreamClient::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(loop_->mu);
    loop_->cancels.push_back(id);
  }
  loop_->wake();
}

int UpstreamClient::open_calls() const { return loop_->open.load(); }

}  // namespace parallm
