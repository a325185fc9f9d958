// Structured-output fields of a request (see structured_output.h).
#include "server/structured_output.h"

#include <vector>

#include "constrain/json_schema.h"
#include "server/api_error.h"
#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {
namespace {

using json = nlohmann::ordered_json;
using constrain::ConstraintKind;

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

struct Request {
  ConstraintKind kind;
  std::string text;
  std::string field;
};

std::shared_ptr<const constrain::CompiledConstraint> compile(const Request& r) {
  try {
    return constrain::compile_constraint(r.kind, r.text);
  } catch (const InputError& e) {
    throw bad_request("'" + r.field + "': " + e.what(), r.field);
  }
}

Request schema_request(const json& schema, const std::string& field) {
  if (schema.is_string()) {  // vLLM takes guided_json as JSON text too
    JsonError error;
    auto parsed = try_parse_json<json>(schema.get<std::string>(), JsonLimits{kRequestJsonDepth}, &error);
    if (!parsed) throw bad_request("'" + field + "' is not valid JSON: " + error.message, field);
    return schema_request(*parsed, field);
  }
  if (!schema.is_object() && !schema.is_boolean())
    throw bad_request("'" + field + "' must be a JSON schema object", field);
  return {ConstraintKind::kJsonSchema, schema.dump(), field};
}

Request string_request(const json& v, ConstraintKind kind, const std::string& field) {
  if (!v.is_string() || v.get<std::string>().empty())
    throw bad_request("'" + field + "' must be a non-empty string", field);
  return {kind, v.get<std::string>(), field};
}

Request choice_request(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty()) throw bad_request("'" + field + "' must be a non-empty array of strings", field);
  if (v.size() > constrain::kMaxEnumValues) {
    throw bad_request("'" + field + "' has " + std::to_string(v.size()) + " choices; at most " +
                          std::to_string(constrain::kMaxEnumValues),
                      field);
  }
  for (const json& c : v) {
    if (!c.is_string()) throw bad_request("'" + field + "' must hold strings only", field);
    if (c.get<std::string>().empty())
      throw bad_request("'" + field + "' holds an empty string (nothing to generate)", field);
  }
  return {ConstraintKind::kChoice, v.dump(), field};
}

// Renames "#/$defs/X" (and "#/definitions/X") refs to "#/$defs/<prefix>X".
void rename_refs(json* s, const std::string& prefix) {
  if (s->is_object()) {
    for (auto& [k, v] : s->items()) {
      if (k == "$ref" && v.is_string()) {
        const std::string ref = v.get<std::string>();
        for (const std::string p : {"#/$defs/", "#/definitions/"}) {
          if (ref.compare(0, p.size(), p) == 0) v = "#/$defs/" + prefix + ref.substr(p.size());
        }
        if (ref == "#")
          throw bad_request(
              "tool parameters that refer to their own root ('$ref': '#') are not supported with "
              "tool_choice 'required'",
              "tool_choice");
      } else {
        rename_refs(&v, prefix);
      }
    }
  } else if (s->is_array()) {
    for (auto& v : *s) rename_refs(&v, prefix);
  }
}

json parameters_of(const json& tool) {
  const json& f = tool["function"];
  return present(f, "parameters") ? f["parameters"] : json{{"type", "object"}};
}

}  // namespace

json required_tools_schema(const json& tools) {
  json defs = json::object();
  json branches = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    json params = parameters_of(tools[i]);
    const std::string prefix = "t" + std::to_string(i) + "_";
    rename_refs(&params, prefix);
    for (const char* key : {"$defs", "definitions"}) {
      if (params.is_object() && params.contains(key)) {
        for (auto& [name, d] : params[key].items()) defs[prefix + name] = d;
        params.erase(key);
      }
    }
    branches.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", tools[i]["function"]["name"]}}}, {"parameters", params}}},
                        {"required", {"name", "parameters"}},
                        {"additionalProperties", false}});
  }
  json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", branches}}}};
  if (!defs.empty()) schema["$defs"] = defs;
  return schema;
}

StructuredOutput parse_structured_output(const json& j, const json& tools, bool chat) {
  std::vector<Request> asked;
  if (present(j, "response_format")) {
    const json& rf = j["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
      throw bad_request("'response_format' must be an object with a string 'type'", "response_format");
    }
    const std::string type = rf["type"].get<std::string>();
    if (type == "json_object") {
      asked.push_back({ConstraintKind::kJsonObject, "", "response_format"});
    } else if (type == "json_schema") {
      if (!present(rf, "json_schema") || !rf["json_schema"].is_object()) {
        throw bad_request("'response_format' json_schema needs a 'json_schema' object", "response_format");
      }
      const json& js = rf["json_schema"];
      if (!present(js, "schema"))
        throw bad_request("'response_format.json_schema.schema' is required", "response_format");
      asked.push_back(schema_request(js["schema"], "response_format"));
    } else if (type != "text") {
      throw bad_request(
          "'response_format' type '" + type + "' is not supported; use 'text', 'json_object' or 'json_schema'",
          "response_format");
    }
  }
  if (present(j, "guided_json")) asked.push_back(schema_request(j["guided_json"], "guided_json"));
  if (present(j, "guided_regex"))
    asked.push_back(string_request(j["guided_regex"], ConstraintKind::kRegex, "guided_regex"));
  if (present(j, "guided_choice")) asked.push_back(choice_request(j["guided_choice"], "guided_choice"));
  if (present(j, "guided_grammar"))
    asked.push_back(string_request(j["guided_grammar"], ConstraintKind::kGrammar, "guided_grammar"));
  if (present(j, "guided_whitespace_pattern")) {
    throw bad_request(
        "'guided_whitespace_pattern' is not supported (structured JSON is written without "
        "whitespace)",
        "guided_whitespace_pattern");
  }
  if (present(j, "structured_outputs")) {
    const json& so = j["structured_outputs"];
    if (!so.is_object()) throw bad_request("'structured_outputs' must be an object", "structured_outputs");
    for (const auto& [k, v] : so.items()) {
      if (v.is_null()) continue;
      const std::string field = "structured_outputs." + k;
      if (k == "json") {
        asked.push_back(schema_request(v, field));
      } else if (k == "regex") {
        asked.push_back(string_request(v, ConstraintKind::kRegex, field));
      } else if (k == "choice") {
        asked.push_back(choice_request(v, field));
      } else if (k == "grammar") {
        asked.push_back(string_request(v, ConstraintKind::kGrammar, field));
      } else if (k == "json_object") {
        if (v == true) asked.push_back({ConstraintKind::kJsonObject, "", field});
      } else if (k == "disable_any_whitespace" || k == "disable_fallback" || k == "disable_additional_properties") {
        // Honoured as they stand: no whitespace, no fallback, no extra properties.
      } else {
        throw bad_request("'" + field + "' is not supported", "structured_outputs");
      }
    }
  }
  StructuredOutput out;
  if (chat && present(j, "tool_choice")) {
    const json& tc = j["tool_choice"];
    if (tc.is_object()) {
      if (!tc.contains("function") || !tc["function"].is_object() || !tc["function"].contains("name") ||
          !tc["function"]["name"].is_string()) {
        throw bad_request(
            "'tool_choice' naming a function must be {\"type\": \"function\", \"function\": "
            "{\"name\": ...}}",
            "tool_choice");
      }
      out.forced_tool = tc["function"]["name"].get<std::string>();
      const json* tool = nullptr;
      if (tools.is_array()) {
        for (const json& t : tools) {
          if (t["function"]["name"] == out.forced_tool) tool = &t;
        }
      }
      if (!tool)
        throw bad_request("'tool_choice' names '" + out.forced_tool + "', which is not in 'tools'", "tool_choice");
      asked.push_back(schema_request(parameters_of(*tool), "tool_choice"));
    } else if (tc.is_string() && tc.get<std::string>() == "required") {
      if (!tools.is_array() || tools.empty())
        throw bad_request("'tool_choice' 'required' needs 'tools'", "tool_choice");
      out.tool_required = true;
      asked.push_back(schema_request(required_tools_schema(tools), "tool_choice"));
    }
  }
  if (asked.size() > 1) {
    throw bad_request("'" + asked[0].field + "' and '" + asked[1].field + "' both constrain the output; use one",
                      asked[1].field);
  }
  if (!asked.empty()) out.constraint = compile(asked[0]);
  return out;
}

}  // namespace parallm
