// URL parsing for --url; see http_url.h for the accepted forms.
#include "loadtest/http_url.h"

#include <cstdlib>

#include "util/check.h"

namespace parallm::loadtest {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The part of the path before any "/v1..." endpoint suffix, used to find /v1/models.
std::string strip_endpoint(std::string path) {
  for (const char* suffix : {"/chat/completions", "/completions"}) {
    if (ends_with(path, suffix)) {
      path.resize(path.size() - std::string(suffix).size());
      break;
    }
  }
  return path;
}

}  // namespace

std::string HttpUrl::authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string HttpUrl::to_string() const { return "http://" + authority() + base_path; }

HttpUrl parse_http_url(const std::string& text) {
  const std::string prefix = "http://";
  if (text.rfind("https://", 0) == 0) {
    throw InputError("--url " + text + ": https is not supported; point bench at the server's plain http port");
  }
  if (text.rfind(prefix, 0) != 0) {
    throw InputError("--url '" + text + "' must start with http:// (e.g. http://127.0.0.1:8000)");
  }
  std::string rest = text.substr(prefix.size());
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  HttpUrl url;
  url.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  if (url.base_path.find_first_of("?# ") != std::string::npos) {
    throw InputError("--url '" + text + "' must not contain a query, fragment or spaces");
  }
  while (!url.base_path.empty() && url.base_path.back() == '/') url.base_path.pop_back();
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw InputError("--url '" + text + "': unterminated IPv6 literal");
    url.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw InputError("--url '" + text + "': bad host");
      port_text = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.find(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (url.host.empty() || url.host.find('@') != std::string::npos) {
    throw InputError("--url '" + text + "' has no usable host");
  }
  if (!port_text.empty()) {
    char* end = nullptr;
    const long port = std::strtol(port_text.c_str(), &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
      throw InputError("--url '" + text + "': port must be 1..65535");
    }
    url.port = static_cast<int>(port);
  }
  return url;
}

std::string endpoint_path(const HttpUrl& url, bool chat) {
  const std::string& p = url.base_path;
  if (ends_with(p, "/chat/completions") || ends_with(p, "/completions")) return p;
  const std::string tail = chat ? "/chat/completions" : "/completions";
  if (ends_with(p, "/v1")) return p + tail;
  return p + "/v1" + tail;
}

std::string models_path(const HttpUrl& url) {
  std::string p = strip_endpoint(url.base_path);
  if (ends_with(p, "/v1")) return p + "/models";
  return p + "/v1/models";
}

}  // namespace parallm::loadtest
