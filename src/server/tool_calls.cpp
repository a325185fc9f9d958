#include "server/tool_calls.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "server/stop_matcher.h"
#include "util/json_parse.h"

namespace parallm {
namespace {

constexpr const char* kOpen = "<tool_call>";
constexpr const char* kClose = "</tool_call>";
constexpr const char* kPythonTag = "<|python_tag|>";
constexpr const char* kMistralTag = "[TOOL_CALLS]";
constexpr const char* kMistralArgs = "[ARGS]";

// Model output is untrusted too: a call nested past the request limit is
// text, not a call.
std::optional<nlohmann::ordered_json> parse_output_json(const std::string& text) {
  return try_parse_json<nlohmann::ordered_json>(text, JsonLimits{kRequestJsonDepth});
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// OpenAI-style "call_" + 24 alphanumerics; Mistral's templates refuse any id
// but 9 alphanumerics.
std::string call_id(ToolCallFormat format) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const bool mistral = format == ToolCallFormat::kMistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += alnum[rng() % 62];
  return id;
}

}  // namespace

std::string ToolCallSplitter::push(const std::string& text) {
  if (started_) {
    kept_ += text;
    return "";
  }
  if (format_ == ToolCallFormat::kLlamaJson) return push_llama(text);
  if (format_ == ToolCallFormat::kMistral && !plain_) {
    // An answer that opens with '[' is the call list ([TOOL_CALLS] itself
    // opens with '['); leading whitespace is held until that is known.
    pending_ += text;
    const size_t first = pending_.find_first_not_of(" \n\t\r");
    if (first == std::string::npos) return "";
    if (pending_[first] == '[') {
      started_ = true;
      kept_.swap(pending_);
      pending_.clear();
      return "";
    }
    plain_ = true;
    const std::string held = std::move(pending_);
    pending_.clear();
    return push_tagged(held, kMistralTag);
  }
  return push_tagged(text, format_ == ToolCallFormat::kMistral ? kMistralTag : kOpen);
}

// Content streams until `tag`; from it on the text is kept.
std::string ToolCallSplitter::push_tagged(const std::string& text, const std::string& open) {
  pending_ += text;
  const size_t at = pending_.find(open);
  if (at != std::string::npos) {
    started_ = true;
    kept_ = pending_.substr(at);
    std::string out = pending_.substr(0, at);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a prefix of the tag.
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

bool is_mistral_id(const nlohmann::ordered_json& id) {
  if (!id.is_string() || id.get<std::string>().size() != 9) return false;
  for (char c : id.get<std::string>()) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// One call object: {"name": str, "arguments" | "parameters": object or JSON string}.
std::optional<nlohmann::json> call_of_json(const nlohmann::ordered_json& j, ToolCallFormat format) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
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
  // A Mistral model may write the id it was trained to give the call.
  const bool own_id = format == ToolCallFormat::kMistral && j.contains("id") && is_mistral_id(j["id"]);
  return nlohmann::json{{"id", own_id ? j["id"].get<std::string>() : call_id(format)},
                        {"type", "function"},
                        {"function", {{"name", j["name"].get<std::string>()}, {"arguments", args}}}};
}

std::optional<nlohmann::json> call_of(const std::string& body, ToolCallFormat format = ToolCallFormat::kHermes) {
  const auto j = parse_output_json(body);
  if (!j) return std::nullopt;
  return call_of_json(*j, format);
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

// Mistral: [TOOL_CALLS] (or nothing) then a JSON array of calls (or one call
// object); or, per call, [TOOL_CALLS]name[ARGS]{arguments}.
std::optional<nlohmann::json> parse_mistral(const std::string& kept) {
  const std::string tag = kMistralTag, args_tag = kMistralArgs;
  std::string text = trim(kept);
  nlohmann::json calls = nlohmann::json::array();
  if (text.find(args_tag) != std::string::npos) {
    size_t pos = 0;
    while (pos < text.size()) {
      if (text.compare(pos, tag.size(), tag) != 0) return std::nullopt;
      pos += tag.size();
      const size_t a = text.find(args_tag, pos);
      if (a == std::string::npos) return std::nullopt;
      const std::string name = trim(text.substr(pos, a - pos));
      const size_t next = std::min(text.find(tag, a), text.size());
      const auto args = parse_output_json(trim(text.substr(a + args_tag.size(), next - a - args_tag.size())));
      if (name.empty() || !args || !args->is_object()) return std::nullopt;
      auto call = call_of_json(nlohmann::ordered_json{{"name", name}, {"arguments", *args}}, ToolCallFormat::kMistral);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
      pos = next;
    }
    if (calls.empty()) return std::nullopt;
    return calls;
  }
  if (text.compare(0, tag.size(), tag) == 0) text = trim(text.substr(tag.size()));
  const auto parsed = parse_output_json(text);
  if (!parsed) return std::nullopt;
  const nlohmann::ordered_json& j = *parsed;
  if (j.is_object()) {
    auto call = call_of_json(j, ToolCallFormat::kMistral);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    return calls;
  }
  if (!j.is_array() || j.empty()) return std::nullopt;
  for (const auto& one : j) {
    auto call = call_of_json(one, ToolCallFormat::kMistral);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

}  // namespace

std::optional<nlohmann::json> parse_tool_calls(ToolCallFormat format, const std::string& kept) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return parse_hermes(kept);
    case ToolCallFormat::kLlamaJson:
      return parse_llama_json(kept);
    case ToolCallFormat::kMistral:
      return parse_mistral(kept);
    case ToolCallFormat::kNone:
      break;
  }
  return std::nullopt;
}

std::optional<nlohmann::json> forced_tool_calls(const std::string& text, const std::string& function) {
  JsonError error;
  auto parsed = try_parse_json<nlohmann::ordered_json>(text, JsonLimits{kRequestJsonDepth}, &error);
  if (!parsed) return std::nullopt;
  auto call = [](const std::string& name, const nlohmann::ordered_json& args) {
    return nlohmann::json{{"id", call_id(ToolCallFormat::kHermes)},
                          {"type", "function"},
                          {"function", {{"name", name}, {"arguments", args.dump()}}}};
  };
  nlohmann::json calls = nlohmann::json::array();
  if (!function.empty()) {
    calls.push_back(call(function, *parsed));
    return calls;
  }
  if (!parsed->is_array() || parsed->empty()) return std::nullopt;
  for (const auto& c : *parsed) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("parameters"))
      return std::nullopt;
    calls.push_back(call(c["name"].get<std::string>(), c["parameters"]));
  }
  return calls;
}

}  // namespace parallm
