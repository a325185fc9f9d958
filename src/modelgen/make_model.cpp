// Random-weight GGUF models from presets (see make_model.h for the scheme).
#include "modelgen/make_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "kernels/cpu/quant.h"
#include "loader/gguf_reader.h"
#include "modelgen/generated_vocab.h"
#include "modelgen/quant_mix.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Bell-shaped values of unit variance: the sum of four uniforms on [-1, 1)
// (variance 4/3) scaled by sqrt(3/4). Pure integer-to-float arithmetic, so
// identical everywhere.
class WeightRng {
 public:
  WeightRng(uint64_t seed, const std::string& name) : state_(seed ^ fnv1a(name)) {}
  float next() {
    float sum = 0.0f;
    for (int k = 0; k < 4; ++k) {
      const uint64_t bits = splitmix64(&state_) >> 40;                // 24 random bits
      sum += static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
    }
    return sum * 0.8660254f;
  }

 private:
  uint64_t state_;
};

struct TensorPlan {
  float mean;  // values are mean + std * noise
  float std;
};

int64_t elems(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void add_random(GgufWriter* w, const std::string& name, DType dtype, std::vector<int64_t> shape, TensorPlan plan,
                uint64_t seed) {
  const int64_t cols = shape.back();
  const int64_t rows = elems(shape) / cols;
  if (cols % dtype_block_elems(dtype) != 0) {
    throw InputError(strfmt("tensor '%s' has rows of %lld, not a multiple of the %s block of %d", name.c_str(),
                            (long long)cols, dtype_name(dtype), dtype_block_elems(dtype)));
  }
  w->add_tensor(name, dtype, shape, [=](uint8_t* dst) {
    WeightRng rng(seed, name);
    std::vector<float> row(static_cast<size_t>(cols));
    const size_t row_bytes = dtype_row_bytes(dtype, cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = plan.mean + plan.std * rng.next();
      cpu::quantize_row(dtype, row.data(), dst + static_cast<size_t>(r) * row_bytes, cols);
    }
  });
}

// Which dtype each matrix gets: opts.dtype for every one, or a llama.cpp
// mix's choice per tensor (modelgen/quant_mix.h).
class MatrixTypes {
 public:
  MatrixTypes(const MakeModelOptions& opts, const ModelConfig& c) : dtype_(opts.dtype), mix_(opts.mix), c_(c) {}
  DType of(const std::string& name, int64_t row_len) const {
    return mix_ == QuantMix::kNone ? dtype_ : quant_mix_tensor_type(mix_, c_, name, row_len);
  }

 private:
  DType dtype_;
  QuantMix mix_;
  const ModelConfig& c_;
};

// A matrix; `shape` outermost first, as add_random takes it, so its rows
// hold shape.back() values (ggml's ne[0], what the block types divide).
void add_matrix(GgufWriter* w, const std::string& name, const MatrixTypes& types, std::vector<int64_t> shape,
                TensorPlan plan, uint64_t seed) {
  const DType dtype = types.of(name, shape.back());
  add_random(w, name, dtype, std::move(shape), plan, seed);
}

// Llama 3.1's per-frequency divisors, as llama.cpp's converter stores them in
// rope_freqs.weight: the effective inverse frequency is inv_freq[i] / factor[i].
std::vector<float> llama3_rope_factors(const ModelConfig& c) {
  const int64_t hd = c.head_dim;
  const double pi = 3.14159265358979323846;
  const double low_wavelen = c.rope_original_ctx / c.rope_low_freq_factor;
  const double high_wavelen = c.rope_original_ctx / c.rope_high_freq_factor;
  std::vector<float> f(static_cast<size_t>(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / static_cast<double>(hd));
    const double wavelen = 2.0 * pi / freq;
    double divisor = 1.0;
    if (wavelen > low_wavelen) {
      divisor = c.rope_factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (c.rope_original_ctx / wavelen - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / c.rope_factor + smooth);
    }
    f[static_cast<size_t>(i)] = static_cast<float>(divisor);
  }
  return f;
}

void add_f32_vector(GgufWriter* w, const std::string& name, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  w->add_tensor(name, DType::kF32, {static_cast<int64_t>(v.size())}, std::move(bytes));
}

void write_vocab(GgufWriter* w, const MakeModelOptions& opts, Architecture arch, int64_t* n_vocab) {
  if (!opts.vocab_from.empty()) {
    GgufFile src(opts.vocab_from);
    if (!src.has("tokenizer.ggml.tokens")) {
      throw InputError("'" + opts.vocab_from + "' has no vocabulary (tokenizer.ggml.tokens)");
    }
    for (const auto& [key, value] : src.metadata()) {
      if (key.rfind("tokenizer.", 0) == 0) w->copy_key(src, key);
    }
    *n_vocab = static_cast<int64_t>(src.array_length("tokenizer.ggml.tokens"));
    return;
  }
  SpmVocab v = generate_spm_vocab(*n_vocab);
  if (arch == Architecture::kPhi3) {
    // Phi-3's vocabulary has its added end-of-text token, and llama.cpp's
    // loader looks it up by text for any model named phi3 (it throws when
    // the token is missing). The last piece extends nothing, so it may go.
    v.tokens.back() = "<|endoftext|>";
    v.scores.back() = 0.0f;
    v.types.back() = 3;  // control
  }
  w->set_string("tokenizer.ggml.model", "llama");
  w->set_string_array("tokenizer.ggml.tokens", v.tokens);
  w->set_f32_array("tokenizer.ggml.scores", v.scores);
  w->set_int_array("tokenizer.ggml.token_type", GgufType::kI32, std::vector<int64_t>(v.types.begin(), v.types.end()));
  w->set_u32("tokenizer.ggml.bos_token_id", 1);
  w->set_u32("tokenizer.ggml.eos_token_id", 2);
  w->set_u32("tokenizer.ggml.unknown_token_id", 0);
  w->set_bool("tokenizer.ggml.add_bos_token", true);
  w->set_bool("tokenizer.ggml.add_eos_token", false);
}

// DeepSeek-V2/V3's keys as llama.cpp's converter writes them.
void write_deepseek_keys(GgufWriter* w, const ModelConfig& c) {
  const std::string a = c.arch_name + ".";
  if (c.q_lora_rank > 0) w->set_u32(a + "attention.q_lora_rank", static_cast<uint32_t>(c.q_lora_rank));
  w->set_u32(a + "attention.kv_lora_rank", static_cast<uint32_t>(c.kv_lora_rank));
  w->set_u32(a + "attention.key_length", static_cast<uint32_t>(c.qk_nope_dim + c.qk_rope_dim));
  w->set_u32(a + "attention.value_length", static_cast<uint32_t>(c.v_head_dim));
  w->set_u32(a + "rope.dimension_count", static_cast<uint32_t>(c.qk_rope_dim));
  w->set_u32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff_dense));
  w->set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(c.n_dense_lead));
  w->set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w->set_u32(a + "expert_shared_count", static_cast<uint32_t>(c.n_expert_shared));
  w->set_f32(a + "expert_weights_scale", c.routed_scale);
  w->set_bool(a + "expert_weights_norm", c.norm_topk_prob);
  w->set_u32(a + "expert_gating_func", c.router_scoring == RouterScoring::kSigmoid ? 2 : 1);
  if (c.n_expert_groups > 1) {
    w->set_u32(a + "expert_group_count", static_cast<uint32_t>(c.n_expert_groups));
    w->set_u32(a + "expert_group_used_count", static_cast<uint32_t>(c.n_expert_groups_used));
  }
}

// One layer's latent attention (model/mla.h has the shapes).
void add_mla_tensors(GgufWriter* w, const ModelPreset& p, const std::string& b, const MatrixTypes& types,
                     uint64_t seed) {
  const ModelConfig& c = p.config;
  const int64_t qh = c.qk_nope_dim + c.qk_rope_dim, lora = c.kv_lora_rank;
  auto std_of = [](int64_t n_in) { return 1.0f / std::sqrt(static_cast<float>(n_in)); };
  const TensorPlan norm{1.0f, 0.1f};
  if (c.q_lora_rank > 0) {
    add_matrix(w, b + "attn_q_a.weight", types, {c.q_lora_rank, c.n_embd}, {0.0f, std_of(c.n_embd)}, seed);
    add_random(w, b + "attn_q_a_norm.weight", DType::kF32, {c.q_lora_rank}, norm, seed);
    add_matrix(w, b + "attn_q_b.weight", types, {c.n_head * qh, c.q_lora_rank}, {0.0f, std_of(c.q_lora_rank)}, seed);
  } else {
    add_matrix(w, b + "attn_q.weight", types, {c.n_head * qh, c.n_embd}, {0.0f, std_of(c.n_embd)}, seed);
  }
  add_matrix(w, b + "attn_kv_a_mqa.weight", types, {lora + c.qk_rope_dim, c.n_embd}, {0.0f, std_of(c.n_embd)}, seed);
  add_random(w, b + "attn_kv_a_norm.weight", DType::kF32, {lora}, norm, seed);
  if (p.split_kv_b) {
    add_matrix(w, b + "attn_k_b.weight", types, {c.n_head, lora, c.qk_nope_dim}, {0.0f, std_of(lora)}, seed);
    add_matrix(w, b + "attn_v_b.weight", types, {c.n_head, c.v_head_dim, lora}, {0.0f, std_of(lora)}, seed);
  } else {
    add_matrix(w, b + "attn_kv_b.weight", types, {c.n_head * (c.qk_nope_dim + c.v_head_dim), lora},
               {0.0f, std_of(lora)}, seed);
  }
}

}  // namespace

uint32_t gguf_file_type(DType t) {
  switch (t) {
    case DType::kF32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case DType::kF16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case DType::kQ4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case DType::kQ8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case DType::kQ4_K:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case DType::kQ6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    case DType::kBF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case DType::kQ4_1:
      return 3;  // LLAMA_FTYPE_MOSTLY_Q4_1
    case DType::kQ5_0:
      return 8;  // LLAMA_FTYPE_MOSTLY_Q5_0
    case DType::kQ5_1:
      return 9;  // LLAMA_FTYPE_MOSTLY_Q5_1
    case DType::kQ2_K:
      return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case DType::kQ3_K:
      return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    case DType::kQ5_K:
      return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case DType::kIQ4_NL:
      return 25;  // LLAMA_FTYPE_MOSTLY_IQ4_NL
    case DType::kIQ4_XS:
      return 30;  // LLAMA_FTYPE_MOSTLY_IQ4_XS
  }
  return 0;
}

GgufWriter build_model_gguf(const MakeModelOptions& opts, MakeModelSummary* summary) {
  ModelPreset p = opts.shape != nullptr ? *opts.shape : find_model_preset(opts.preset);
  ModelConfig& c = p.config;
  const MatrixTypes types(opts, c);
  const bool mix = opts.mix != QuantMix::kNone;
  const std::string a = c.arch_name;
  GgufWriter w;

  w.set_string("general.architecture", a);
  w.set_string("general.name", "parallm-random-" + p.name);
  w.set_u32("general.file_type", mix ? quant_mix_file_type(opts.mix) : gguf_file_type(opts.dtype));
  if (mix || dtype_is_quantized(opts.dtype)) w.set_u32("general.quantization_version", 2);
  // The vocabulary decides n_vocab when it is copied; write it first into a
  // scratch writer so the model keys keep llama.cpp's order.
  GgufWriter vocab;
  write_vocab(&vocab, opts, c.arch, &c.n_vocab);

  const int64_t hd = c.head_dim;
  w.set_u32(a + ".context_length", static_cast<uint32_t>(c.n_ctx_train));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(c.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(c.n_layer));
  const bool qwen_moe = c.arch == Architecture::kQwen2Moe || c.arch == Architecture::kQwen3Moe;
  const bool mla = c.mla();
  if (mla) {
    write_deepseek_keys(&w, c);
  } else if (qwen_moe) {
    // Qwen-MoE files carry their (unused) dense width beside the experts'.
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.n_ff_dense));
    w.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(c.n_ff));
    if (c.has_shared_expert()) {
      w.set_u32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(c.n_ff_shared));
    }
  } else {
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.n_ff));
  }
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_head));
  w.set_f32(a + ".rope.freq_base", c.rope_theta);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  if (!mla) w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(hd));
  // Heads stated only when they are not n_embd / n_head wide (a reader's default).
  if (!mla && c.n_head * hd != c.n_embd) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  }
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(c.n_vocab));
  // Gemma's keys; which layers slide is llama.cpp's per-generation rule.
  if (c.sliding_window > 0) w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  if (c.attn_softcap > 0) w.set_f32(a + ".attn_logit_softcapping", c.attn_softcap);
  if (c.final_softcap > 0) w.set_f32(a + ".final_logit_softcapping", c.final_softcap);
  if (c.is_moe()) {
    w.set_u32(a + ".expert_count", static_cast<uint32_t>(c.n_expert));
    w.set_u32(a + ".expert_used_count", static_cast<uint32_t>(c.n_expert_used));
  }
  if (c.rope_scaling == RopeScaling::kYarn) {
    w.set_string(a + ".rope.scaling.type", "yarn");
    w.set_f32(a + ".rope.scaling.factor", c.rope_factor);
    w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(c.rope_original_ctx));
    // llama.cpp's name for 0.1 mscale_all_dim.
    w.set_f32(a + ".rope.scaling.yarn_log_multiplier", static_cast<float>(0.1 * c.yarn_mscale_all_dim));
  } else if (c.rope_scaling == RopeScaling::kLongRope) {
    // As llama.cpp's converter writes Phi-3: the factors are tensors.
    w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(c.rope_original_ctx));
    w.set_f32(a + ".rope.scaling.attn_factor", c.rope_attn_factor);
  } else if (c.rope_scaling == RopeScaling::kLinear) {
    w.set_string(a + ".rope.scaling.type", "linear");
    w.set_f32(a + ".rope.scaling.factor", c.rope_factor);
  } else if (c.rope_scaling == RopeScaling::kLlama3) {
    w.set_string("parallm.rope_scaling.type", "llama3");
    w.set_f32("parallm.rope_scaling.factor", c.rope_factor);
    w.set_f32("parallm.rope_scaling.low_freq_factor", c.rope_low_freq_factor);
    w.set_f32("parallm.rope_scaling.high_freq_factor", c.rope_high_freq_factor);
    w.set_u32("parallm.rope_scaling.original_context_length", static_cast<uint32_t>(c.rope_original_ctx));
  }
  // Copy the vocabulary keys over in their order.
  {
    std::vector<uint8_t> bytes = vocab.to_bytes();
    GgufFile parsed(bytes.data(), bytes.size(), "<vocabulary>");
    std::vector<std::string> keys;
    for (const auto& [key, value] : parsed.metadata()) keys.push_back(key);
    // std::map order is alphabetical: deterministic, which is what matters.
    for (const auto& key : keys) w.copy_key(parsed, key);
  }

  const uint64_t seed = opts.seed;
  const float in_embd = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
  const float in_ff = 1.0f / std::sqrt(static_cast<float>(c.n_ff));
  const TensorPlan norm{1.0f, 0.1f};
  const int64_t q_dim = c.n_head * hd, kv_dim = c.n_kv_head * hd;

  add_matrix(&w, "token_embd.weight", types, {c.n_vocab, c.n_embd}, {0.0f, 2.0f * in_embd}, seed);
  add_random(&w, "output_norm.weight", DType::kF32, {c.n_embd}, norm, seed);
  if (!c.tied_embeddings) add_matrix(&w, "output.weight", types, {c.n_vocab, c.n_embd}, {0.0f, 2.0f * in_embd}, seed);
  if (c.rope_scaling == RopeScaling::kLongRope) {
    add_f32_vector(&w, "rope_factors_long.weight", c.rope_long_factors);
    add_f32_vector(&w, "rope_factors_short.weight", c.rope_short_factors);
  }
  if (c.rope_scaling == RopeScaling::kLlama3) add_f32_vector(&w, "rope_freqs.weight", llama3_rope_factors(c));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add_random(&w, b + "attn_norm.weight", DType::kF32, {c.n_embd}, norm, seed);
    if (mla) {
      add_mla_tensors(&w, p, b, types, seed);
    } else if (c.fused_qkv) {
      add_matrix(&w, b + "attn_qkv.weight", types, {q_dim + 2 * kv_dim, c.n_embd}, {0.0f, in_embd}, seed);
    } else {
      add_matrix(&w, b + "attn_q.weight", types, {q_dim, c.n_embd}, {0.0f, in_embd}, seed);
      add_matrix(&w, b + "attn_k.weight", types, {kv_dim, c.n_embd}, {0.0f, in_embd}, seed);
      add_matrix(&w, b + "attn_v.weight", types, {kv_dim, c.n_embd}, {0.0f, in_embd}, seed);
    }
    if (c.qkv_bias) {
      add_random(&w, b + "attn_q.bias", DType::kF32, {q_dim}, {0.0f, 0.5f}, seed);
      add_random(&w, b + "attn_k.bias", DType::kF32, {kv_dim}, {0.0f, 0.5f}, seed);
      add_random(&w, b + "attn_v.bias", DType::kF32, {kv_dim}, {0.0f, 0.5f}, seed);
    }
    const int64_t o_in = mla ? c.n_head * c.v_head_dim : q_dim;
    add_matrix(&w, b + "attn_output.weight", types, {c.n_embd, o_in},
               {0.0f, 1.0f / std::sqrt(static_cast<float>(o_in))}, seed);
    if (c.qk_norm) {
      add_random(&w, b + "attn_q_norm.weight", DType::kF32, {hd}, norm, seed);
      add_random(&w, b + "attn_k_norm.weight", DType::kF32, {hd}, norm, seed);
    }
    add_random(&w, b + "ffn_norm.weight", DType::kF32, {c.n_embd}, norm, seed);
    if (c.post_norms) {
      add_random(&w, b + "post_attention_norm.weight", DType::kF32, {c.n_embd}, norm, seed);
      add_random(&w, b + "post_ffw_norm.weight", DType::kF32, {c.n_embd}, norm, seed);
    }
    const bool moe_layer = c.is_moe_layer(l);
    if (moe_layer && c.has_shared_expert()) {  // DeepSeek's n shared experts are one FFN
      const int64_t f = c.n_ff_shared;
      // Qwen2-MoE's gate logits of about unit spread, so the sigmoid is far from constant.
      if (c.shared_expert_gated) {
        add_random(&w, b + "ffn_gate_inp_shexp.weight", DType::kF32, {c.n_embd}, {0.0f, in_embd}, seed);
      }
      add_matrix(&w, b + "ffn_gate_shexp.weight", types, {f, c.n_embd}, {0.0f, in_embd}, seed);
      add_matrix(&w, b + "ffn_down_shexp.weight", types, {c.n_embd, f}, {0.0f, 1.0f / std::sqrt(static_cast<float>(f))},
                 seed);
      add_matrix(&w, b + "ffn_up_shexp.weight", types, {f, c.n_embd}, {0.0f, in_embd}, seed);
    }
    if (moe_layer) {
      add_random(&w, b + "ffn_gate_inp.weight", DType::kF32, {c.n_expert, c.n_embd}, {0.0f, 2.0f * in_embd}, seed);
      // A choice bias the size of the sigmoid scores' differences, so it moves some choices.
      if (c.router_bias) add_random(&w, b + "exp_probs_b.bias", DType::kF32, {c.n_expert}, {0.0f, 0.05f}, seed);
      add_matrix(&w, b + "ffn_gate_exps.weight", types, {c.n_expert, c.n_ff, c.n_embd}, {0.0f, in_embd}, seed);
      add_matrix(&w, b + "ffn_down_exps.weight", types, {c.n_expert, c.n_embd, c.n_ff}, {0.0f, in_ff}, seed);
      add_matrix(&w, b + "ffn_up_exps.weight", types, {c.n_expert, c.n_ff, c.n_embd}, {0.0f, in_embd}, seed);
    } else {  // a dense model's layers, or DeepSeek's leading dense ones
      const int64_t f = c.dense_ff();
      const float in_dense = 1.0f / std::sqrt(static_cast<float>(f));
      if (c.fused_gate_up) {  // gate rows then up rows, one matrix
        add_matrix(&w, b + "ffn_down.weight", types, {c.n_embd, f}, {0.0f, in_dense}, seed);
        add_matrix(&w, b + "ffn_up.weight", types, {2 * f, c.n_embd}, {0.0f, in_embd}, seed);
      } else {
        add_matrix(&w, b + "ffn_gate.weight", types, {f, c.n_embd}, {0.0f, in_embd}, seed);
        add_matrix(&w, b + "ffn_down.weight", types, {c.n_embd, f}, {0.0f, in_dense}, seed);
        add_matrix(&w, b + "ffn_up.weight", types, {f, c.n_embd}, {0.0f, in_embd}, seed);
      }
    }
  }
  if (summary != nullptr) {
    summary->n_vocab = c.n_vocab;
    summary->n_params = parameter_count(c);
  }
  return w;
}

void set_make_model_type(const std::string& name, MakeModelOptions* opts) {
  QuantMix mix;
  if (parse_quant_mix(name, &mix)) {
    opts->mix = mix;
    return;
  }
  try {
    opts->dtype = parse_dtype(name);
    opts->mix = QuantMix::kNone;
  } catch (const InputError&) {
    throw InputError("unknown dtype '" + name + "' (types: " + dtype_names_list() +
                     "; llama.cpp mixes: " + quant_mix_names_list() + ")");
  }
}

std::string make_model_type_name(const MakeModelOptions& opts) {
  return opts.mix != QuantMix::kNone ? quant_mix_name(opts.mix) : dtype_name(opts.dtype);
}

MakeModelSummary make_model(const MakeModelOptions& opts) {
  if (opts.out_path.empty()) throw InputError("make-model needs an output path (--out FILE.gguf)");
  MakeModelSummary s;
  GgufWriter w = build_model_gguf(opts, &s);
  w.write_file(opts.out_path);
  s.file_bytes = static_cast<size_t>(std::filesystem::file_size(opts.out_path));
  return s;
}

}  // namespace parallm
