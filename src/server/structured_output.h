// The request fields that constrain the output, turned into one compiled
// constraint (src/constrain): OpenAI's response_format (json_object,
// json_schema), vLLM's guided_json / guided_regex / guided_choice /
// guided_grammar and structured_outputs {json | regex | choice | grammar |
// json_object}, and tool_choice "required" or naming a function (vLLM's
// way: a named function's output is its arguments, constrained by its
// parameters schema; "required" is a JSON array of {"name", "parameters"}
// calls, one of the tools each). At most one of them per request. Anything
// the server cannot honour is an ApiError(400) naming the field.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "constrain/compile_cache.h"

namespace parallm {

struct StructuredOutput {
  std::shared_ptr<const constrain::CompiledConstraint> constraint;  // null: none
  std::string forced_tool;                                          // tool_choice naming a function
  bool tool_required = false;                                       // tool_choice "required"
};

// j: the request body; tools: the request's function tools (null if none);
// tool_choice is read for chat only.
StructuredOutput parse_structured_output(const nlohmann::ordered_json& j, const nlohmann::ordered_json& tools,
                                         bool chat);

// The schema "required" constrains to: tools' parameters with their $defs
// moved under the root's (refs renamed), so every $ref still resolves.
nlohmann::ordered_json required_tools_schema(const nlohmann::ordered_json& tools);

}  // namespace parallm
