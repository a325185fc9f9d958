// The preset table of `parallm make-model` (see model_presets.h).
#include "modelgen/model_presets.h"

#include <cmath>
#include <utility>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

// An architecture's description with what it implies (RoPE style, biases,
// norms, ...) before a preset overrides any of it.
ModelConfig shape(Architecture arch, int64_t n_vocab, int64_t n_embd, int64_t n_layer, int64_t n_head,
                  int64_t n_kv_head, int64_t n_ff, int64_t n_ctx) {
  ModelConfig c;
  c.arch = arch;
  apply_architecture_defaults(&c);
  c.n_vocab = n_vocab;
  c.n_embd = n_embd;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_kv_head = n_kv_head;
  c.n_ff = n_ff;
  c.n_ctx_train = n_ctx;
  return c;
}

ModelConfig llama(int64_t n_vocab, int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_kv_head, int64_t n_ff,
                  int64_t n_ctx) {
  return shape(Architecture::kLlama, n_vocab, n_embd, n_layer, n_head, n_kv_head, n_ff, n_ctx);
}

// llama.cpp keeps YaRN's mscale_all_dim as yarn_log_multiplier = 0.1 m (and
// DeepSeek's files have mscale equal to it): the value its reader takes.
void set_yarn_log_multiplier(ModelConfig* c, double multiplier) {
  c->yarn_mscale = c->yarn_mscale_all_dim = static_cast<float>(multiplier / 0.1);
}

ModelPreset preset(const std::string& name, const std::string& description, ModelConfig c, bool split_kv_b = false) {
  complete_generated_config(&c);
  return ModelPreset{name, description, std::move(c), split_kv_b};
}

std::vector<ModelPreset> build_presets() {
  std::vector<ModelPreset> v;
  v.push_back(preset("tiny", "Llama, GQA, for tests", llama(512, 64, 2, 4, 2, 128, 512)));
  v.push_back(preset("llama-110m", "Llama 2 shape of stories110M, untied output (the benchmark model)",
                     llama(32000, 768, 12, 12, 12, 2048, 1024)));
  v.push_back(
      preset("llama-gqa-250m", "Llama with grouped-query attention", llama(32000, 1024, 16, 16, 4, 2816, 2048)));
  // The 8B shape of the GPU benchmarks (bench-model --synthetic llama-8b):
  // 16 GB in bf16, never written to disk by the tests.
  ModelConfig l8 = llama(128256, 4096, 32, 32, 8, 14336, 8192);
  l8.rope_theta = 500000.0f;
  v.push_back(preset("llama-8b", "Llama 3 8B shape (bench-model --synthetic; 16 GB in bf16)", l8));

  ModelConfig moe = llama(512, 64, 2, 4, 2, 128, 512);
  moe.n_expert = 8;
  moe.n_expert_used = 2;
  moe.rope_theta = 1000000.0f;
  v.push_back(preset("mixtral-tiny", "Mixtral-style MoE: 8 experts, top-2", moe));

  ModelConfig qwen = shape(Architecture::kQwen2, 512, 64, 2, 4, 2, 128, 512);  // QKV bias
  qwen.tied_embeddings = true;
  qwen.rope_theta = 1000000.0f;
  qwen.rms_eps = 1e-6f;
  v.push_back(preset("tiny-qwen2", "Qwen2: QKV bias, tied embeddings, rotate-half RoPE", qwen));

  ModelConfig tied = llama(512, 64, 2, 4, 2, 128, 512);
  tied.tied_embeddings = true;
  v.push_back(preset("tiny-tied", "Llama with the classifier tied to token_embd", tied));

  // A small original context makes the llama3 band (16..64 positions of
  // wavelength at head_dim 16) cover several frequencies.
  ModelConfig l3 = llama(512, 64, 2, 4, 2, 128, 512);
  l3.rope_theta = 500000.0f;
  l3.rope_scaling = RopeScaling::kLlama3;
  l3.rope_factor = 8.0f;
  l3.rope_low_freq_factor = 1.0f;
  l3.rope_high_freq_factor = 4.0f;
  l3.rope_original_ctx = 64;
  v.push_back(preset("tiny-llama3", "Llama 3.1 rope scaling (llama3: factor 8, low 1, high 4, original ctx 64)", l3));

  // Heads of 64 values: the AVX-512 attention's register paths and the q8_0
  // KV cache (whole 32-value blocks per head) are exercised at test size.
  v.push_back(preset("tiny-mha64", "Llama with 64-wide heads, no GQA (q8_0 KV cache tests)",
                     llama(512, 128, 2, 2, 2, 256, 512)));
  // Rows of 256 and 512 values: the 256-value super-blocks (q2_k .. q6_k,
  // iq4_xs) at test size; no smaller preset holds whole ones.
  v.push_back(
      preset("tiny-256", "Llama with 256-wide rows (k-quant and iq4_xs tests)", llama(512, 256, 2, 4, 2, 512, 512)));

  // Qwen3: per-head q/k RMSNorm, heads wider than n_embd / n_head (as in
  // Qwen3-0.6B: 16 heads of 128 over 1024), tied embeddings.
  ModelConfig q3 = shape(Architecture::kQwen3, 512, 64, 2, 4, 2, 128, 512);
  q3.head_dim = 32;
  q3.tied_embeddings = true;
  q3.rope_theta = 1000000.0f;
  q3.rms_eps = 1e-6f;
  v.push_back(preset("tiny-qwen3", "Qwen3: q/k norms, head_dim 32 != n_embd / n_head, tied embeddings", q3));

  ModelConfig q3m = shape(Architecture::kQwen3Moe, 512, 64, 2, 4, 2, 64, 512);  // top-k renormalized
  q3m.head_dim = 32;
  q3m.n_expert = 8;
  q3m.n_expert_used = 2;
  // Qwen-MoE files carry a dense width that no layer uses (every layer is
  // sparse) beside the experts': unlike n_ff, so a reader taking the wrong
  // key fails the shape checks.
  q3m.n_ff_dense = 4 * q3m.n_ff;
  q3m.rope_theta = 1000000.0f;
  q3m.rms_eps = 1e-6f;
  v.push_back(preset("tiny-qwen3moe", "Qwen3-MoE: q/k norms, 8 experts of 64, top-2 renormalized", q3m));

  // QKV bias, top-k unnormalized, the shared expert gated.
  ModelConfig q2m = shape(Architecture::kQwen2Moe, 512, 64, 2, 4, 2, 64, 512);
  q2m.n_expert = 8;
  q2m.n_expert_used = 2;
  q2m.n_ff_dense = 4 * q2m.n_ff;  // unused, as tiny-qwen3moe's
  q2m.n_ff_shared = 128;
  q2m.n_expert_shared = 1;
  q2m.rope_theta = 1000000.0f;
  q2m.rms_eps = 1e-6f;
  v.push_back(
      preset("tiny-qwen2moe", "Qwen2-MoE: QKV bias, 8 experts of 64 top-2 unnormalized, gated shared 128", q2m));

  // Gemma 2: windows of 8 keys on the even layers so a test prompt crosses
  // them; soft-caps low enough to bend a random model's scores and logits.
  ModelConfig g2 = shape(Architecture::kGemma2, 512, 64, 2, 4, 2, 128, 512);  // tied, post-norms, GeGLU
  g2.head_dim = 32;
  g2.sliding_window = 8;
  g2.attn_softcap = 10.0f;
  g2.final_softcap = 5.0f;
  g2.rms_eps = 1e-6f;
  v.push_back(
      preset("tiny-gemma2", "Gemma 2: GeGLU, post-norms, soft-caps 10/5, window 8 on even layers, head 32", g2));

  // Gemma 3: the 5:1 pattern needs six layers (the sixth global); the global
  // layer's RoPE is linear-scaled as in the 4B+ models, the local ones not.
  ModelConfig g3 = shape(Architecture::kGemma3, 512, 64, 6, 4, 1, 128, 512);  // q/k norms, tied
  g3.head_dim = 32;
  g3.sliding_window = 8;
  g3.rope_theta = 1000000.0f;
  g3.rope_scaling = RopeScaling::kLinear;
  g3.rope_factor = 8.0f;
  g3.rms_eps = 1e-6f;
  v.push_back(preset("tiny-gemma3", "Gemma 3: q/k norms, window 8 on 5 of 6 layers, local/global RoPE 1e4/1e6 x8", g3));

  // Phi-3: a trained context (512) past the original one (64), so the
  // default context runs the long factors and --ctx-size 64 the short ones.
  ModelConfig phi = shape(Architecture::kPhi3, 512, 64, 2, 4, 2, 128, 512);
  phi.rope_scaling = RopeScaling::kLongRope;
  phi.rope_original_ctx = 64;
  v.push_back(preset("tiny-phi3", "Phi-3: fused attn_qkv and gate+up, LongRoPE (original context 64)", phi));

  // DeepSeek-V3's shape in small: q through a low-rank latent, the cache a
  // latent of 32 + a rope part of 16, values of 24 (not the nope 16), one
  // leading dense layer, sigmoid routing with a choice bias inside the best
  // 2 of 4 groups, top-2 renormalized and scaled 2.5, one shared expert,
  // YaRN (factor 4 over an original 64).
  ModelConfig ds = shape(Architecture::kDeepseek2, 512, 64, 3, 4, 4, 32, 512);
  ds.q_lora_rank = 32;
  ds.kv_lora_rank = 32;
  ds.qk_nope_dim = 16;
  ds.qk_rope_dim = 16;
  ds.v_head_dim = 24;
  ds.head_dim = ds.qk_nope_dim + ds.qk_rope_dim;
  ds.n_dense_lead = 1;
  ds.n_ff_dense = 96;
  ds.n_expert = 8;
  ds.n_expert_used = 2;
  ds.n_expert_shared = 1;
  ds.n_ff_shared = ds.n_expert_shared * ds.n_ff;  // shared experts of the routed ones' width
  ds.router_scoring = RouterScoring::kSigmoid;
  ds.router_bias = true;
  ds.norm_topk_prob = true;
  ds.n_expert_groups = 4;
  ds.n_expert_groups_used = 2;
  ds.routed_scale = 2.5f;
  ds.rope_scaling = RopeScaling::kYarn;
  ds.rope_factor = 4.0f;
  ds.rope_original_ctx = 64;
  set_yarn_log_multiplier(&ds, 0.1f);
  ds.rms_eps = 1e-6f;
  v.push_back(preset("tiny-deepseek2",
                     "DeepSeek-V3 shape: MLA (q_lora 32, kv_lora 32), 1 dense + 2 MoE layers, "
                     "8 experts in 4 groups, sigmoid + bias, YaRN",
                     ds));

  // DeepSeek-V2-Lite's: q straight from the hidden state, softmax routing
  // without groups or renormalization, two shared experts, and the split
  // attn_k_b / attn_v_b tensors of newer llama.cpp files.
  ModelConfig lite = shape(Architecture::kDeepseek2, 512, 64, 2, 4, 4, 32, 512);
  lite.kv_lora_rank = 32;
  lite.qk_nope_dim = 32;  // attn_k_b's rows: whole 32-value blocks in quantized files
  lite.qk_rope_dim = 16;
  lite.v_head_dim = 16;
  lite.head_dim = lite.qk_nope_dim + lite.qk_rope_dim;
  lite.n_dense_lead = 1;
  lite.n_ff_dense = 64;
  lite.n_expert = 8;
  lite.n_expert_used = 2;
  lite.n_expert_shared = 2;
  lite.n_ff_shared = lite.n_expert_shared * lite.n_ff;
  lite.rope_scaling = RopeScaling::kYarn;
  lite.rope_factor = 40.0f;
  lite.rope_original_ctx = 64;
  set_yarn_log_multiplier(&lite, 0.0707f);
  lite.rms_eps = 1e-6f;
  v.push_back(preset("tiny-deepseek2-lite",
                     "DeepSeek-V2-Lite shape: MLA without q_lora, softmax top-2, "
                     "2 shared experts, split k_b / v_b, YaRN",
                     lite, /*split_kv_b=*/true));
  return v;
}

}  // namespace

void complete_generated_config(ModelConfig* c) {
  if (c->rope_scaling == RopeScaling::kLongRope) {
    // Smooth ramps over the head's frequencies: long 1 -> 8, short 1 -> 1.5.
    const int64_t half = (c->head_dim > 0 ? c->head_dim : c->n_embd / c->n_head) / 2;
    c->rope_long_factors.assign(static_cast<size_t>(half), 0.0f);
    c->rope_short_factors.assign(static_cast<size_t>(half), 0.0f);
    for (int64_t i = 0; i < half; ++i) {
      const float x = half > 1 ? static_cast<float>(i) / static_cast<float>(half - 1) : 0.0f;
      c->rope_long_factors[static_cast<size_t>(i)] = 1.0f + 7.0f * x * x;
      c->rope_short_factors[static_cast<size_t>(i)] = 1.0f + 0.5f * x;
    }
    c->rope_attn_factor = longrope_attn_factor(c->n_ctx_train, c->rope_original_ctx);
  }
  // What llama.cpp fixes per Gemma generation rather than storing (as
  // config/gguf_config.cpp reads it): which layers slide, the embedding
  // scale, Gemma 3's unscaled local RoPE.
  if (c->arch == Architecture::kGemma2 || c->arch == Architecture::kGemma3) {
    c->set_sliding_pattern(c->arch == Architecture::kGemma2 ? 2 : 6);
    c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
    if (c->arch == Architecture::kGemma3) c->rope_theta_swa = 10000.0f;
  }
  c->finalize();
}

int64_t parameter_count(const ModelConfig& c) {
  const int64_t e = c.n_embd, hd = c.head_dim;
  int64_t attn = 0;
  if (c.mla()) {
    const int64_t q = c.q_lora_rank > 0 ? c.q_lora_rank * (e + 1) + c.n_head * hd * c.q_lora_rank : c.n_head * hd * e;
    attn = q + (c.kv_lora_rank + c.qk_rope_dim) * e + c.kv_lora_rank +
           c.n_head * (c.qk_nope_dim + c.v_head_dim) * c.kv_lora_rank + e * c.n_head * c.v_head_dim;
  } else {
    attn = e * c.n_head * hd * 2 + e * c.n_kv_head * hd * 2;
    if (c.qkv_bias) attn += c.n_head * hd + 2 * c.n_kv_head * hd;
    if (c.qk_norm) attn += 2 * hd;
  }
  const int64_t norms = (c.post_norms ? 4 : 2) * e;
  int64_t moe = c.n_expert * (3 * e * c.n_ff + e + (c.router_bias ? 1 : 0));
  if (c.has_shared_expert()) moe += 3 * e * c.n_ff_shared + (c.shared_expert_gated ? e : 0);
  int64_t n_moe = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) n_moe += c.is_moe_layer(l) ? 1 : 0;
  return c.n_layer * (attn + norms) + (c.n_layer - n_moe) * 3 * e * c.dense_ff() + n_moe * moe +
         c.n_vocab * e * (c.tied_embeddings ? 1 : 2) + e;
}

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = build_presets();
  return presets;
}

const ModelPreset& find_model_preset(const std::string& name) {
  std::string names;
  for (const auto& p : model_presets()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw InputError("unknown preset '" + name + "' (available: " + names + ")");
}

std::string describe_model_presets() {
  std::string s = "Presets (vocab / dim / layers / heads / KV heads / FFN / context):\n";
  for (const auto& p : model_presets()) {
    const ModelConfig& c = p.config;
    s += strfmt("  %-15s %s %lld/%lld/%lld/%lld/%lld/%lld/%lld", p.name.c_str(), c.arch_name.c_str(),
                (long long)c.n_vocab, (long long)c.n_embd, (long long)c.n_layer, (long long)c.n_head,
                (long long)c.n_kv_head, (long long)c.n_ff, (long long)c.n_ctx_train);
    if (c.is_moe()) s += strfmt(", %lld experts top-%lld", (long long)c.n_expert, (long long)c.n_expert_used);
    // NOTE: DeepSeek's shared experts are named in its presets' descriptions.
    if (c.shared_expert_gated) s += strfmt(", shared expert %lld", (long long)c.n_ff_shared);
    s += strfmt(", %.1fM params: %s\n", parameter_count(c) / 1e6, p.description.c_str());
  }
  return s;
}

}  // namespace parallm
