// ChatFormatter: validates OpenAI messages into plain {role, content} objects
// and renders them with the model's template (see chat_template.h).
#include "server/chat_template.h"

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"
#include "util/json_parse.h"
#include "util/log.h"

namespace parallm {

const char* const kDefaultChatTemplate =
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ message['role'] | capitalize }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}";

ChatFormatter::ChatFormatter(const std::optional<std::string>& template_source, std::string bos_token,
                             std::string eos_token)
    : tpl_(template_source && !template_source->empty() ? *template_source : std::string(kDefaultChatTemplate)),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      uses_default_(!template_source || template_source->empty()),
      tool_call_format_(uses_default_                                                  ? ToolCallFormat::kNone
                        : template_source->find("<tool_call>") != std::string::npos    ? ToolCallFormat::kHermes
                        : template_source->find("<|python_tag|>") != std::string::npos ? ToolCallFormat::kLlamaJson
                        : template_source->find("[TOOL_CALLS]") != std::string::npos   ? ToolCallFormat::kMistral
                                                                                       : ToolCallFormat::kNone) {}

ChatFormatter ChatFormatter::for_tokenizer(const Tokenizer& tokenizer, const std::string& override_source) {
  const std::string bos = tokenizer.bos_id() >= 0 ? tokenizer.token_to_piece(tokenizer.bos_id()) : "";
  const std::string eos = tokenizer.eos_id() >= 0 ? tokenizer.token_to_piece(tokenizer.eos_id()) : "";
  if (!override_source.empty()) {
    try {
      return ChatFormatter(override_source, bos, eos);
    } catch (const InputError& e) {
      throw InputError(std::string("--chat-template does not parse: ") + e.what());
    }
  }
  try {
    return ChatFormatter(tokenizer.chat_template(), bos, eos);
  } catch (const InputError& e) {
    log_warn(std::string("chat template of the model is not supported (") + e.what() + "); using the default template");
    return ChatFormatter(std::nullopt, bos, eos);
  }
}

namespace {

// An assistant message's tool_calls, as OpenAI writes them:
// [{"id": str, "type": "function", "function": {"name": str, "arguments": str | object}}].
void check_tool_calls(const nlohmann::ordered_json& calls, const std::string& where) {
  const std::string shape = where +
                            ".tool_calls must be an array of {\"id\": string, \"type\": \"function\", "
                            "\"function\": {\"name\": string, \"arguments\": string}}";
  if (!calls.is_array()) throw bad_request(shape, "messages");
  for (const auto& c : calls) {
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) throw bad_request(shape, "messages");
    if (c.contains("type") && c["type"] != "function") throw bad_request(shape, "messages");
    if (c.contains("id") && !c["id"].is_null() && !c["id"].is_string()) throw bad_request(shape, "messages");
    const auto& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get_ref<const std::string&>().empty()) {
      throw bad_request(shape, "messages");
    }
    if (f.contains("arguments") && !f["arguments"].is_string() && !f["arguments"].is_object()) {
      throw bad_request(shape, "messages");
    }
  }
}

}  // namespace

std::string ChatFormatter::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                  const nlohmann::ordered_json& tools, const nlohmann::ordered_json& kwargs) const {
  if (!messages.is_array()) throw bad_request("'messages' must be an array", "messages");
  if (messages.empty()) throw bad_request("'messages' must not be empty", "messages");
  nlohmann::ordered_json clean = nlohmann::ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_request(where + " must be an object", "messages");
    if (!m.contains("role") || !m["role"].is_string()) throw bad_request(where + ".role must be a string", "messages");
    nlohmann::ordered_json out = m;  // keeps tool_calls, name, ... for templates that use them
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
      throw bad_request(where + ".role must be system, user, assistant, tool or developer", "messages");
    }
    if (!m.contains("content") || m["content"].is_null()) {
      if (role != "assistant") throw bad_request(where + ".content is required", "messages");
      out["content"] = nullptr;
    } else if (m["content"].is_array()) {
      std::string text;
      for (const auto& part : m["content"]) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          throw bad_request(where + ".content parts must be {\"type\": \"text\", \"text\": string}", "messages");
        }
        text += part["text"].get<std::string>();
      }
      out["content"] = text;
    } else if (!m["content"].is_string()) {
      throw bad_request(where + ".content must be a string or an array of text parts", "messages");
    }
    for (const char* key : {"name", "tool_call_id"}) {
      if (m.contains(key) && !m[key].is_null() && !m[key].is_string()) {
        throw bad_request(where + "." + key + " must be a string", "messages");
      }
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) check_tool_calls(m["tool_calls"], where);
    // Assistant tool calls carry their arguments as a JSON string (OpenAI);
    // templates print them with `tojson`, so they get the object, as
    // vLLM hands them over. A string that is not JSON stays a string.
    if (out.contains("tool_calls") && out["tool_calls"].is_array()) {
      for (auto& call : out["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        auto& fn = call["function"];
        if (fn.contains("arguments") && fn["arguments"].is_string()) {
          auto parsed =
              try_parse_json<nlohmann::ordered_json>(fn["arguments"].get<std::string>(), JsonLimits{kRequestJsonDepth});
          if (parsed && parsed->is_object()) fn["arguments"] = std::move(*parsed);
        }
      }
    }
    clean.push_back(std::move(out));
  }
  // The kwargs' keys are distinct (parsing kept one of each), so a copy is
  // what inserting them one by one gave, without a linear search per key.
  nlohmann::ordered_json ctx = kwargs.is_object() ? kwargs : nlohmann::ordered_json::object();
  ctx["messages"] = std::move(clean);
  if (tools.is_array() && !tools.empty()) ctx["tools"] = tools;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  try {
    return tpl_.render(ctx);
  } catch (const InputError& e) {
    throw bad_request(e.what(), "messages");
  }
}

}  // namespace parallm
