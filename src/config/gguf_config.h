// GGUF metadata -> ModelConfig: the one mapping of llama.cpp's keys
// ("<arch>.block_count", "<arch>.attention.head_count_kv", ...) for the engine
// (loader/gguf_model.cpp) and the planner (planner/gguf_spec.cpp). It reads
// the metadata and which tensors exist (tied output, q/k/v biases, q/k norms,
// the router's choice bias, LongRoPE's factor tensors), not the weights.
#pragma once
#include "config/model_config.h"
#include "loader/gguf_reader.h"

namespace parallm {

// The description, finalized. Throws InputError naming the file for missing
// or malformed keys; what the engine cannot run (an unknown architecture, a
// rope scaling type, value heads unlike key heads) is listed in
// ModelConfig::unsupported, an unknown architecture described as a
// Llama-family model.
ModelConfig read_gguf_config(const GgufFile& g);

}  // namespace parallm
