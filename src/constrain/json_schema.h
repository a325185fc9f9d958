// JSON Schema (OpenAI's response_format json_schema, vLLM's guided_json) to
// a grammar whose every complete string is compact JSON (no whitespace)
// that validates against the schema.
//
// Honoured: type (one or a list), enum, const, properties (emitted in the
// schema's order; required ones always, optional ones may be left out),
// required, additionalProperties (false, true, or a schema for maps without
// properties), items, prefixItems, minItems, maxItems, minLength,
// maxLength, pattern (full match, without length bounds), format (date,
// time, date-time, uuid, email, ipv4), minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (integers exactly; numbers as integer parts with
// fractions that stay inside), anyOf, oneOf (as anyOf: document the
// caveat), allOf of one schema, $ref to #, #/$defs/... and
// #/definitions/..., nullable. Annotations (title, description, default,
// examples, $schema, $id, $comment, ...) are ignored. Any other keyword is
// an InputError naming it: the server never answers with text the schema
// was not applied to.
//
// Sane bounds where the schema gives none: integers at most 16 digits,
// fractions at most 8, no exponents.
#pragma once
#include <nlohmann/json.hpp>

#include "constrain/grammar.h"

namespace parallm::constrain {

// Largest enum (values) and literal text (bytes) one schema may hold.
constexpr size_t kMaxEnumValues = 4096;

// Builds the grammar (not yet compiled). Throws InputError.
Grammar json_schema_grammar(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
Grammar json_object_grammar();

}  // namespace parallm::constrain
