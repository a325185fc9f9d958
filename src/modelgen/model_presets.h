// Presets of `parallm make-model`: the shapes of random-weight models that
// tests, benchmarks and the README's quick start generate on demand.
//
// Each preset names llama.cpp's architecture ("llama", "qwen2", "qwen3",
// "qwen2moe", "qwen3moe", "gemma2", "gemma3") and every hyper-parameter
// written to the GGUF metadata. The feature presets (tiny-qwen2, tiny-tied,
// tiny-llama3, mixtral-tiny, tiny-mha64, tiny-qwen3, tiny-qwen3moe,
// tiny-qwen2moe, tiny-gemma2, tiny-gemma3) each isolate one architecture or
// feature (tiny-mha64: 64-wide heads, for the q8_0 KV cache) for the
// NumPy-reference tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.h"

namespace parallm {

struct ModelPreset {
  std::string name;
  std::string description;
  std::string arch = "llama";  // GGUF general.architecture
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t n_ff = 0;               // each expert's width for MoE
  int64_t head_dim_override = 0;  // 0: n_embd / n_head
  int64_t n_ctx = 2048;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  bool qk_norm = false;     // Qwen3: attn_q_norm / attn_k_norm per head
  int64_t n_ff_shared = 0;  // Qwen2-MoE shared expert width
  // Gemma (written under llama.cpp's keys; 0 = the key is left out).
  int64_t sliding_window = 0;
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // Phi-3 (arch "phi3") writes attn_qkv and a gate+up ffn_up; LongRoPE
  // (rope_scaling kLongRope) writes long / short factor tensors.
  // DeepSeek-V2/V3 (arch "deepseek2"): MLA ranks and head parts (head_dim()
  // is nope + rope), leading dense layers of n_ff_dense, shared experts of
  // n_ff each, router settings, YaRN (rope_scaling kYarn), and llama.cpp's
  // newer split attn_k_b / attn_v_b in place of attn_kv_b.
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  int64_t n_dense_lead = 0, n_ff_dense = 0, n_shared_experts = 0;
  bool router_sigmoid = false, router_bias = false, norm_topk = false;
  int64_t n_expert_groups = 1, n_expert_groups_used = 1;
  float routed_scale = 1.0f;
  float yarn_log_multiplier = 0.0f;
  bool split_kv_b = false;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_factor = 1.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int64_t rope_original_ctx = 8192;

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : n_embd / n_head; }
  int64_t parameter_count() const;
};

const std::vector<ModelPreset>& model_presets();
// Throws InputError listing the preset names.
const ModelPreset& find_model_preset(const std::string& name);
// One line per preset with its shapes (for `make-model --help`).
std::string describe_model_presets();

}  // namespace parallm
