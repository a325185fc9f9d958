// Parsing of the --url value into host, port and request path. Only plain
// http:// is spoken (load tests target a server or its local proxy); https is
// refused with a message rather than silently sending cleartext.
#pragma once
#include <string>

namespace parallm::loadtest {

struct HttpUrl {
  std::string host;  // as given (name or IPv4/IPv6 literal, no brackets)
  int port = 80;
  std::string base_path;  // path as given, without a trailing '/'; may be empty

  std::string authority() const;  // "host:port", bracketed for IPv6, for Host: headers
  std::string to_string() const;  // "http://host:port/path"
};

HttpUrl parse_http_url(const std::string& text);

// The request path of the endpoint under `base_path`:
//  ".../chat/completions" or ".../completions" given in full: used as is;
//  ends with "/v1": + "/chat/completions" (or "/completions");
//  otherwise: + "/v1/chat/completions" (or "/v1/completions").
std::string endpoint_path(const HttpUrl& url, bool chat);
// The models listing path for the same server (".../v1/models").
std::string models_path(const HttpUrl& url);

}  // namespace parallm::loadtest
