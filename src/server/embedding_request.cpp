// /v1/embeddings request validation (see embedding_request.h). Unknown
// fields are ignored, as for the completion routes.
#include "server/embedding_request.h"

#include "server/api_error.h"

namespace parallm {
namespace {

using json = nlohmann::json;

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

const char* kShape =
    "'input' must be a non-empty string, a non-empty array of strings, an array of token ids or an "
    "array of non-empty arrays of token ids";

std::vector<int32_t> token_ids(const json& a) {
  if (a.empty()) throw bad_request(kShape, "input");
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (const json& t : a) {
    if (!t.is_number_integer() || (!t.is_number_unsigned() && t.get<int64_t>() < 0) ||
        (t.is_number_unsigned() && t.get<uint64_t>() > INT32_MAX)) {
      throw bad_request("'input' token ids must be non-negative integers", "input");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

PromptInput text(const json& s) {
  // OpenAI refuses an empty string; its embedding would be the BOS token's alone.
  if (s.get_ref<const std::string&>().empty()) throw bad_request("'input' strings must not be empty", "input");
  return {false, s.get<std::string>(), {}};
}

std::vector<PromptInput> parse_inputs(const json& in) {
  std::vector<PromptInput> out;
  if (in.is_string()) {
    out.push_back(text(in));
    return out;
  }
  if (!in.is_array() || in.empty()) throw bad_request(kShape, "input");
  if (in[0].is_number()) {
    out.push_back({true, "", token_ids(in)});
    return out;
  }
  if (static_cast<int64_t>(in.size()) > kMaxEmbeddingInputs) {
    throw bad_request("'input' holds " + std::to_string(in.size()) + " inputs; at most " +
                          std::to_string(kMaxEmbeddingInputs) + " per request",
                      "input");
  }
  for (const json& x : in) {
    if (x.is_string()) {
      out.push_back(text(x));
    } else if (x.is_array()) {
      out.push_back({true, "", token_ids(x)});
    } else {
      throw bad_request(kShape, "input");
    }
  }
  return out;
}

}  // namespace

EmbeddingParams parse_embedding_request(const std::string& body, const JsonLimits& limits) {
  JsonError error;
  std::optional<json> parsed = try_parse_json<json>(body, limits, &error);
  if (!parsed) {
    if (error.too_deep || error.too_wide) throw bad_request("request body: " + error.message);
    throw bad_request("request body is not valid JSON at byte " + std::to_string(error.byte) + ": " + error.detail);
  }
  const json& j = *parsed;
  if (!j.is_object()) throw bad_request("request body must be a JSON object");
  EmbeddingParams p;
  if (present(j, "model")) {
    if (!j["model"].is_string()) throw bad_request("'model' must be a string", "model");
    p.model = j["model"].get<std::string>();
  }
  if (!present(j, "input")) throw bad_request("'input' is required", "input");
  p.inputs = parse_inputs(j["input"]);
  if (present(j, "encoding_format")) {
    const json& f = j["encoding_format"];
    if (!f.is_string() || (f.get<std::string>() != "float" && f.get<std::string>() != "base64")) {
      throw bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    }
    p.base64 = f.get<std::string>() == "base64";
  }
  if (present(j, "dimensions")) {
    const json& d = j["dimensions"];
    if (!d.is_number_integer() || (!d.is_number_unsigned() && d.get<int64_t>() < 1)) {
      throw bad_request("'dimensions' must be a positive integer", "dimensions");
    }
    p.dimensions = d.is_number_unsigned() && d.get<uint64_t>() > INT64_MAX ? INT64_MAX : d.get<int64_t>();
  }
  if (present(j, "user")) {
    if (!j["user"].is_string()) throw bad_request("'user' must be a string", "user");
    p.user = j["user"].get<std::string>();
  }
  return p;
}

}  // namespace parallm
