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

// Llama 3.1's per-frequency divisors, as llama.cpp's converter stores them in
// rope_freqs.weight: the effective inverse frequency is inv_freq[i] / factor[i].
std::vector<float> llama3_rope_factors(const ModelPreset& p) {
  const int64_t hd = p.head_dim();
  const double pi = 3.14159265358979323846;
  const double low_wavelen = p.rope_original_ctx / p.rope_low_freq_factor;
  const double high_wavelen = p.rope_original_ctx / p.rope_high_freq_factor;
  std::vector<float> f(static_cast<size_t>(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double freq = std::pow(static_cast<double>(p.rope_theta), -2.0 * i / static_cast<double>(hd));
    const double wavelen = 2.0 * pi / freq;
    double divisor = 1.0;
    if (wavelen > low_wavelen) {
      divisor = p.rope_factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (p.rope_original_ctx / wavelen - p.rope_low_freq_factor) / (p.rope_high_freq_factor - p.rope_low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / p.rope_factor + smooth);
    }
    f[static_cast<size_t>(i)] = static_cast<float>(divisor);
  }
  return f;
}

void write_vocab(GgufWriter* w, const MakeModelOptions& opts, int64_t* n_vocab) {
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
void write_deepseek_keys(GgufWriter* w, const ModelPreset& p) {
  const std::string a = p.arch + ".";
  if (p.q_lora_rank > 0) w->set_u32(a + "attention.q_lora_rank", static_cast<uint32_t>(p.q_lora_rank));
  w->set_u32(a + "attention.kv_lora_rank", static_cast<uint32_t>(p.kv_lora_rank));
  w->set_u32(a + "attention.key_length", static_cast<uint32_t>(p.qk_nope_dim + p.qk_rope_dim));
  w->set_u32(a + "attention.value_length", static_cast<uint32_t>(p.v_head_dim));
  w->set_u32(a + "rope.dimension_count", static_cast<uint32_t>(p.qk_rope_dim));
  w->set_u32(a + "feed_forward_length", static_cast<uint32_t>(p.n_ff_dense));
  w->set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(p.n_dense_lead));
  w->set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(p.n_ff));
  w->set_u32(a + "expert_shared_count", static_cast<uint32_t>(p.n_shared_experts));
  w->set_f32(a + "expert_weights_scale", p.routed_scale);
  w->set_bool(a + "expert_weights_norm", p.norm_topk);
  w->set_u32(a + "expert_gating_func", p.router_sigmoid ? 2 : 1);
  if (p.n_expert_groups > 1) {
    w->set_u32(a + "expert_group_count", static_cast<uint32_t>(p.n_expert_groups));
    w->set_u32(a + "expert_group_used_count", static_cast<uint32_t>(p.n_expert_groups_used));
  }
}

// One layer's latent attention (model/mla.h has the shapes).
void add_mla_tensors(GgufWriter* w, const ModelPreset& p, const std::string& b, DType dt, uint64_t seed) {
  const int64_t qh = p.qk_nope_dim + p.qk_rope_dim, lora = p.kv_lora_rank;
  auto std_of = [](int64_t n_in) { return 1.0f / std::sqrt(static_cast<float>(n_in)); };
  const TensorPlan norm{1.0f, 0.1f};
  if (p.q_lora_rank > 0) {
    add_random(w, b + "attn_q_a.weight", dt, {p.q_lora_rank, p.n_embd}, {0.0f, std_of(p.n_embd)}, seed);
    add_random(w, b + "attn_q_a_norm.weight", DType::kF32, {p.q_lora_rank}, norm, seed);
    add_random(w, b + "attn_q_b.weight", dt, {p.n_head * qh, p.q_lora_rank}, {0.0f, std_of(p.q_lora_rank)}, seed);
  } else {
    add_random(w, b + "attn_q.weight", dt, {p.n_head * qh, p.n_embd}, {0.0f, std_of(p.n_embd)}, seed);
  }
  add_random(w, b + "attn_kv_a_mqa.weight", dt, {lora + p.qk_rope_dim, p.n_embd}, {0.0f, std_of(p.n_embd)}, seed);
  add_random(w, b + "attn_kv_a_norm.weight", DType::kF32, {lora}, norm, seed);
  if (p.split_kv_b) {
    add_random(w, b + "attn_k_b.weight", dt, {p.n_head, lora, p.qk_nope_dim}, {0.0f, std_of(lora)}, seed);
    add_random(w, b + "attn_v_b.weight", dt, {p.n_head, p.v_head_dim, lora}, {0.0f, std_of(lora)}, seed);
  } else {
    add_random(w, b + "attn_kv_b.weight", dt, {p.n_head * (p.qk_nope_dim + p.v_head_dim), lora}, {0.0f, std_of(lora)},
               seed);
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
  const DType dt = opts.dtype;
  const std::string a = p.arch;
  GgufWriter w;

  w.set_string("general.architecture", a);
  w.set_string("general.name", "parallm-random-" + p.name);
  w.set_u32("general.file_type", gguf_file_type(dt));
  if (dtype_is_quantized(dt)) w.set_u32("general.quantization_version", 2);
  // The vocabulary decides n_vocab when it is copied; write it first into a
  // scratch writer so the model keys keep llama.cpp's order.
  GgufWriter vocab;
  write_vocab(&vocab, opts, &p.n_vocab);

  const int64_t hd = p.head_dim();
  w.set_u32(a + ".context_length", static_cast<uint32_t>(p.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(p.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(p.n_layer));
  const bool qwen_moe = a == "qwen2moe" || a == "qwen3moe";
  const bool mla = p.kv_lora_rank > 0;
  if (mla) {
    write_deepseek_keys(&w, p);
  } else if (qwen_moe) {
    // Qwen-MoE files carry a dense width that no layer uses (every layer is
    // sparse) beside the experts': written unlike n_ff, so a reader taking
    // the wrong key fails the shape checks.
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(4 * p.n_ff));
    w.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(p.n_ff));
    if (p.n_ff_shared > 0) w.set_u32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(p.n_ff_shared));
  } else {
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(p.n_ff));
  }
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(p.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(p.n_kv_head));
  w.set_f32(a + ".rope.freq_base", p.rope_theta);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", p.rms_eps);
  if (!mla) w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(hd));
  if (p.head_dim_override > 0 && !mla) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  }
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(p.n_vocab));
  if (p.sliding_window > 0) w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(p.sliding_window));
  if (p.attn_softcap > 0) w.set_f32(a + ".attn_logit_softcapping", p.attn_softcap);
  if (p.final_softcap > 0) w.set_f32(a + ".final_logit_softcapping", p.final_softcap);
  if (p.n_expert > 0) {
    w.set_u32(a + ".expert_count", static_cast<uint32_t>(p.n_expert));
    w.set_u32(a + ".expert_used_count", static_cast<uint32_t>(p.n_expert_used));
  }
  if (p.rope_scaling == RopeScaling::kYarn) {
    w.set_string(a + ".rope.scaling.type", "yarn");
    w.set_f32(a + ".rope.scaling.factor", p.rope_factor);
    w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(p.rope_original_ctx));
    w.set_f32(a + ".rope.scaling.yarn_log_multiplier", p.yarn_log_multiplier);
  } else if (p.rope_scaling == RopeScaling::kLongRope) {
    // As llama.cpp's converter writes Phi-3: the factors are tensors.
    w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(p.rope_original_ctx));
    w.set_f32(a + ".rope.scaling.attn_factor", longrope_attn_factor(p.n_ctx, p.rope_original_ctx));
  } else if (p.rope_scaling == RopeScaling::kLinear) {
    w.set_string(a + ".rope.scaling.type", "linear");
    w.set_f32(a + ".rope.scaling.factor", p.rope_factor);
  } else if (p.rope_scaling == RopeScaling::kLlama3) {
    w.set_string("parallm.rope_scaling.type", "llama3");
    w.set_f32("parallm.rope_scaling.factor", p.rope_factor);
    w.set_f32("parallm.rope_scaling.low_freq_factor", p.rope_low_freq_factor);
    w.set_f32("parallm.rope_scaling.high_freq_factor", p.rope_high_freq_factor);
    w.set_u32("parallm.rope_scaling.original_context_length", static_cast<uint32_t>(p.rope_original_ctx));
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
  const float in_embd = 1.0f / std::sqrt(static_cast<float>(p.n_embd));
  const float in_ff = 1.0f / std::sqrt(static_cast<float>(p.n_ff));
  const TensorPlan norm{1.0f, 0.1f};
  const int64_t q_dim = p.n_head * hd, kv_dim = p.n_kv_head * hd;

  add_random(&w, "token_embd.weight", dt, {p.n_vocab, p.n_embd}, {0.0f, 2.0f * in_embd}, seed);
  add_random(&w, "output_norm.weight", DType::kF32, {p.n_embd}, norm, seed);
  if (!p.tied_embeddings) add_random(&w, "output.weight", dt, {p.n_vocab, p.n_embd}, {0.0f, 2.0f * in_embd}, seed);
  if (p.rope_scaling == RopeScaling::kLongRope) {
    // Smooth ramps as real checkpoints have: long 1 -> 8, short 1 -> 1.5.
    const int64_t half = hd / 2;
    std::vector<float> lf(static_cast<size_t>(half)), sf(lf.size());
    for (int64_t i = 0; i < half; ++i) {
      const float x = half > 1 ? static_cast<float>(i) / static_cast<float>(half - 1) : 0.0f;
      lf[static_cast<size_t>(i)] = 1.0f + 7.0f * x * x;
      sf[static_cast<size_t>(i)] = 1.0f + 0.5f * x;
    }
    for (const auto& [name, f] :
         {std::pair{"rope_factors_long.weight", lf}, std::pair{"rope_factors_short.weight", sf}}) {
      std::vector<uint8_t> bytes(f.size() * sizeof(float));
      std::memcpy(bytes.data(), f.data(), bytes.size());
      w.add_tensor(name, DType::kF32, {half}, std::move(bytes));
    }
  }
  if (p.rope_scaling == RopeScaling::kLlama3) {
    std::vector<float> f = llama3_rope_factors(p);
    std::vector<uint8_t> bytes(f.size() * sizeof(float));
    std::memcpy(bytes.data(), f.data(), bytes.size());
    w.add_tensor("rope_freqs.weight", DType::kF32, {static_cast<int64_t>(f.size())}, std::move(bytes));
  }
  for (int64_t l = 0; l < p.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add_random(&w, b + "attn_norm.weight", DType::kF32, {p.n_embd}, norm, seed);
    if (mla) {
      add_mla_tensors(&w, p, b, dt, seed);
    } else if (a == "phi3") {
      add_random(&w, b + "attn_qkv.weight", dt, {q_dim + 2 * kv_dim, p.n_embd}, {0.0f, in_embd}, seed);
    } else {
      add_random(&w, b + "attn_q.weight", dt, {q_dim, p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "attn_k.weight", dt, {kv_dim, p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "attn_v.weight", dt, {kv_dim, p.n_embd}, {0.0f, in_embd}, seed);
    }
    if (p.qkv_bias) {
      add_random(&w, b + "attn_q.bias", DType::kF32, {q_dim}, {0.0f, 0.5f}, seed);
      add_random(&w, b + "attn_k.bias", DType::kF32, {kv_dim}, {0.0f, 0.5f}, seed);
      add_random(&w, b + "attn_v.bias", DType::kF32, {kv_dim}, {0.0f, 0.5f}, seed);
    }
    const int64_t o_in = mla ? p.n_head * p.v_head_dim : q_dim;
    add_random(&w, b + "attn_output.weight", dt, {p.n_embd, o_in}, {0.0f, 1.0f / std::sqrt(static_cast<float>(o_in))},
               seed);
    if (p.qk_norm) {
      add_random(&w, b + "attn_q_norm.weight", DType::kF32, {hd}, norm, seed);
      add_random(&w, b + "attn_k_norm.weight", DType::kF32, {hd}, norm, seed);
    }
    add_random(&w, b + "ffn_norm.weight", DType::kF32, {p.n_embd}, norm, seed);
    if (a == "gemma2" || a == "gemma3") {
      add_random(&w, b + "post_attention_norm.weight", DType::kF32, {p.n_embd}, norm, seed);
      add_random(&w, b + "post_ffw_norm.weight", DType::kF32, {p.n_embd}, norm, seed);
    }
    const bool moe_layer = p.n_expert > 0 && l >= p.n_dense_lead;
    if (moe_layer && p.n_shared_experts > 0) {  // DeepSeek: ungated, n experts of n_ff as one FFN
      const int64_t f = p.n_shared_experts * p.n_ff;
      add_random(&w, b + "ffn_gate_shexp.weight", dt, {f, p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "ffn_down_shexp.weight", dt, {p.n_embd, f}, {0.0f, 1.0f / std::sqrt(static_cast<float>(f))},
                 seed);
      add_random(&w, b + "ffn_up_shexp.weight", dt, {f, p.n_embd}, {0.0f, in_embd}, seed);
    }
    if (p.n_ff_shared > 0) {
      // Gate logits of about unit spread, so the sigmoid is far from constant.
      const float in_shared = 1.0f / std::sqrt(static_cast<float>(p.n_ff_shared));
      add_random(&w, b + "ffn_gate_inp_shexp.weight", DType::kF32, {p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "ffn_gate_shexp.weight", dt, {p.n_ff_shared, p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "ffn_down_shexp.weight", dt, {p.n_embd, p.n_ff_shared}, {0.0f, in_shared}, seed);
      add_random(&w, b + "ffn_up_shexp.weight", dt, {p.n_ff_shared, p.n_embd}, {0.0f, in_embd}, seed);
    }
    if (moe_layer) {
      add_random(&w, b + "ffn_gate_inp.weight", DType::kF32, {p.n_expert, p.n_embd}, {0.0f, 2.0f * in_embd}, seed);
      // A choice bias the size of the sigmoid scores' differences, so it moves some choices.
      if (p.router_bias) add_random(&w, b + "exp_probs_b.bias", DType::kF32, {p.n_expert}, {0.0f, 0.05f}, seed);
      add_random(&w, b + "ffn_gate_exps.weight", dt, {p.n_expert, p.n_ff, p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "ffn_down_exps.weight", dt, {p.n_expert, p.n_embd, p.n_ff}, {0.0f, in_ff}, seed);
      add_random(&w, b + "ffn_up_exps.weight", dt, {p.n_expert, p.n_ff, p.n_embd}, {0.0f, in_embd}, seed);
    } else if (p.n_dense_lead > 0) {  // DeepSeek's leading dense layers
      const float in_dense = 1.0f / std::sqrt(static_cast<float>(p.n_ff_dense));
      add_random(&w, b + "ffn_gate.weight", dt, {p.n_ff_dense, p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "ffn_down.weight", dt, {p.n_embd, p.n_ff_dense}, {0.0f, in_dense}, seed);
      add_random(&w, b + "ffn_up.weight", dt, {p.n_ff_dense, p.n_embd}, {0.0f, in_embd}, seed);
    } else if (a == "phi3") {  // gate rows then up rows, one matrix
      add_random(&w, b + "ffn_down.weight", dt, {p.n_embd, p.n_ff}, {0.0f, in_ff}, seed);
      add_random(&w, b + "ffn_up.weight", dt, {2 * p.n_ff, p.n_embd}, {0.0f, in_embd}, seed);
    } else {
      add_random(&w, b + "ffn_gate.weight", dt, {p.n_ff, p.n_embd}, {0.0f, in_embd}, seed);
      add_random(&w, b + "ffn_down.weight", dt, {p.n_embd, p.n_ff}, {0.0f, in_ff}, seed);
      add_random(&w, b + "ffn_up.weight", dt, {p.n_ff, p.n_embd}, {0.0f, in_embd}, seed);
    }
  }
  if (summary != nullptr) {
    summary->n_vocab = p.n_vocab;
    summary->n_params = p.parameter_count();
  }
  return w;
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
