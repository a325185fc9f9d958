// StreamProbe: see stream_probe.h.
#include "stream_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "server/sse_writer.h"

namespace parallm {

namespace {

// A connected pair of TCP sockets over loopback, as serve and bench use (a
// write there runs the TCP stack, several times the work of a Unix socket's);
// both ends with TCP_NODELAY, as theirs. False when the host has none.
bool loopback_pair(int fds[2]) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int client = -1, server = -1;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(listener, 1) == 0 &&
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    if (client >= 0 && ::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
      server = ::accept(listener, nullptr, nullptr);
  }
  ::close(listener);
  if (server < 0) {
    if (client >= 0) ::close(client);
    return false;
  }
  const int one = 1;
  ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fds[0] = server;  // serve writes
  fds[1] = client;  // bench reads
  return true;
}

}  // namespace

StreamProbe::StreamProbe(int streams, int writers) {
  for (int i = 0; i < streams; ++i) {
    int fds[2];
    if (!loopback_pair(fds)) {
      for (size_t k = 0; k < write_fds_.size(); ++k) {
        ::close(write_fds_[k]);
        ::close(read_fds_[k]);
      }
      throw std::runtime_error("stream probe: no loopback TCP connection");
    }
    write_fds_.push_back(fds[0]);
    read_fds_.push_back(fds[1]);
  }
  for (int i = 0; i < writers; ++i) writers_.emplace_back([this] { write_loop(); });
  reader_ = std::thread([this] { read_loop(); });
}

StreamProbe::~StreamProbe() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : writers_) t.join();
  for (int fd : write_fds_) ::shutdown(fd, SHUT_WR);  // the reader sees every stream end
  reader_.join();
  for (int fd : write_fds_) ::close(fd);
  for (int fd : read_fds_) ::close(fd);
}

void StreamProbe::post(int64_t stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(static_cast<int>(stream % static_cast<int64_t>(write_fds_.size())));
    ++posted_;
  }
  wake_.notify_one();
}

void StreamProbe::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [this] { return parsed_ >= posted_; });
}

void StreamProbe::write_loop() {
  for (;;) {
    int stream = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (stop_) return;
      stream = tasks_.front();
      tasks_.pop_front();
    }
    // The shape of serve's streamed chat chunk with one short token.
    const nlohmann::json chunk = {
        {"id", "chatcmpl-probe"},
        {"object", "chat.completion.chunk"},
        {"created", 1764892800},
        {"model", "probe"},
        {"choices", {{{"index", 0}, {"delta", {{"content", " token"}}}, {"finish_reason", nullptr}}}}};
    const std::string event = sse_event(chunk.dump());
    for (size_t off = 0; off < event.size();) {
      const ssize_t w = ::write(write_fds_[static_cast<size_t>(stream)], event.data() + off, event.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      off += static_cast<size_t>(w);
    }
  }
}

void StreamProbe::read_loop() {
  std::vector<pollfd> fds;
  for (int fd : read_fds_) fds.push_back({fd, POLLIN, 0});
  std::vector<std::string> bufs(read_fds_.size());
  char block[4096];
  for (size_t open = fds.size(); open > 0;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    int64_t n = 0;
    for (size_t s = 0; s < fds.size(); ++s) {
      if (fds[s].fd < 0 || fds[s].revents == 0) continue;
      const ssize_t r = ::read(fds[s].fd, block, sizeof(block));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {  // end of stream (the destructor) or an error
        fds[s].fd = -1;
        --open;
        continue;
      }
      std::string& buf = bufs[s];
      buf.append(block, static_cast<size_t>(r));
      for (size_t end; (end = buf.find("\n\n")) != std::string::npos; buf.erase(0, end + 2)) {
        const size_t data = buf.find("data: ");
        if (data < end) {  // the client's work: parse the chunk (the writer's own, so it parses)
          const nlohmann::json chunk = nlohmann::json::parse(buf.substr(data + 6, end - data - 6), nullptr, false);
          (void)chunk;
        }
        ++n;
      }
    }
    if (n > 0) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        parsed_ += n;
      }
      drained_.notify_all();
    }
  }
}

}  // namespace parallm
