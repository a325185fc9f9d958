// Random-weight models in GGUF (`parallm make-model`): a preset's description
// (its ModelConfig, which reading the file back gives again),
// llama.cpp's tensor names and metadata keys (so llama.cpp can load the same
// file), seeded weights, and a vocabulary copied from another GGUF file or
// generated (modelgen/generated_vocab.h).
//
// Weights: a portable counter-based generator (splitmix64, one stream per
// tensor name) and a sum of four uniforms for a bell-shaped distribution, so
// the same seed gives a byte-identical file on every machine. Scales keep
// activations O(1) at any width: matrices std 1/sqrt(n_in), token_embd and
// output std 2/sqrt(n_embd) (logits std ~2), norms 1 + 0.1 noise, biases std
// 0.5, router std 2/sqrt(n_embd). Norms, biases, the router and rope_freqs
// stay F32 as in llama.cpp's files; every other matrix takes --dtype, or,
// for a llama.cpp mix (--dtype q4_k_m, ...), the type llama.cpp's quantizer
// would give it (modelgen/quant_mix.h), and general.file_type says the mix.
//
// GGUF keys written (ARCH = the preset's architecture): general.architecture, general.name,
// general.file_type, general.quantization_version (quantized only),
// ARCH.context_length, ARCH.embedding_length, ARCH.block_count,
// ARCH.feed_forward_length, ARCH.attention.head_count, ARCH.attention.head_count_kv,
// ARCH.rope.freq_base, ARCH.attention.layer_norm_rms_epsilon,
// ARCH.rope.dimension_count, ARCH.vocab_size; MoE: ARCH.expert_count,
// ARCH.expert_used_count; linear rope scaling: ARCH.rope.scaling.type = "linear",
// ARCH.rope.scaling.factor. Llama 3 rope scaling has no GGUF key in llama.cpp:
// its converter stores the per-frequency divisors as the tensor
// rope_freqs.weight [head_dim/2] (F32), which we write too, plus parallm's own
// keys (ignored by llama.cpp, which asserts on an unknown rope.scaling.type):
// parallm.rope_scaling.type = "llama3", parallm.rope_scaling.factor,
// parallm.rope_scaling.low_freq_factor, parallm.rope_scaling.high_freq_factor,
// parallm.rope_scaling.original_context_length. Qwen-MoE:
// ARCH.expert_feed_forward_length (and feed_forward_length 4x it, unused),
// ARCH.expert_shared_feed_forward_length. Explicit head sizes:
// ARCH.attention.key_length / value_length. Gemma: ARCH.attention.sliding_window,
// ARCH.attn_logit_softcapping, ARCH.final_logit_softcapping. Phi-3 LongRoPE:
// the tensors rope_factors_long / rope_factors_short.weight [head_dim/2],
// ARCH.rope.scaling.original_context_length, ARCH.rope.scaling.attn_factor.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "loader/gguf_writer.h"
#include "modelgen/model_presets.h"
#include "modelgen/quant_mix.h"

namespace parallm {

struct MakeModelOptions {
  std::string preset = "tiny";
  DType dtype = DType::kF32;
  QuantMix mix = QuantMix::kNone;  // when set, the matrices' types are this mix's (dtype unused)
  uint64_t seed = 0;
  std::string vocab_from;  // GGUF file whose tokenizer.* keys are copied; "" = generate
  std::string out_path;
  const ModelPreset* shape = nullptr;  // when set, used instead of `preset` (tests' and fuzz seeds' own shapes)
};

struct MakeModelSummary {
  int64_t n_params = 0;
  int64_t n_vocab = 0;
  size_t file_bytes = 0;
};

// Describes the whole file; nothing is generated until it is written.
GgufWriter build_model_gguf(const MakeModelOptions& opts, MakeModelSummary* summary = nullptr);
// Builds and writes opts.out_path. Throws InputError.
MakeModelSummary make_model(const MakeModelOptions& opts);

// Sets opts->dtype (and no mix) for a dtype name, or opts->mix for a mix
// name; throws InputError listing both otherwise.
void set_make_model_type(const std::string& name, MakeModelOptions* opts);
// opts' mix name, or its dtype's name.
std::string make_model_type_name(const MakeModelOptions& opts);

// llama.cpp's general.file_type (llama_ftype) for a file whose matrices are `t`.
uint32_t gguf_file_type(DType t);

}  // namespace parallm
