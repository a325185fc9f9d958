#include "server/tool_calls.h"

#include <random>

namespace parallm {
namespace {

constexpr const char* kOpen = "<tool_call>";
constexpr const char* kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += alnum[rng() % 62];
  return id;
}

}  // namespace

std::string ToolCallSplitter::push(const std::string& text) {
  if (started_) {
    kept_ += text;
    return "";
  }
  pending_ += text;
  const std::string open = kOpen;
  const size_t at = pending_.find(open);
  if (at != std::string::npos) {
    started_ = true;
    kept_ = pending_.substr(at);
    std::string out = pending_.substr(0, at);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a prefix of "<tool_call>".
  size_t hold = 0;
  for (size_t k = std::min(pending_.size(), open.size() - 1); k > 0; --k) {
    if (pending_.compare(pending_.size() - k, k, open, 0, k) == 0) {
      hold = k;
      break;
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string ToolCallSplitter::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

std::optional<nlohmann::json> parse_hermes_tool_calls(const std::string& kept) {
  const std::string open = kOpen, close = kClose;
  nlohmann::json calls = nlohmann::json::array();
  size_t pos = 0;
  for (;;) {
    while (pos < kept.size() && is_space(kept[pos])) ++pos;
    if (pos == kept.size()) break;
    if (kept.compare(pos, open.size(), open) != 0) return std::nullopt;
    pos += open.size();
    // A missing close tag is accepted at the very end (generation stopped on it).
    size_t end = kept.find(close, pos);
    const std::string body = trim(kept.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    pos = end == std::string::npos ? kept.size() : end + close.size();
    const auto j = nlohmann::ordered_json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
    std::string args = "{}";
    if (j.contains("arguments")) {
      const auto& a = j["arguments"];
      if (a.is_string()) {
        args = a.get<std::string>();
      } else if (a.is_object()) {
        args = a.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      } else {
        return std::nullopt;
      }
    }
    calls.push_back({{"id", call_id()},
                     {"type", "function"},
                     {"function", {{"name", j["name"].get<std::string>()}, {"arguments", args}}}});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace parallm
