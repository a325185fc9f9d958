// StreamProbe: see stream_probe.h.
#include "stream_probe.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "server/sse_writer.h"

namespace parallm {

StreamProbe::StreamProbe() {
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_) != 0) throw std::runtime_error("stream probe: no socket pair");
  writer_ = std::thread([this] { write_loop(); });
  reader_ = std::thread([this] { read_loop(); });
}

StreamProbe::~StreamProbe() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
  ::shutdown(fds_[0], SHUT_WR);  // the reader sees end of stream
  reader_.join();
  ::close(fds_[0]);
  ::close(fds_[1]);
}

void StreamProbe::post(int64_t tokens) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted_ += tokens;
  }
  wake_.notify_one();
}

void StreamProbe::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [this] { return parsed_ >= posted_; });
}

void StreamProbe::write_loop() {
  for (int64_t n = 0;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || posted_ > written_; });
      if (stop_) return;
      n = posted_ - written_;
      written_ = posted_;
    }
    for (int64_t i = 0; i < n; ++i) {
      // The shape of serve's streamed chat chunk with one short token.
      const nlohmann::json chunk = {
          {"id", "chatcmpl-probe"},
          {"object", "chat.completion.chunk"},
          {"created", 1764892800},
          {"model", "probe"},
          {"choices", {{{"index", 0}, {"delta", {{"content", " token"}}}, {"finish_reason", nullptr}}}}};
      const std::string event = sse_event(chunk.dump());
      for (size_t off = 0; off < event.size();) {
        const ssize_t w = ::write(fds_[0], event.data() + off, event.size() - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        off += static_cast<size_t>(w);
      }
    }
  }
}

void StreamProbe::read_loop() {
  std::string buf;
  char block[4096];
  for (;;) {
    const ssize_t r = ::read(fds_[1], block, sizeof(block));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    buf.append(block, static_cast<size_t>(r));
    int64_t n = 0;
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos; buf.erase(0, end + 2)) {
      const size_t data = buf.find("data: ");
      if (data < end) {  // the client's work: parse the chunk (the writer's own, so it parses)
        const nlohmann::json chunk = nlohmann::json::parse(buf.substr(data + 6, end - data - 6), nullptr, false);
        (void)chunk;
      }
      ++n;
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
