// Bounded JSON parsing for every parser of untrusted bytes (request bodies,
// model output, tokenizer and config files, server responses in the load
// tester). nlohmann's own parse has two flaws for hostile input:
//  - depth: parsing is iterative, but copying, dump() and every consumer
//    (templates, validators) recurse once per level, so a 100 KB body nested
//    50,000 deep overflows the stack after parse returns;
//  - width: ordered_json objects are a vector searched linearly for each new
//    key, so an object of n keys costs O(n^2) (80,000 keys: 15 s).
// parse_json() refuses input nested deeper than JsonLimits::max_depth while
// parsing (so nothing downstream ever sees a deeper value) and builds the DOM
// from nlohmann's iterative SAX parser with an explicit stack, in time linear
// in the input (ordered_json: one hash index per open object; json: std::map,
// O(log n) per key). The result equals nlohmann's parse: duplicate keys keep
// the first key's position and the last value; invalid UTF-8, lone
// surrogates and trailing bytes are refused by nlohmann's lexer.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace parallm {

// HTTP request bodies (and what clients and models hand the server inside
// them: tool-call arguments, model output). The deepest real schemas seen in
// tool definitions (Kubernetes objects) nest 27 levels, plus 4 for
// {"tools": [{"function": {"parameters": ...}}]}.
constexpr int kRequestJsonDepth = 128;
// Files next to a model (tokenizer.json, tokenizer_config.json, config.json,
// safetensors headers and indexes) and the planner's inputs: real
// tokenizer.json files nest at most 7 levels, configs 5.
constexpr int kFileJsonDepth = 64;

// Members of one object in a request body. Real requests hold a few dozen
// (logit_bias, a schema's properties, at most thousands); each member costs
// a lookup somewhere downstream, and 200,000 of them are only an attack.
constexpr size_t kRequestJsonMembers = 10000;

struct JsonLimits {
  // Most nested arrays / objects: [] is depth 1, [[]] depth 2, a scalar 0.
  int max_depth = kRequestJsonDepth;
  // Most members of one object (0 = any: tokenizer.json's vocabulary has 150,000).
  size_t max_members = 0;
};

// Why a parse failed.
struct JsonError {
  bool too_deep = false;  // the depth limit, not the syntax
  bool too_wide = false;  // the member limit
  size_t byte = 0;        // syntax: bytes the lexer had read when it stopped
  std::string detail;     // syntax: nlohmann's description ("syntax error while parsing ...")
  // One line: "invalid JSON at byte 7: <detail>" or
  // "JSON nested deeper than the limit of 128 levels".
  std::string message;
};

// Throws InputError with JsonError::message. Json: nlohmann::json or
// nlohmann::ordered_json.
template <class Json>
Json parse_json(std::string_view text, const JsonLimits& limits);

// nullopt (and *error, when given) instead of throwing.
template <class Json>
std::optional<Json> try_parse_json(std::string_view text, const JsonLimits& limits, JsonError* error = nullptr);

}  // namespace parallm
