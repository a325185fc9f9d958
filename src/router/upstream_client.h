// UpstreamClient: the router's event-driven HTTP/1.1 client. One epoll loop
// thread drives every upstream connection (non-blocking connect, write the
// request, read and parse the response with loadtest's HttpResponseParser),
// so thousands of open streams cost no thread each. Body bytes are handed to
// the caller as soon as they are read (no buffering), on the loop thread.
// NOTE: one connection per request with "Connection: close": no pool to keep
// healthy, and closing the socket is how a cancelled request aborts the
// backend's generation.
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace parallm {

struct UpstreamAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// Resolves host:port (numeric or by name); false with `error` set if it cannot.
bool resolve_upstream(const std::string& host, int port, UpstreamAddress& out, std::string& error);

struct UpstreamResult {
  bool ok = false;           // a complete response was read
  bool cancelled = false;    // cancel() ended it
  bool got_headers = false;  // the status line and headers arrived
  bool connect_failed = false;
  std::string error;  // when !ok
};

struct UpstreamCall {
  UpstreamAddress address;
  std::string request;  // the whole request, bytes as sent
  double connect_timeout_s = 2;
  double timeout_s = 0;  // whole exchange; 0 = none (generations may be long)
  std::function<void(int status, const std::string& content_type)> on_headers;
  std::function<void(std::string_view body)> on_body;
  std::function<void(const UpstreamResult&)> on_done;  // exactly once
};

class UpstreamClient {
 public:
  UpstreamClient();
  ~UpstreamClient();
  UpstreamClient(const UpstreamClient&) = delete;
  UpstreamClient& operator=(const UpstreamClient&) = delete;

  // Starts a call (from any thread, the loop's included); returns its id.
  uint64_t submit(UpstreamCall call);
  // Closes the call's connection; on_done runs with cancelled = true unless
  // it has already finished.
  void cancel(uint64_t id);
  int open_calls() const;

  struct Loop;

 private:
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace parallm
