#include "config/model_config.h"

#include <cmath>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {
constexpr const char* kSupported =
    "supported: llama (Llama 2/3, Mistral, Mixtral-style MoE), mistral, mixtral, qwen2, qwen3, qwen2moe, qwen3moe";
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
  }
  return "llama";
}

void apply_architecture_defaults(ModelConfig* c) {
  c->arch_name = architecture_name(c->arch);
  const bool qwen = c->arch != Architecture::kLlama;
  // NOTE: llama.cpp's llama arch stores q/k permuted for interleaved-pair
  // RoPE; the Qwen families keep Hugging Face's rotate-half layout ("neox").
  c->rope_style = qwen ? RopeStyle::kHalf : RopeStyle::kInterleaved;
  c->qkv_bias = c->arch == Architecture::kQwen2 || c->arch == Architecture::kQwen2Moe;
  c->qk_norm = c->arch == Architecture::kQwen3 || c->arch == Architecture::kQwen3Moe;
  c->norm_topk_prob = c->arch != Architecture::kQwen2Moe;
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
}

std::vector<float> ModelConfig::rope_inv_freq() const {
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double f = std::pow(static_cast<double>(rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (rope_scaling == RopeScaling::kLinear) {
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

std::string ModelConfig::summary() const {
  std::string s = strfmt("%s: vocab %lld, dim %lld, layers %lld, heads %lld/%lld (head_dim %lld), ffn %lld",
                         arch_name.c_str(), (long long)n_vocab, (long long)n_embd, (long long)n_layer,
                         (long long)n_head, (long long)n_kv_head, (long long)head_dim, (long long)n_ff);
  if (n_expert > 0) s += strfmt(", experts %lld (top-%lld)", (long long)n_expert, (long long)n_expert_used);
  if (n_ff_shared > 0) s += strfmt(", shared expert %lld", (long long)n_ff_shared);
  if (n_expert > 0 && !norm_topk_prob) s += ", top-k weights unnormalized";
  if (qkv_bias) s += ", qkv bias";
  if (qk_norm) s += ", q/k norm";
  if (tied_embeddings) s += ", tied embeddings";
  return s;
}

}  // namespace parallm
