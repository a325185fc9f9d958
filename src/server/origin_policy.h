// Which web pages may call the server (CORS) and under which Host names it
// answers. CORS is off unless --allowed-origins is given (then only those
// origins, or "*", get Access-Control-Allow-Origin), so that a page on any
// site cannot drive a server without a key from a visitor's browser. The
// Host allow-list (--allowed-hosts) stops DNS rebinding against a server
// bound to localhost: a rebound name still arrives with its own Host header.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace parallm {

class OriginPolicy {
 public:
  OriginPolicy(std::vector<std::string> allowed_origins, std::vector<std::string> allowed_hosts);

  bool cors_enabled() const { return !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request's Origin ("" = none).
  std::string allow_origin(std::string_view origin) const;
  // Is the Host header (name, optional port) one this server answers to?
  bool host_allowed(std::string_view host_header) const;

  // A list option: a JSON array of strings (as vLLM takes --allowed-origins)
  // or comma-separated names. Throws InputError when malformed.
  static std::vector<std::string> parse_list(const std::string& option, const std::string& value);

 private:
  std::vector<std::string> origins_, hosts_;
};

}  // namespace parallm
