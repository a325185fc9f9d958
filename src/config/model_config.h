// ModelConfig: the architecture hyper-parameters of a checkpoint, parsed once
// from whichever format it came in (GGUF metadata, HF config.json, llama2.c
// header), validated by finalize(), then passed around by const reference.
// Glossary: docs/ARCHITECTURE.md ("Glossary").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace parallm {

// Mistral and Mixtral are Llama-family. Qwen3 adds per-head q/k RMSNorm;
// Qwen2-MoE adds a shared expert behind a sigmoid gate; Qwen3-MoE is Qwen3
// with routed experts only.
enum class Architecture { kLlama, kQwen2, kQwen3, kQwen2Moe, kQwen3Moe };
enum class RopeStyle { kInterleaved, kHalf };  // pairs (2i,2i+1) vs (i, i+head_dim/2)
enum class RopeScaling { kNone, kLinear, kLlama3 };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name = "llama";
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;       // derived: n_embd / n_head unless the file says otherwise
  int64_t n_ff = 0;           // dense FFN width, or each expert's FFN width for MoE
  int64_t n_expert = 0;       // 0 = dense
  int64_t n_expert_used = 0;  // router top-k
  // Router weights: softmax over all experts, then the top-k kept; true
  // rescales the kept k to sum to 1 (Mixtral, Qwen3-MoE), false keeps their
  // share of the full softmax (Qwen2-MoE).
  bool norm_topk_prob = true;
  int64_t n_ff_shared = 0;  // shared expert's FFN width (Qwen2-MoE); 0 = none
  int64_t n_ctx_train = 0;  // context length in the file's metadata
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_factor = 1.0f;            // linear / llama3 scaling factor
  float rope_low_freq_factor = 1.0f;   // llama3
  float rope_high_freq_factor = 4.0f;  // llama3
  int64_t rope_original_ctx = 8192;    // llama3 original_max_position_embeddings
  bool qkv_bias = false;               // Qwen2
  bool qk_norm = false;                // Qwen3: RMSNorm over each q and k head before RoPE
  bool tied_embeddings = false;        // classifier shares token_embd

  // Checks ranges and divisibility, fills derived fields; throws InputError.
  void finalize();
  bool is_moe() const { return n_expert > 0; }
  bool has_shared_expert() const { return n_ff_shared > 0; }
  // Rotary inverse frequencies [head_dim / 2], with rope scaling applied.
  std::vector<float> rope_inv_freq() const;
  std::string summary() const;
};

// llama.cpp's name of the architecture ("llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe").
const char* architecture_name(Architecture a);
// What each architecture implies beyond the shapes: RoPE style, QKV bias,
// q/k norms, how the router weights its top-k. Both file formats call it
// before reading the fields a file may override.
void apply_architecture_defaults(ModelConfig* c);
// Maps a GGUF general.architecture / HF model_type to an Architecture;
// throws InputError listing the supported ones.
Architecture parse_architecture(const std::string& name);

}  // namespace parallm
