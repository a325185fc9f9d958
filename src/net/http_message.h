// One HTTP/1.x request as the parser delivers it, and one complete response
// as a handler gives it back. Plain data: no sockets, no threads.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parallm::net {

// Header names compare case-insensitively (RFC 9110 §5.1).
bool header_name_equal(std::string_view a, std::string_view b);

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// The first value of a header, or "" when absent.
std::string_view header_value(const HttpHeaders& headers, std::string_view name);
bool has_header(const HttpHeaders& headers, std::string_view name);

struct HttpRequest {
  std::string method;       // "GET", "POST", ... (case-sensitive, as sent)
  std::string target;       // the request-target as sent
  std::string path;         // percent-decoded path, without the query
  std::string query;        // after '?', undecoded ("" when none)
  int version_minor = 1;    // HTTP/1.0 or HTTP/1.1
  HttpHeaders headers;      // in order; names as sent, values trimmed
  std::string body;         // de-chunked
  std::string remote_addr;  // the client's address, as text

  std::string_view header(std::string_view name) const { return header_value(headers, name); }
  // The connection stays open after the response (HTTP/1.1 unless
  // "Connection: close"; HTTP/1.0 only with "Connection: keep-alive").
  bool keep_alive() const;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // Content-Length and Connection are added on the wire
  std::string body;
  bool close = false;  // close the connection after this response

  void set_header(std::string name, std::string value);
  void set_content(std::string b, std::string content_type);
};

// "OK", "Not Found", ... ("" for codes without a phrase here).
const char* reason_phrase(int status);

}  // namespace parallm::net
