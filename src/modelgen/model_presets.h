// Presets of `parallm make-model`: the shapes of random-weight models that
// tests, benchmarks and the README's quick start generate on demand.
//
// Each preset is a model description (config/model_config.h), the one the
// engine reads back from the written file, plus the few choices of how to
// write it that do not change the model. The feature presets (tiny-qwen2,
// tiny-tied, tiny-llama3, mixtral-tiny, tiny-mha64, tiny-qwen3, tiny-qwen3moe,
// tiny-qwen2moe, tiny-gemma2, tiny-gemma3, tiny-phi3, tiny-deepseek2,
// tiny-deepseek2-lite) each isolate one architecture or feature (tiny-mha64:
// 64-wide heads, for the q8_0 KV cache) for the NumPy-reference tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.h"

namespace parallm {

struct ModelPreset {
  std::string name;
  std::string description;
  // Finalized; n_ctx_train is the context written to the file.
  ModelConfig config;
  // DeepSeek: llama.cpp's newer layout, attn_k_b / attn_v_b in place of
  // attn_kv_b (the same weights, split per head).
  bool split_kv_b = false;
};

const std::vector<ModelPreset>& model_presets();
// Throws InputError listing the preset names.
const ModelPreset& find_model_preset(const std::string& name);
// One line per preset with its shapes (for `make-model --help`).
std::string describe_model_presets();

// What a generated model's description derives from its shapes, as reading
// the written file back gives it: LongRoPE's factors (smooth ramps, as real
// checkpoints have) and cos / sin factor at n_ctx_train, Gemma's sliding
// layers; then finalize() (which fills head_dim when it is 0).
void complete_generated_config(ModelConfig* c);

// The weights a model of this description holds, every tensor's elements
// (RoPE frequency tables are not parameters).
int64_t parameter_count(const ModelConfig& c);

}  // namespace parallm
