// One entry point from a request's constraint to its compiled form, with a
// process-wide cache keyed by kind and canonical text (a schema's dump with
// sorted keys, the regex, the choices as JSON, the grammar text), so the
// same schema from many requests compiles once and shares its mask cache.
// The vocabulary is the server's one tokenizer: masks cache per
// CompiledConstraint and start over if a different VocabIndex asks.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "constrain/token_mask.h"

namespace parallm::constrain {

enum class ConstraintKind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };

// text: the schema as JSON text, the regex, the choices as a JSON array of
// strings, or the grammar. Throws InputError naming the problem.
std::shared_ptr<const CompiledConstraint> compile_constraint(ConstraintKind kind, const std::string& text);

// Entries kept (least recently used dropped first).
constexpr size_t kCompileCacheEntries = 128;

}  // namespace parallm::constrain
