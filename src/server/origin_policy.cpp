#include "server/origin_policy.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "Example.com:8000" -> "example.com", "[::1]:80" -> "[::1]".
std::string host_name(std::string_view h) {
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    return lower(close == std::string_view::npos ? h : h.substr(0, close + 1));
  }
  const size_t colon = h.rfind(':');
  return lower(colon == std::string_view::npos ? h : h.substr(0, colon));
}

}  // namespace

OriginPolicy::OriginPolicy(std::vector<std::string> allowed_origins, std::vector<std::string> allowed_hosts) {
  for (auto& o : allowed_origins) {
    std::string v = lower(o);
    while (!v.empty() && v.back() == '/') v.pop_back();  // "http://a.com/" is the origin "http://a.com"
    if (!v.empty()) origins_.push_back(v);
  }
  for (auto& h : allowed_hosts) {
    if (!h.empty()) hosts_.push_back(h == "*" ? h : host_name(h));
  }
}

std::string OriginPolicy::allow_origin(std::string_view origin) const {
  if (origins_.empty()) return "";
  if (std::find(origins_.begin(), origins_.end(), "*") != origins_.end()) return "*";
  if (origin.empty()) return "";
  const std::string o = lower(origin);
  return std::find(origins_.begin(), origins_.end(), o) != origins_.end() ? std::string(origin) : "";
}

bool OriginPolicy::host_allowed(std::string_view host_header) const {
  if (hosts_.empty()) return true;
  if (std::find(hosts_.begin(), hosts_.end(), "*") != hosts_.end()) return true;
  if (host_header.empty()) return false;
  return std::find(hosts_.begin(), hosts_.end(), host_name(host_header)) != hosts_.end();
}

std::vector<std::string> OriginPolicy::parse_list(const std::string& option, const std::string& value) {
  std::vector<std::string> out;
  const size_t b = value.find_first_not_of(" \t");
  if (b != std::string::npos && value[b] == '[') {
    const auto j = try_parse_json<nlohmann::json>(value, JsonLimits{kFileJsonDepth});
    if (!j || !j->is_array()) throw InputError(option + " must be a JSON list of strings or comma-separated names");
    for (const auto& e : *j) {
      if (!e.is_string()) throw InputError(option + " must be a JSON list of strings or comma-separated names");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  size_t i = 0;
  while (i <= value.size()) {
    size_t j = value.find(',', i);
    if (j == std::string::npos) j = value.size();
    std::string item = value.substr(i, j - i);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    i = j + 1;
  }
  return out;
}

}  // namespace parallm
