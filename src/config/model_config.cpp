#include "config/model_config.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {
constexpr const char* kSupported =
    "supported: llama (Llama 2/3, Mistral, Mixtral-style MoE), mistral, mixtral, qwen2, qwen3, qwen2moe, qwen3moe, "
    "gemma2, gemma3 (text), phi3, deepseek2 (DeepSeek-V2 / V3)";
}

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kQwen2Moe:
      return "qwen2moe";
    case Architecture::kQwen3Moe:
      return "qwen3moe";
    case Architecture::kGemma2:
      return "gemma2";
    case Architecture::kGemma3:
      return "gemma3";
    case Architecture::kPhi3:
      return "phi3";
    case Architecture::kDeepseek2:
      return "deepseek2";
  }
  return "llama";
}

void apply_architecture_defaults(ModelConfig* c) {
  c->arch_name = architecture_name(c->arch);
  // NOTE: llama.cpp's llama arch stores q/k permuted for interleaved-pair
  // RoPE; the Qwen, Gemma and Phi families keep Hugging Face's rotate-half
  // layout ("neox"); DeepSeek's own code rotates interleaved pairs.
  const bool pairs = c->arch == Architecture::kLlama || c->arch == Architecture::kDeepseek2;
  c->rope_style = pairs ? RopeStyle::kInterleaved : RopeStyle::kHalf;
  c->qkv_bias = c->arch == Architecture::kQwen2 || c->arch == Architecture::kQwen2Moe;
  c->qk_norm =
      c->arch == Architecture::kQwen3 || c->arch == Architecture::kQwen3Moe || c->arch == Architecture::kGemma3;
  c->norm_topk_prob = c->arch != Architecture::kQwen2Moe && c->arch != Architecture::kDeepseek2;
  c->shared_expert_gated = c->arch == Architecture::kQwen2Moe;
  const bool gemma = c->arch == Architecture::kGemma2 || c->arch == Architecture::kGemma3;
  c->ffn_act = gemma ? FfnActivation::kGeluTanh : FfnActivation::kSilu;
  c->post_norms = gemma;
  c->tied_embeddings = gemma;
  c->fused_qkv = c->fused_gate_up = c->arch == Architecture::kPhi3;
}

float longrope_attn_factor(int64_t n_ctx, int64_t original_ctx) {
  if (original_ctx <= 1 || n_ctx <= original_ctx) return 1.0f;
  const double scale = static_cast<double>(n_ctx) / static_cast<double>(original_ctx);
  return static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(original_ctx))));
}

namespace {
float yarn_mscale_of(float factor, float m) { return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f; }
}  // namespace

float ModelConfig::query_scale() const {
  float s = attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  if (rope_scaling == RopeScaling::kYarn && yarn_mscale_all_dim > 0.0f) {
    const float m = yarn_mscale_of(rope_factor, yarn_mscale_all_dim);
    s *= m * m;
  }
  return s;
}

float ModelConfig::rope_cos_sin_scale() const {
  if (rope_scaling == RopeScaling::kYarn) {
    return yarn_mscale_of(rope_factor, yarn_mscale) / yarn_mscale_of(rope_factor, yarn_mscale_all_dim);
  }
  if (rope_scaling == RopeScaling::kLongRope) return rope_attn_factor;
  return 1.0f;
}

void ModelConfig::set_sliding_pattern(int64_t pattern) {
  sliding_layers.clear();
  if (pattern <= 0) return;
  for (int64_t l = 0; l < n_layer; ++l) sliding_layers.push_back(l % pattern < pattern - 1 ? 1 : 0);
}

Architecture parse_architecture(const std::string& name) {
  if (name == "llama" || name == "mistral" || name == "mixtral" || name == "LlamaForCausalLM" ||
      name == "MistralForCausalLM" || name == "MixtralForCausalLM") {
    return Architecture::kLlama;
  }
  if (name == "qwen2" || name == "Qwen2ForCausalLM") return Architecture::kQwen2;
  if (name == "qwen3" || name == "Qwen3ForCausalLM") return Architecture::kQwen3;
  if (name == "qwen2moe" || name == "qwen2_moe" || name == "Qwen2MoeForCausalLM") return Architecture::kQwen2Moe;
  if (name == "qwen3moe" || name == "qwen3_moe" || name == "Qwen3MoeForCausalLM") return Architecture::kQwen3Moe;
  if (name == "gemma2" || name == "Gemma2ForCausalLM") return Architecture::kGemma2;
  if (name == "phi3" || name == "Phi3ForCausalLM") return Architecture::kPhi3;
  if (name == "deepseek2" || name == "deepseek_v2" || name == "deepseek_v3" || name == "DeepseekV2ForCausalLM" ||
      name == "DeepseekV3ForCausalLM") {
    return Architecture::kDeepseek2;
  }
  if (name == "gemma3" || name == "gemma3_text" || name == "Gemma3ForCausalLM") return Architecture::kGemma3;
  throw InputError("unsupported architecture '" + name + "' (" + kSupported + ")");
}

void ModelConfig::finalize() {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw InputError("invalid model config: " + what);
  };
  need(n_vocab > 0 && n_vocab < (1 << 24), "vocabulary size " + std::to_string(n_vocab));
  need(n_embd > 0 && n_embd <= (1 << 17), "embedding width " + std::to_string(n_embd));
  need(n_layer > 0 && n_layer <= 1024, "layer count " + std::to_string(n_layer));
  need(n_head > 0 && n_head <= 4096, "head count " + std::to_string(n_head));
  if (n_kv_head == 0) n_kv_head = n_head;
  need(n_kv_head > 0 && n_head % n_kv_head == 0,
       strfmt("n_head %lld is not a multiple of n_kv_head %lld", (long long)n_head, (long long)n_kv_head));
  if (head_dim == 0) {
    need(n_embd % n_head == 0, "n_embd is not a multiple of n_head");
    head_dim = n_embd / n_head;
  }
  need(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 1024, "head dimension " + std::to_string(head_dim));
  need(n_ff > 0 && n_ff <= (1 << 20), "FFN width " + std::to_string(n_ff));
  need(n_expert >= 0 && n_expert <= 1024, "expert count");
  if (n_expert > 0) {
    need(n_expert_used > 0 && n_expert_used <= n_expert, "experts used per token must be in 1..n_expert");
  }
  need(n_ff_shared >= 0 && n_ff_shared <= (1 << 20), "shared expert FFN width " + std::to_string(n_ff_shared));
  need(n_ff_shared == 0 || n_expert > 0, "a shared expert needs routed experts");
  const bool moe_arch = arch == Architecture::kQwen2Moe || arch == Architecture::kQwen3Moe;
  need(!moe_arch || n_expert > 0, std::string(architecture_name(arch)) + " needs an expert count");
  if (n_ctx_train <= 0) n_ctx_train = 2048;
  need(rms_eps > 0 && rms_eps < 1, "rms_norm_eps");
  need(rope_theta > 0, "rope theta");
  need(rope_factor > 0, "rope scaling factor");
  if (kv_lora_rank > 0) {
    need(qk_rope_dim > 0 && qk_rope_dim % 2 == 0 && qk_nope_dim > 0 && v_head_dim > 0,
         "MLA needs positive qk_nope_head_dim, v_head_dim and an even qk_rope_head_dim");
    need(head_dim == qk_nope_dim + qk_rope_dim, "MLA's key head is qk_nope_head_dim + qk_rope_head_dim");
    need(q_lora_rank >= 0 && kv_lora_rank <= (1 << 16) && q_lora_rank <= (1 << 16), "MLA ranks");
  }
  need(n_dense_lead >= 0 && n_dense_lead <= n_layer, "leading dense layer count");
  need(n_dense_lead == 0 || (n_ff_dense > 0 && n_ff_dense <= (1 << 20)), "the leading dense layers' FFN width");
  need(n_expert_groups >= 1 && n_expert_groups_used >= 1 && n_expert_groups_used <= n_expert_groups &&
           (n_expert == 0 || n_expert % n_expert_groups == 0),
       "expert groups: n_group must divide the experts and topk_group be in 1..n_group");
  need(n_expert == 0 || n_expert_used <= n_expert_groups_used * (n_expert / n_expert_groups),
       "top-k exceeds the experts in the groups used");
  need(routed_scale > 0, "routed_scaling_factor");
  if (rope_scaling == RopeScaling::kLongRope) {
    const size_t half = static_cast<size_t>(head_dim / 2);
    need(rope_long_factors.size() == half && rope_short_factors.size() == half,
         strfmt("longrope needs %zu long and short factors, has %zu and %zu", half, rope_long_factors.size(),
                rope_short_factors.size()));
    for (size_t i = 0; i < half; ++i) {
      need(rope_long_factors[i] > 0 && rope_short_factors[i] > 0, "longrope factors must be positive");
    }
    need(rope_original_ctx > 0 && rope_attn_factor > 0, "longrope needs a positive original context and attn factor");
  }
  need(sliding_layers.empty() || static_cast<int64_t>(sliding_layers.size()) == n_layer,
       "the sliding-window layer list has " + std::to_string(sliding_layers.size()) + " entries for " +
           std::to_string(n_layer) + " layers");
  bool any_sliding = false;
  for (uint8_t s : sliding_layers) any_sliding = any_sliding || s != 0;
  need(!any_sliding || sliding_window > 0, "sliding-window layers need a positive sliding_window");
  need(attn_softcap >= 0 && final_softcap >= 0 && attn_scale >= 0 && embd_scale >= 0 && rope_theta_swa >= 0,
       "negative soft-cap, attention scale, embedding scale or RoPE base");
}

namespace {
// RoPE's unscaled inverse frequency of pair i of dim rotated values.
double base_inv_freq(float theta, int64_t i, int64_t dim) {
  return std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(dim));
}
}  // namespace

std::vector<float> ModelConfig::rope_inv_freq_swa() const {
  if (rope_theta_swa <= 0.0f) return rope_inv_freq();
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i)
    inv[static_cast<size_t>(i)] = static_cast<float>(base_inv_freq(rope_theta_swa, i, head_dim));
  return inv;
}

std::vector<float> ModelConfig::rope_inv_freq(int64_t n_ctx) const {
  const int64_t dim = rope_dim();
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  // YaRN: frequencies below the band are interpolated (divided by the
  // factor), above it kept, and blended linearly across it; the band's ends
  // are the dimensions whose wavelength fits beta_fast / beta_slow turns in
  // the original context (transformers' find_correction_range).
  double yarn_lo = 0, yarn_hi = 0;
  if (rope_scaling == RopeScaling::kYarn) {
    const double pi = 3.14159265358979323846;
    auto dim_of = [&](double turns) {
      return dim * std::log(rope_original_ctx / (turns * 2 * pi)) / (2 * std::log(static_cast<double>(rope_theta)));
    };
    yarn_lo = std::max(0.0, std::floor(dim_of(yarn_beta_fast)));
    yarn_hi = std::min(static_cast<double>(dim - 1), std::ceil(dim_of(yarn_beta_slow)));
    if (yarn_hi == yarn_lo) yarn_hi += 0.001;
  }
  // llama.cpp's choice: the long factors once the context exceeds the
  // original one (transformers switches per sequence length instead).
  const std::vector<float>& longrope = n_ctx > rope_original_ctx ? rope_long_factors : rope_short_factors;
  for (int64_t i = 0; i < dim / 2; ++i) {
    double f = base_inv_freq(rope_theta, i, dim);
    if (rope_scaling == RopeScaling::kYarn) {
      const double ramp = std::clamp((static_cast<double>(i) - yarn_lo) / (yarn_hi - yarn_lo), 0.0, 1.0);
      const double keep = 1.0 - ramp;  // 1 below the band's start: the original frequency
      f = f / rope_factor * (1.0 - keep) + f * keep;
    } else if (rope_scaling == RopeScaling::kLongRope) {
      f /= longrope[static_cast<size_t>(i)];
    } else if (rope_scaling == RopeScaling::kLinear) {
      f /= rope_factor;
    } else if (rope_scaling == RopeScaling::kLlama3) {
      // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept,
      // and the band in between interpolated smoothly.
      const double pi = 3.14159265358979323846;
      double wavelen = 2.0 * pi / f;
      double low_wavelen = rope_original_ctx / rope_low_freq_factor;
      double high_wavelen = rope_original_ctx / rope_high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= rope_factor;
      } else if (wavelen >= high_wavelen) {
        double smooth =
            (rope_original_ctx / wavelen - rope_low_freq_factor) / (rope_high_freq_factor - rope_low_freq_factor);
        f = (1.0 - smooth) * f / rope_factor + smooth * f;
      }
    }
    inv[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return inv;
}

void ModelConfig::require_supported(const std::string& source) const {
  if (unsupported.empty()) return;
  std::string msg = source + ": " + unsupported.front();
  if (unsupported.size() > 1) {
    msg += strfmt(" (and %zu more: ", unsupported.size() - 1);
    for (size_t i = 1; i < unsupported.size(); ++i) msg += (i > 1 ? "; " : "") + unsupported[i];
    msg += ")";
  }
  throw InputError(msg);
}

std::string ModelConfig::summary() const {
  std::string s = strfmt("%s: vocab %lld, dim %lld, layers %lld, heads %lld/%lld (head_dim %lld), ffn %lld",
                         arch_name.c_str(), (long long)n_vocab, (long long)n_embd, (long long)n_layer,
                         (long long)n_head, (long long)n_kv_head, (long long)head_dim, (long long)n_ff);
  if (n_expert > 0) s += strfmt(", experts %lld (top-%lld)", (long long)n_expert, (long long)n_expert_used);
  if (n_ff_shared > 0) s += strfmt(", shared expert %lld", (long long)n_ff_shared);
  if (n_expert > 0 && !norm_topk_prob) s += ", top-k weights unnormalized";
  if (qkv_bias) s += ", qkv bias";
  if (qk_norm) s += ", q/k norm";
  if (ffn_act == FfnActivation::kGeluTanh) s += ", GeGLU";
  if (post_norms) s += ", post-norms";
  if (attn_softcap > 0) s += strfmt(", attention soft-cap %g", attn_softcap);
  if (final_softcap > 0) s += strfmt(", logit soft-cap %g", final_softcap);
  if (!sliding_layers.empty() && sliding_window > 0) {
    int64_t n = 0;
    for (uint8_t v : sliding_layers) n += v;
    s += strfmt(", sliding window %lld on %lld of %lld layers", (long long)sliding_window, (long long)n,
                (long long)n_layer);
  }
  if (tied_embeddings) s += ", tied embeddings";
  return s;
}

}  // namespace parallm
