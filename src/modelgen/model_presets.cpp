// The preset table of `parallm make-model` (see model_presets.h).
#include "modelgen/model_presets.h"

#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

ModelPreset base(const std::string& name, const std::string& description, int64_t n_vocab, int64_t n_embd,
                 int64_t n_layer, int64_t n_head, int64_t n_kv_head, int64_t n_ff, int64_t n_ctx) {
  ModelPreset p;
  p.name = name;
  p.description = description;
  p.n_vocab = n_vocab;
  p.n_embd = n_embd;
  p.n_layer = n_layer;
  p.n_head = n_head;
  p.n_kv_head = n_kv_head;
  p.n_ff = n_ff;
  p.n_ctx = n_ctx;
  return p;
}

std::vector<ModelPreset> build_presets() {
  std::vector<ModelPreset> v;
  v.push_back(base("tiny", "Llama, GQA, for tests", 512, 64, 2, 4, 2, 128, 512));
  v.push_back(base("llama-110m", "Llama 2 shape of stories110M, untied output (the benchmark model)", 32000, 768, 12,
                   12, 12, 2048, 1024));
  v.push_back(base("llama-gqa-250m", "Llama with grouped-query attention", 32000, 1024, 16, 16, 4, 2816, 2048));
  // The 8B shape of the GPU benchmarks (bench-model --synthetic llama-8b):
  // 16 GB in bf16, never written to disk by the tests.
  ModelPreset l8 = base("llama-8b", "Llama 3 8B shape (bench-model --synthetic; 16 GB in bf16)", 128256, 4096, 32, 32,
                        8, 14336, 8192);
  l8.rope_theta = 500000.0f;
  v.push_back(l8);

  ModelPreset moe = base("mixtral-tiny", "Mixtral-style MoE: 8 experts, top-2", 512, 64, 2, 4, 2, 128, 512);
  moe.n_expert = 8;
  moe.n_expert_used = 2;
  moe.rope_theta = 1000000.0f;
  v.push_back(moe);

  ModelPreset qwen =
      base("tiny-qwen2", "Qwen2: QKV bias, tied embeddings, rotate-half RoPE", 512, 64, 2, 4, 2, 128, 512);
  qwen.arch = "qwen2";
  qwen.qkv_bias = true;
  qwen.tied_embeddings = true;
  qwen.rope_theta = 1000000.0f;
  qwen.rms_eps = 1e-6f;
  v.push_back(qwen);

  ModelPreset tied = base("tiny-tied", "Llama with the classifier tied to token_embd", 512, 64, 2, 4, 2, 128, 512);
  tied.tied_embeddings = true;
  v.push_back(tied);

  // A small original context makes the llama3 band (16..64 positions of
  // wavelength at head_dim 16) cover several frequencies.
  ModelPreset l3 = base("tiny-llama3", "Llama 3.1 rope scaling (llama3: factor 8, low 1, high 4, original ctx 64)", 512,
                        64, 2, 4, 2, 128, 512);
  l3.rope_theta = 500000.0f;
  l3.rope_scaling = RopeScaling::kLlama3;
  l3.rope_factor = 8.0f;
  l3.rope_low_freq_factor = 1.0f;
  l3.rope_high_freq_factor = 4.0f;
  l3.rope_original_ctx = 64;
  v.push_back(l3);

  // Heads of 64 values: the AVX-512 attention's register paths and the q8_0
  // KV cache (whole 32-value blocks per head) are exercised at test size.
  v.push_back(
      base("tiny-mha64", "Llama with 64-wide heads, no GQA (q8_0 KV cache tests)", 512, 128, 2, 2, 2, 256, 512));
  // Rows of 256 and 512 values: the 256-value super-blocks (q2_k .. q6_k,
  // iq4_xs) at test size; no smaller preset holds whole ones.
  v.push_back(base("tiny-256", "Llama with 256-wide rows (k-quant and iq4_xs tests)", 512, 256, 2, 4, 2, 512, 512));

  // Qwen3: per-head q/k RMSNorm, heads wider than n_embd / n_head (as in
  // Qwen3-0.6B: 16 heads of 128 over 1024), tied embeddings.
  ModelPreset q3 = base("tiny-qwen3", "Qwen3: q/k norms, head_dim 32 != n_embd / n_head, tied embeddings", 512, 64, 2,
                        4, 2, 128, 512);
  q3.arch = "qwen3";
  q3.head_dim_override = 32;
  q3.qk_norm = true;
  q3.tied_embeddings = true;
  q3.rope_theta = 1000000.0f;
  q3.rms_eps = 1e-6f;
  v.push_back(q3);

  ModelPreset q3m =
      base("tiny-qwen3moe", "Qwen3-MoE: q/k norms, 8 experts of 64, top-2 renormalized", 512, 64, 2, 4, 2, 64, 512);
  q3m.arch = "qwen3moe";
  q3m.head_dim_override = 32;
  q3m.qk_norm = true;
  q3m.n_expert = 8;
  q3m.n_expert_used = 2;
  q3m.rope_theta = 1000000.0f;
  q3m.rms_eps = 1e-6f;
  v.push_back(q3m);

  ModelPreset q2m = base("tiny-qwen2moe", "Qwen2-MoE: QKV bias, 8 experts of 64 top-2 unnormalized, gated shared 128",
                         512, 64, 2, 4, 2, 64, 512);
  q2m.arch = "qwen2moe";
  q2m.qkv_bias = true;
  q2m.n_expert = 8;
  q2m.n_expert_used = 2;
  q2m.n_ff_shared = 128;
  q2m.rope_theta = 1000000.0f;
  q2m.rms_eps = 1e-6f;
  v.push_back(q2m);

  // Gemma 2: windows of 8 keys on the even layers so a test prompt crosses
  // them; soft-caps low enough to bend a random model's scores and logits.
  ModelPreset g2 = base("tiny-gemma2", "Gemma 2: GeGLU, post-norms, soft-caps 10/5, window 8 on even layers, head 32",
                        512, 64, 2, 4, 2, 128, 512);
  g2.arch = "gemma2";
  g2.head_dim_override = 32;
  g2.tied_embeddings = true;
  g2.sliding_window = 8;
  g2.attn_softcap = 10.0f;
  g2.final_softcap = 5.0f;
  g2.rms_eps = 1e-6f;
  v.push_back(g2);

  // Gemma 3: the 5:1 pattern needs six layers (the sixth global); the global
  // layer's RoPE is linear-scaled as in the 4B+ models, the local ones not.
  ModelPreset g3 = base("tiny-gemma3", "Gemma 3: q/k norms, window 8 on 5 of 6 layers, local/global RoPE 1e4/1e6 x8",
                        512, 64, 6, 4, 1, 128, 512);
  g3.arch = "gemma3";
  g3.head_dim_override = 32;
  g3.qk_norm = true;
  g3.tied_embeddings = true;
  g3.sliding_window = 8;
  g3.rope_theta = 1000000.0f;
  g3.rope_scaling = RopeScaling::kLinear;
  g3.rope_factor = 8.0f;
  g3.rms_eps = 1e-6f;
  v.push_back(g3);

  // Phi-3: a trained context (512) past the original one (64), so the
  // default context runs the long factors and --ctx-size 64 the short ones.
  ModelPreset phi = base("tiny-phi3", "Phi-3: fused attn_qkv and gate+up, LongRoPE (original context 64)", 512, 64, 2,
                         4, 2, 128, 512);
  phi.arch = "phi3";
  phi.rope_scaling = RopeScaling::kLongRope;
  phi.rope_original_ctx = 64;
  v.push_back(phi);

  // DeepSeek-V3's shape in small: q through a low-rank latent, the cache a
  // latent of 32 + a rope part of 16, values of 24 (not the nope 16), one
  // leading dense layer, sigmoid routing with a choice bias inside the best
  // 2 of 4 groups, top-2 renormalized and scaled 2.5, one shared expert,
  // YaRN (factor 4 over an original 64).
  ModelPreset ds = base("tiny-deepseek2",
                        "DeepSeek-V3 shape: MLA (q_lora 32, kv_lora 32), 1 dense + 2 MoE layers, "
                        "8 experts in 4 groups, sigmoid + bias, YaRN",
                        512, 64, 3, 4, 4, 32, 512);
  ds.arch = "deepseek2";
  ds.q_lora_rank = 32;
  ds.kv_lora_rank = 32;
  ds.qk_nope_dim = 16;
  ds.qk_rope_dim = 16;
  ds.v_head_dim = 24;
  ds.head_dim_override = 32;
  ds.n_dense_lead = 1;
  ds.n_ff_dense = 96;
  ds.n_expert = 8;
  ds.n_expert_used = 2;
  ds.n_shared_experts = 1;
  ds.router_sigmoid = true;
  ds.router_bias = true;
  ds.norm_topk = true;
  ds.n_expert_groups = 4;
  ds.n_expert_groups_used = 2;
  ds.routed_scale = 2.5f;
  ds.rope_scaling = RopeScaling::kYarn;
  ds.rope_factor = 4.0f;
  ds.rope_original_ctx = 64;
  ds.yarn_log_multiplier = 0.1f;
  ds.rms_eps = 1e-6f;
  v.push_back(ds);

  // DeepSeek-V2-Lite's: q straight from the hidden state, softmax routing
  // without groups or renormalization, two shared experts, and the split
  // attn_k_b / attn_v_b tensors of newer llama.cpp files.
  ModelPreset lite = base("tiny-deepseek2-lite",
                          "DeepSeek-V2-Lite shape: MLA without q_lora, softmax top-2, "
                          "2 shared experts, split k_b / v_b, YaRN",
                          512, 64, 2, 4, 4, 32, 512);
  lite.arch = "deepseek2";
  lite.kv_lora_rank = 32;
  lite.qk_nope_dim = 32;  // attn_k_b's rows: whole 32-value blocks in quantized files
  lite.qk_rope_dim = 16;
  lite.v_head_dim = 16;
  lite.head_dim_override = 48;
  lite.n_dense_lead = 1;
  lite.n_ff_dense = 64;
  lite.n_expert = 8;
  lite.n_expert_used = 2;
  lite.n_shared_experts = 2;
  lite.rope_scaling = RopeScaling::kYarn;
  lite.rope_factor = 40.0f;
  lite.rope_original_ctx = 64;
  lite.yarn_log_multiplier = 0.0707f;
  lite.split_kv_b = true;
  lite.rms_eps = 1e-6f;
  v.push_back(lite);
  return v;
}

}  // namespace

int64_t ModelPreset::parameter_count() const {
  const int64_t hd = head_dim();
  if (kv_lora_rank > 0) {  // DeepSeek: MLA, leading dense layers, shared experts
    const int64_t q = q_lora_rank > 0 ? q_lora_rank * (n_embd + 1) + n_head * hd * q_lora_rank : n_head * hd * n_embd;
    const int64_t attn = q + (kv_lora_rank + qk_rope_dim) * n_embd + kv_lora_rank +
                         n_head * (qk_nope_dim + v_head_dim) * kv_lora_rank + n_embd * n_head * v_head_dim;
    const int64_t moe =
        n_expert * (3 * n_embd * n_ff + n_embd + (router_bias ? 1 : 0)) + 3 * n_embd * n_ff * n_shared_experts;
    const int64_t dense = 3 * n_embd * n_ff_dense;
    return n_layer * (attn + 2 * n_embd) + n_dense_lead * dense + (n_layer - n_dense_lead) * moe +
           n_vocab * n_embd * (tied_embeddings ? 1 : 2) + n_embd;
  }
  int64_t attn = n_embd * n_head * hd * 2 + n_embd * n_kv_head * hd * 2;
  if (qkv_bias) attn += n_head * hd + 2 * n_kv_head * hd;
  if (qk_norm) attn += 2 * hd;
  if (arch == "gemma2" || arch == "gemma3") attn += 2 * n_embd;  // the post-norms
  int64_t ffn = 3 * n_embd * n_ff * (n_expert > 0 ? n_expert : 1) + (n_expert > 0 ? n_expert * n_embd : 0);
  if (n_ff_shared > 0) ffn += 3 * n_embd * n_ff_shared + n_embd;
  int64_t per_layer = attn + ffn + 2 * n_embd;
  return n_layer * per_layer + n_vocab * n_embd * (tied_embeddings ? 1 : 2) + n_embd;
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
    s += strfmt("  %-15s %s %lld/%lld/%lld/%lld/%lld/%lld/%lld", p.name.c_str(), p.arch.c_str(), (long long)p.n_vocab,
                (long long)p.n_embd, (long long)p.n_layer, (long long)p.n_head, (long long)p.n_kv_head,
                (long long)p.n_ff, (long long)p.n_ctx);
    if (p.n_expert > 0) s += strfmt(", %lld experts top-%lld", (long long)p.n_expert, (long long)p.n_expert_used);
    if (p.n_ff_shared > 0) s += strfmt(", shared expert %lld", (long long)p.n_ff_shared);
    s += strfmt(", %.1fM params: %s\n", p.parameter_count() / 1e6, p.description.c_str());
  }
  return s;
}

}  // namespace parallm
