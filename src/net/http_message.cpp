#include "net/http_message.h"

#include <cctype>

namespace parallm::net {

bool header_name_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string_view header_value(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (header_name_equal(k, name)) return v;
  }
  return {};
}

bool has_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& kv : headers) {
    if (header_name_equal(kv.first, name)) return true;
  }
  return false;
}

namespace {

// Does a comma-separated header value hold `token` (case-insensitively)?
bool list_has_token(std::string_view list, std::string_view token) {
  size_t i = 0;
  while (i <= list.size()) {
    size_t j = list.find(',', i);
    if (j == std::string_view::npos) j = list.size();
    std::string_view item = list.substr(i, j - i);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (header_name_equal(item, token)) return true;
    i = j + 1;
  }
  return false;
}

}  // namespace

bool HttpRequest::keep_alive() const {
  const std::string_view c = header("Connection");
  if (version_minor == 0) return list_has_token(c, "keep-alive");
  return !list_has_token(c, "close");
}

void HttpResponse::set_header(std::string name, std::string value) {
  for (auto& kv : headers) {
    if (header_name_equal(kv.first, name)) {
      kv.second = std::move(value);
      return;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
}

void HttpResponse::set_content(std::string b, std::string content_type) {
  body = std::move(b);
  set_header("Content-Type", std::move(content_type));
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 421:
      return "Misdirected Request";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "";
  }
}

}  // namespace parallm::net
