// The models `parallm` uses when none is named.
//
// default_model_path(): the trained stories260K (models/stories260K.gguf,
// MIT, models/README.md) that `generate` and `serve` load with no --model,
// so a first request answers with a little story rather than noise.
//
// ensure_benchmark_model(): the random-weight llama-110m (Q8_0) that
// `bench-model` measures with no --model; make-model writes it on first use
// into the cache folder ($PARALLM_CACHE, else $XDG_CACHE_HOME/parallm, else
// ~/.cache/parallm).
#pragma once
#include <cstdint>
#include <string>

namespace parallm {

// stories260K was trained with 512 tokens of context; its GGUF says 128 (an
// artefact of llama.cpp's converter, models/README.md). The context `generate`
// and `serve` use for it when neither --ctx-size nor --max-model-len is given.
constexpr int64_t kDefaultModelCtxTokens = 512;

// The first of: $PARALLM_DEFAULT_MODEL (which must exist); models/stories260K.gguf
// beside the binary's folder (build/parallm → models/) or in it; the same
// file in the source tree the binary was built from (PARALLM_SOURCE_DIR).
// Throws InputError naming the places looked at when none holds it.
std::string default_model_path();

// Returns the path of the benchmark model, creating it when missing.
std::string ensure_benchmark_model();

}  // namespace parallm
