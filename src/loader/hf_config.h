// Hugging Face `config.json` -> ModelConfig, for the architectures parallm
// runs: llama, mistral, mixtral, qwen2 (model_type, or architectures[0] when
// model_type is absent). Rope style is rotate-half: HF checkpoints keep q/k in
// the layout their rotate_half RoPE expects (llama.cpp permutes them into
// interleaved pairs when converting; parallm switches the RoPE style instead).
#pragma once
#include <string>

#include "config/model_config.h"

namespace parallm {

// Parses and finalizes; throws InputError naming `source` and the problem
// (bad JSON, a missing or mistyped field, an unsupported model_type or
// rope_scaling type, options the Llama family does not have).
ModelConfig parse_hf_config(const std::string& json_text, const std::string& source = "config.json");

}  // namespace parallm
