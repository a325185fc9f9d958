// Where the server is and whether it answers: name resolution, a connect
// probe (an unreachable --url is bad input: exit 2 before any load), and a
// small blocking GET for /v1/models. The load itself goes through the event
// loop in stream_client.cpp, never through these.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "loadtest/http_url.h"

namespace parallm::loadtest {

struct ServerAddress {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string display;  // "http://host:port" for messages
};

// getaddrinfo on the URL's host; throws InputError when it cannot be resolved.
ServerAddress resolve_address(const HttpUrl& url);
// A blocking TCP connect with a timeout; throws InputError ("cannot reach ...").
void probe_connect(const ServerAddress& server, double timeout_s);

struct HttpGetResult {
  int status = 0;
  std::string body;
};
// A blocking GET, for the /v1/models lookup. Throws InputError on network errors.
HttpGetResult http_get(const ServerAddress& server, const HttpUrl& url, const std::string& path,
                       const std::string& api_key, double timeout_s);

// A non-blocking TCP socket with connect() started (TCP_NODELAY set).
// Returns -1 and sets *err on failure.
int start_connect(const ServerAddress& server, int* err);

}  // namespace parallm::loadtest
