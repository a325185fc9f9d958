// Request validation (see openai_request.h). Unknown fields are ignored, as
// the OpenAI SDKs send optional ones; known fields are type- and range-checked.
#include "server/openai_request.h"

#include <random>

#include "server/api_error.h"
#include "server/structured_output.h"

namespace parallm {
namespace {

// One parse keeps the request's key order: templates print messages and
// tools (`tojson`) as Python would, in that order.
using json = nlohmann::ordered_json;

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

double get_number(const json& j, const char* key, double lo, double hi, double dflt) {
  if (!present(j, key)) return dflt;
  const json& v = j[key];
  if (!v.is_number()) throw bad_request(std::string("'") + key + "' must be a number", key);
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) {
    throw bad_request(std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump(), key);
  }
  return x;
}

std::optional<int64_t> get_int(const json& j, const char* key, int64_t lo, int64_t hi) {
  if (!present(j, key)) return std::nullopt;
  const json& v = j[key];
  // A float names an integer when it is one and fits int64 (2^63 bounds: casting beyond them is undefined).
  const double d = v.is_number_float() ? v.get<double>() : 0.0;
  const bool integral_float = v.is_number_float() && d >= -9223372036854775808.0 && d < 9223372036854775808.0 &&
                              d == static_cast<double>(static_cast<int64_t>(d));
  if (!v.is_number_integer() && !integral_float)
    throw bad_request(std::string("'") + key + "' must be an integer", key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw bad_request(std::string("'") + key + "' is out of range", key);
  }
  const int64_t x = v.is_number_float() ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
  if (x < lo || x > hi) {
    throw bad_request(std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi),
                      key);
  }
  return x;
}

bool get_bool(const json& j, const char* key, bool dflt) {
  if (!present(j, key)) return dflt;
  if (!j[key].is_boolean()) throw bad_request(std::string("'") + key + "' must be a boolean", key);
  return j[key].get<bool>();
}

std::string get_string(const json& j, const char* key) {
  if (!present(j, key)) return "";
  if (!j[key].is_string()) throw bad_request(std::string("'") + key + "' must be a string", key);
  return j[key].get<std::string>();
}

std::vector<int32_t> parse_token_ids(const json& a) {
  std::vector<int32_t> ids;
  for (const auto& t : a) {
    if (!t.is_number_integer() || (t.is_number_integer() && !t.is_number_unsigned() && t.get<int64_t>() < 0) ||
        (t.is_number_unsigned() && t.get<uint64_t>() > INT32_MAX)) {
      throw bad_request("'prompt' token ids must be non-negative integers", "prompt");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

// OpenAI's four prompt shapes: "text", ["text", ...], [ids], [[ids], ...].
std::vector<PromptInput> parse_prompts(const json& pr) {
  const char* shape =
      "'prompt' must be a non-empty string, array of strings, array of token ids or array of such arrays";
  std::vector<PromptInput> out;
  if (pr.is_string()) {
    out.push_back({false, pr.get<std::string>(), {}});
    return out;
  }
  if (!pr.is_array() || pr.empty()) throw bad_request(shape, "prompt");
  if (pr[0].is_number()) {
    out.push_back({true, "", parse_token_ids(pr)});
    return out;
  }
  if (static_cast<int64_t>(pr.size()) > kMaxChoicesPerRequest) {
    throw bad_request("'prompt' holds " + std::to_string(pr.size()) + " prompts; at most " +
                          std::to_string(kMaxChoicesPerRequest) + " per request",
                      "prompt");
  }
  for (const auto& x : pr) {
    if (x.is_string()) {
      out.push_back({false, x.get<std::string>(), {}});
    } else if (x.is_array() && !x.empty()) {
      out.push_back({true, "", parse_token_ids(x)});
    } else {
      throw bad_request(shape, "prompt");
    }
  }
  return out;
}

// {"50256": -100, ...}: token id (as a string key) to a bias in [-100, 100].
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& lb) {
  if (!lb.is_object()) throw bad_request("'logit_bias' must be an object mapping token ids to numbers", "logit_bias");
  if (lb.size() > 1024) throw bad_request("'logit_bias' may hold at most 1024 entries", "logit_bias");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, v] : lb.items()) {
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos)
      id = std::stoll(key);
    if (id < 0 || id > INT32_MAX) throw bad_request("'logit_bias' key '" + key + "' is not a token id", "logit_bias");
    if (!v.is_number()) throw bad_request("'logit_bias' values must be numbers", "logit_bias");
    const double b = v.get<double>();
    if (!(b >= -100.0 && b <= 100.0))
      throw bad_request("'logit_bias' values must be between -100 and 100", "logit_bias");
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return out;
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}];
// tool_choice: "none" (tools are not shown to the model), "auto", absent,
// "required" or a named function (both constrained: structured_output.h).
void parse_tools(const json& j, CompletionParams* p) {
  if (present(j, "tool_choice")) {
    const json& tc = j["tool_choice"];
    if (!tc.is_string() && !tc.is_object())
      throw bad_request("'tool_choice' must be a string or an object", "tool_choice");
    const std::string choice = tc.is_string() ? tc.get<std::string>() : "named";
    if (choice == "none") return;
    if (choice != "auto" && choice != "required" && choice != "named") {
      throw bad_request("'tool_choice' '" + choice + "' is not one of 'none', 'auto', 'required' or a named function",
                        "tool_choice");
    }
  }
  if (!present(j, "tools")) return;
  const json& tools = j["tools"];
  if (!tools.is_array()) throw bad_request("'tools' must be an array", "tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object()) {
      throw bad_request(where + " must be {\"type\": \"function\", \"function\": {...}}", "tools");
    }
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty()) {
      throw bad_request(where + ".function.name must be a non-empty string", "tools");
    }
    if (f.contains("description") && !f["description"].is_string() && !f["description"].is_null()) {
      throw bad_request(where + ".function.description must be a string", "tools");
    }
    if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null()) {
      throw bad_request(where + ".function.parameters must be an object", "tools");
    }
  }
  if (!tools.empty()) p->tools = tools;
}

// vLLM's prompt_logprobs (an int; vLLM's -1, the whole vocabulary, is not
// offered: a 32,000-entry map per prompt token). Like vLLM, not with stream.
void parse_prompt_logprobs(const json& j, CompletionParams* p) {
  if (!present(j, "prompt_logprobs")) return;
  const json& v = j["prompt_logprobs"];
  if (!v.is_number_integer()) throw bad_request("'prompt_logprobs' must be an integer", "prompt_logprobs");
  if (!v.is_number_unsigned() && v.get<int64_t>() == -1) {
    throw bad_request(
        "'prompt_logprobs' -1 (the whole vocabulary) is not supported; at most " + std::to_string(kMaxLogprobs),
        "prompt_logprobs");
  }
  if ((!v.is_number_unsigned() && v.get<int64_t>() < 0) ||
      (v.is_number_unsigned() && v.get<uint64_t>() > kMaxLogprobs)) {
    throw bad_request("'prompt_logprobs' must be between 0 and " + std::to_string(kMaxLogprobs), "prompt_logprobs");
  }
  if (get_bool(j, "stream", false)) {
    throw bad_request("'prompt_logprobs' is not available with 'stream': true", "prompt_logprobs");
  }
  p->prompt_logprobs = static_cast<int32_t>(v.get<int64_t>());
}

}  // namespace

CompletionParams parse_completion_request(const std::string& body, bool chat, const JsonLimits& limits) {
  JsonError error;
  std::optional<json> parsed = try_parse_json<json>(body, limits, &error);  // rejects invalid UTF-8 too
  if (!parsed) {
    if (error.too_deep || error.too_wide) throw bad_request("request body: " + error.message);
    throw bad_request("request body is not valid JSON at byte " + std::to_string(error.byte) + ": " + error.detail);
  }
  const json& j = *parsed;
  if (!j.is_object()) throw bad_request("request body must be a JSON object");
  CompletionParams p;
  p.chat = chat;
  p.model = get_string(j, "model");
  if (chat) {
    if (!present(j, "messages")) throw bad_request("'messages' is required", "messages");
    if (!j["messages"].is_array()) throw bad_request("'messages' must be an array", "messages");
    p.messages = j["messages"];
    parse_tools(j, &p);
    if (present(j, "chat_template_kwargs")) {
      if (!j["chat_template_kwargs"].is_object()) {
        throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
      }
      p.chat_template_kwargs = j["chat_template_kwargs"];
    }
  } else {
    if (!present(j, "prompt")) throw bad_request("'prompt' is required", "prompt");
    p.prompts = parse_prompts(j["prompt"]);
    p.echo = get_bool(j, "echo", false);
  }
  const auto mt = get_int(j, "max_tokens", 1, INT32_MAX);
  const auto mct = get_int(j, "max_completion_tokens", 1, INT32_MAX);
  p.max_tokens = mct ? mct : mt;
  p.n = get_int(j, "n", 1, kMaxChoicesPerRequest).value_or(1);
  const int64_t n_prompts = chat ? 1 : static_cast<int64_t>(p.prompts.size());
  if (n_prompts * p.n > kMaxChoicesPerRequest) {
    throw bad_request("prompts x 'n' is " + std::to_string(n_prompts * p.n) + "; at most " +
                          std::to_string(kMaxChoicesPerRequest) + " choices per request",
                      "n");
  }
  const auto best_of = get_int(j, "best_of", 1, INT32_MAX);
  if (best_of && *best_of != p.n) {
    throw bad_request("'best_of' other than 'n' is not supported (no choices are generated to be discarded)",
                      "best_of");
  }
  if (chat) {
    const bool want = get_bool(j, "logprobs", false);
    const auto top = get_int(j, "top_logprobs", 0, kMaxLogprobs);
    if (top && !want) throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (want) p.logprobs = static_cast<int32_t>(top.value_or(0));
  } else {
    const auto lp = get_int(j, "logprobs", 0, kMaxLogprobs);
    if (lp) p.logprobs = static_cast<int32_t>(*lp);
    if (present(j, "suffix") && !(j["suffix"].is_string() && j["suffix"].get<std::string>().empty())) {
      throw bad_request("'suffix' is not supported", "suffix");
    }
  }
  parse_prompt_logprobs(j, &p);
  // Structured outputs: response_format, guided_*, structured_outputs, tool_choice.
  {
    StructuredOutput so = parse_structured_output(j, p.tools, chat);
    p.sampling.constraint = std::move(so.constraint);
    p.forced_tool = std::move(so.forced_tool);
    p.tool_required = so.tool_required;
  }

  SamplingParams& s = p.sampling;
  s.temperature = static_cast<float>(get_number(j, "temperature", 0.0, 2.0, 1.0));
  s.top_p = static_cast<float>(get_number(j, "top_p", 0.0, 1.0, 1.0));
  if (s.top_p <= 0.0f) throw bad_request("'top_p' must be in (0, 1]", "top_p");
  const auto top_k = get_int(j, "top_k", -1, INT32_MAX);
  s.top_k = top_k && *top_k > 0 ? static_cast<int32_t>(*top_k) : 0;  // -1 and 0 mean off
  s.min_p = static_cast<float>(get_number(j, "min_p", 0.0, 1.0, 0.0));
  s.presence_penalty = static_cast<float>(get_number(j, "presence_penalty", -2.0, 2.0, 0.0));
  s.frequency_penalty = static_cast<float>(get_number(j, "frequency_penalty", -2.0, 2.0, 0.0));
  s.repetition_penalty = static_cast<float>(get_number(j, "repetition_penalty", 0.01, 10.0, 1.0));
  if (present(j, "seed")) {
    if (!j["seed"].is_number_integer()) throw bad_request("'seed' must be an integer", "seed");
    s.seed =
        j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>() : static_cast<uint64_t>(j["seed"].get<int64_t>());
  } else {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    s.seed = rng();
  }

  if (present(j, "stop")) {
    const json& st = j["stop"];
    if (st.is_string()) {
      p.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      for (const auto& x : st) {
        if (!x.is_string()) throw bad_request("'stop' must be a string or an array of strings", "stop");
        p.stop.push_back(x.get<std::string>());
      }
    } else {
      throw bad_request("'stop' must be a string or an array of strings", "stop");
    }
    if (p.stop.size() > 16) throw bad_request("'stop' may hold at most 16 strings", "stop");
    for (const auto& x : p.stop) {
      if (x.empty() || x.size() > 1024) throw bad_request("each 'stop' string must have 1 to 1024 bytes", "stop");
    }
  }
  p.stream = get_bool(j, "stream", false);
  if (present(j, "stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
    if (!p.stream) throw bad_request("'stream_options' is only allowed with 'stream': true", "stream_options");
    p.include_usage = get_bool(so, "include_usage", false);
  }
  if (present(j, "logit_bias")) s.logit_bias = parse_logit_bias(j["logit_bias"]);
  // vLLM's extra sampling fields.
  s.min_tokens = static_cast<int32_t>(get_int(j, "min_tokens", 0, INT32_MAX).value_or(0));
  if (p.max_tokens && s.min_tokens > *p.max_tokens) {
    throw bad_request("'min_tokens' must not exceed 'max_tokens'", "min_tokens");
  }
  if (present(j, "stop_token_ids")) {
    const json& st = j["stop_token_ids"];
    if (!st.is_array() || st.size() > 64)
      throw bad_request("'stop_token_ids' must be an array of at most 64 token ids", "stop_token_ids");
    for (const json& t : st) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
        throw bad_request("'stop_token_ids' must hold non-negative integers", "stop_token_ids");
      }
      p.stop_token_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  }
  p.include_stop_str_in_output = get_bool(j, "include_stop_str_in_output", false);
  p.skip_special_tokens = get_bool(j, "skip_special_tokens", true);
  p.ignore_eos = get_bool(j, "ignore_eos", false);
  const auto prio = get_int(j, "priority", -1000000, 1000000);
  p.priority = prio ? static_cast<int>(*prio) : 0;
  p.user = get_string(j, "user");
  try {
    s.validate();
  } catch (const std::exception& e) {
    throw bad_request(e.what());
  }
  return p;
}

}  // namespace parallm
