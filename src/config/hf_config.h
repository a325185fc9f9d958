// Hugging Face `config.json` -> ModelConfig: the one reader of config.json,
// for the engine and the planner alike (model_type, or architectures[0] when
// model_type is absent; multimodal configs' language model under
// text_config). Rope style is rotate-half: HF checkpoints keep q/k in the
// layout their rotate_half RoPE expects (llama.cpp permutes them into
// interleaved pairs when converting; parallm switches the RoPE style instead).
#pragma once
#include <string>

#include "config/model_config.h"

namespace parallm {

// The description of the file, finalized. Throws InputError naming `source`
// and the problem for malformed input (bad JSON, a missing or mistyped
// field, inconsistent shapes). What the engine cannot run (an unknown
// model_type, an activation, a rope_scaling type, options an architecture
// does not have) is listed in ModelConfig::unsupported instead; an unknown
// model_type is then described as a Llama-family model.
ModelConfig read_hf_config(const std::string& json_text, const std::string& source = "config.json");

// read_hf_config, then require_supported: what the engine loads.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& source = "config.json");

}  // namespace parallm
