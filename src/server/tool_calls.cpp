#include "server/tool_calls.h"

#include "server/stop_matcher.h"

#include <random>

namespace parallm {
namespace {

constexpr const char* kOpen = "<tool_call>";
constexpr const char* kClose = "</tool_call>";
constexpr const char* kPythonTag = "<|python_tag|>";

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
  if (format_ == ToolCallFormat::kLlamaJson) return push_llama(text);
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
  const size_t hold = partial_marker_tail(pending_, open);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

// Llama: the answer is a call when it opens with '{' (or the python tag, when
// special tokens are written). Leading whitespace is held until that is known.
std::string ToolCallSplitter::push_llama(const std::string& text) {
  if (plain_) return text;
  pending_ += text;
  const size_t first = pending_.find_first_not_of(" \n\t\r");
  if (first == std::string::npos) return "";
  const std::string tag = kPythonTag;
  const std::string rest = pending_.substr(first);
  if (rest[0] == '{' || rest.compare(0, tag.size(), tag) == 0) {
    started_ = true;
    kept_.swap(pending_);
    pending_.clear();
    return "";
  }
  if (rest.size() < tag.size() && tag.compare(0, rest.size(), rest) == 0) return "";  // maybe the tag
  plain_ = true;
  std::string out;
  out.swap(pending_);
  return out;
}

std::string ToolCallSplitter::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

namespace {

// One call object: {"name": str, "arguments" | "parameters": object or JSON string}.
std::optional<nlohmann::json> call_of(const std::string& body) {
  const auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  std::string args = "{}";
  const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
  if (key != nullptr) {
    const auto& a = j[key];
    if (a.is_string()) {
      args = a.get<std::string>();
    } else if (a.is_object()) {
      args = a.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    } else {
      return std::nullopt;
    }
  }
  return nlohmann::json{{"id", call_id()},
                        {"type", "function"},
                        {"function", {{"name", j["name"].get<std::string>()}, {"arguments", args}}}};
}

std::optional<nlohmann::json> parse_hermes(const std::string& kept) {
  const std::string open = kOpen, close = kClose;
  nlohmann::json calls = nlohmann::json::array();
  size_t pos = 0;
  for (;;) {
    while (pos < kept.size() && is_space(kept[pos])) ++pos;
    if (pos == kept.size()) break;
    if (kept.compare(pos, open.size(), open) != 0) return std::nullopt;
    pos += open.size();
    // A missing close tag is accepted at the very end (generation stopped on it).
    const size_t end = kept.find(close, pos);
    auto call = call_of(trim(kept.substr(pos, end == std::string::npos ? std::string::npos : end - pos)));
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    pos = end == std::string::npos ? kept.size() : end + close.size();
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Llama: one JSON object, or several separated by ';' (as vLLM's llama3_json accepts).
std::optional<nlohmann::json> parse_llama_json(const std::string& kept) {
  std::string text = trim(kept);
  const std::string tag = kPythonTag;
  if (text.compare(0, tag.size(), tag) == 0) text = trim(text.substr(tag.size()));
  nlohmann::json calls = nlohmann::json::array();
  if (auto one = call_of(text)) {
    calls.push_back(std::move(*one));
    return calls;
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(';', pos), text.size());
    const std::string piece = trim(text.substr(pos, end - pos));
    if (!piece.empty()) {
      auto call = call_of(piece);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    pos = end + 1;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace

std::optional<nlohmann::json> parse_tool_calls(ToolCallFormat format, const std::string& kept) {
  switch (format) {
    case ToolCallFormat::kHermes: return parse_hermes(kept);
    case ToolCallFormat::kLlamaJson: return parse_llama_json(kept);
    case ToolCallFormat::kNone: break;
  }
  return std::nullopt;
}

}  // namespace parallm
