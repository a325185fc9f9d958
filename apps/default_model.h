// The built-in default model: a random-weight llama-110m (Q8_0) that
// make-model writes on first use into the cache folder
// ($PARALLM_CACHE, else $XDG_CACHE_HOME/parallm, else ~/.cache/parallm), so
// `parallm generate` and `parallm serve` run with no arguments.
#pragma once
#include <string>

namespace parallm {

// Returns the path of the default model, creating it when missing.
std::string ensure_default_model();

}  // namespace parallm
