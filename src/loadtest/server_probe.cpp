// Resolution, connect probe and blocking GET; see server_probe.h.
#include "loadtest/server_probe.h"

#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "loadtest/http_response_parser.h"
#include "loadtest/stream_client.h"
#include "util/check.h"

namespace parallm::loadtest {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

ServerAddress resolve_address(const HttpUrl& url) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(url.port);
  const int rc = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw InputError("cannot resolve host '" + url.host + "' of --url: " + gai_strerror(rc));
  }
  ServerAddress server;
  std::memcpy(&server.addr, res->ai_addr, res->ai_addrlen);
  server.addr_len = res->ai_addrlen;
  server.display = "http://" + url.authority();
  freeaddrinfo(res);
  return server;
}

namespace {

// Blocking connect with a timeout; returns the fd or throws InputError.
int connect_blocking(const ServerAddress& server, double timeout_s) {
  int err = 0;
  const int fd = start_connect(server, &err);
  if (fd < 0) throw InputError("cannot reach " + server.display + ": " + errno_text(err));
  pollfd p{fd, POLLOUT, 0};
  const int rc = poll(&p, 1, static_cast<int>(timeout_s * 1e3));
  socklen_t len = sizeof(err);
  if (rc == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (rc != 1 || err != 0) {
    close(fd);
    throw InputError("cannot reach " + server.display + ": " +
                     (rc == 0 ? std::string("connection timed out") : errno_text(err)) +
                     " (is the server running and --url right?)");
  }
  return fd;
}

}  // namespace

void probe_connect(const ServerAddress& server, double timeout_s) { close(connect_blocking(server, timeout_s)); }

HttpGetResult http_get(const ServerAddress& server, const HttpUrl& url, const std::string& path,
                       const std::string& api_key, double timeout_s) {
  const int fd = connect_blocking(server, timeout_s);
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + url.authority() +
                    "\r\nUser-Agent: parallm-bench\r\nAccept: application/json\r\nConnection: close\r\n";
  if (!api_key.empty()) req += "Authorization: Bearer " + api_key + "\r\n";
  req += "\r\n";
  HttpResponseParser parser;
  HttpGetResult result;
  const double deadline = monotonic_s() + timeout_s;
  size_t sent = 0;
  char buf[16 * 1024];
  while (parser.state() != HttpResponseParser::State::kDone && parser.state() != HttpResponseParser::State::kError) {
    const double left = deadline - monotonic_s();
    if (left <= 0) break;
    pollfd p{fd, static_cast<short>(sent < req.size() ? POLLOUT : POLLIN), 0};
    if (poll(&p, 1, static_cast<int>(std::ceil(left * 1e3))) <= 0) break;
    if (sent < req.size()) {
      const ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
      continue;
    }
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      parser.on_eof();
      break;
    }
    parser.feed(std::string_view(buf, static_cast<size_t>(n)), result.body);
    if (result.body.size() > (1u << 20)) break;
  }
  close(fd);
  if (parser.state() != HttpResponseParser::State::kDone) {
    throw InputError("GET " + server.display + path + " failed: no complete HTTP response");
  }
  result.status = parser.status();
  return result;
}

}  // namespace parallm::loadtest
