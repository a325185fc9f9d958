// GGUF metadata -> ModelConfig (see gguf_config.h): llama.cpp's "<arch>.*"
// keys, and the few facts a GGUF file states only by which tensors it holds.
#include "config/gguf_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

// Gemma's keys, and what llama.cpp fixes per architecture instead of storing.
void read_gemma(const GgufFile& g, const std::string& p, ModelConfig* c) {
  const bool gemma2 = c->arch == Architecture::kGemma2;
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->sliding_window = g.get_int_opt(p + "attention.sliding_window").value_or(gemma2 ? 4096 : 512);
  c->set_sliding_pattern(g.get_int_opt(p + "attention.sliding_window_pattern").value_or(gemma2 ? 2 : 6));
  if (gemma2) {
    c->attn_softcap = static_cast<float>(g.get_float_opt(p + "attn_logit_softcapping").value_or(50.0));
    c->final_softcap = static_cast<float>(g.get_float_opt(p + "final_logit_softcapping").value_or(30.0));
  } else {
    c->final_softcap = static_cast<float>(g.get_float_opt(p + "final_logit_softcapping").value_or(0.0));
    c->rope_theta_swa = 10000.0f;  // llama.cpp: Gemma 3's local layers, unscaled
  }
  // NOTE: GGUF keeps no query_pre_attn_scalar; llama.cpp scales by
  // 1/sqrt(n_embd / n_head) for the 27B models (46 and 62 layers), whose
  // heads are narrower than head_dim would say, and by 1/sqrt(head_dim) else.
  const int64_t head_dim = c->head_dim > 0 ? c->head_dim : c->n_embd / c->n_head;
  const bool is_27b = c->n_layer == (gemma2 ? 46 : 62);
  c->attn_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c->n_embd / c->n_head : head_dim));
}

// DeepSeek-V2/V3's latent attention: llama.cpp writes the key head
// (nope + rope) as key_length, the value head as value_length and the rope
// part as rope.dimension_count.
void read_mla(const GgufFile& g, const std::string& p, ModelConfig* c) {
  c->q_lora_rank = g.get_int_opt(p + "attention.q_lora_rank").value_or(0);
  c->kv_lora_rank = g.get_int(p + "attention.kv_lora_rank");
  c->head_dim = g.get_int(p + "attention.key_length");
  c->v_head_dim = g.get_int(p + "attention.value_length");
  c->qk_rope_dim = g.get_int(p + "rope.dimension_count");
  c->qk_nope_dim = c->head_dim - c->qk_rope_dim;
}

void read_keys(const GgufFile& g, ModelConfig* c);

void read_config(const GgufFile& g, ModelConfig* c) {
  std::string arch = g.get_string("general.architecture");
  try {
    c->arch = parse_architecture(arch);
    apply_architecture_defaults(c);
  } catch (const InputError& e) {
    apply_architecture_defaults(c);  // described as a Llama-family model
    c->unsupported.push_back(e.what());
  }
  c->arch_name = arch;  // the prefix of its metadata keys
  try {
    read_keys(g, c);
  } catch (const InputError&) {
    // An architecture parallm does not know, whose keys do not read as a
    // Llama-family model's either: the architecture is the message.
    if (!c->unsupported.empty() && c->unsupported.front().rfind("unsupported architecture", 0) == 0) {
      throw InputError("GGUF '" + g.path() + "': " + c->unsupported.front());
    }
    throw;
  }
}

// The "<arch>.*" keys of a described architecture.
void read_keys(const GgufFile& g, ModelConfig* c) {
  const std::string arch = c->arch_name;
  const std::string p = arch + ".";
  c->n_embd = g.get_int(p + "embedding_length");
  c->n_layer = g.get_int(p + "block_count");
  c->n_head = g.get_int(p + "attention.head_count");
  c->n_kv_head = g.get_int_opt(p + "attention.head_count_kv").value_or(c->n_head);
  c->head_dim = g.get_int_opt(p + "attention.key_length").value_or(0);
  if (c->arch == Architecture::kDeepseek2) {
    read_mla(g, p, c);
  } else if (auto v = g.get_int_opt(p + "attention.value_length"); v && c->head_dim != 0 && *v != c->head_dim) {
    c->unsupported.push_back("value heads of " + std::to_string(*v) + " differ from key heads of " +
                             std::to_string(c->head_dim) + " (not supported)");
  }
  c->n_ctx_train = g.get_int_opt(p + "context_length").value_or(2048);
  c->rms_eps = static_cast<float>(g.get_float_opt(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c->rope_theta = static_cast<float>(g.get_float_opt(p + "rope.freq_base").value_or(10000.0));
  c->n_expert = g.get_int_opt(p + "expert_count").value_or(0);
  c->n_expert_used = g.get_int_opt(p + "expert_used_count").value_or(0);
  // MoE files name the experts' width apart from the dense one (which a
  // Qwen-MoE file still writes, unused when every layer is sparse).
  const std::optional<int64_t> expert_ff = g.get_int_opt(p + "expert_feed_forward_length");
  c->n_ff = c->n_expert > 0 && expert_ff ? *expert_ff : g.get_int(p + "feed_forward_length");
  if (c->n_expert > 0 && expert_ff) c->n_ff_dense = g.get_int_opt(p + "feed_forward_length").value_or(0);
  c->n_ff_shared = g.get_int_opt(p + "expert_shared_feed_forward_length").value_or(0);
  if (c->arch == Architecture::kQwen2Moe && c->n_ff_shared == 0) {
    throw InputError("GGUF '" + g.path() + "': qwen2moe lacks " + p + "expert_shared_feed_forward_length");
  }
  if (c->n_ff_shared > 0) c->n_expert_shared = 1;
  if (auto norm = g.get_bool_opt(p + "expert_weights_norm")) c->norm_topk_prob = *norm;
  if (auto lead = g.get_int_opt(p + "leading_dense_block_count"); lead && *lead != 0) {
    if (c->n_expert == 0) throw InputError("GGUF '" + g.path() + "': leading dense layers in a dense model");
    c->n_dense_lead = *lead;
    c->n_ff_dense = g.get_int(p + "feed_forward_length");
  }
  if (auto shared = g.get_int_opt(p + "expert_shared_count"); shared && *shared > 0) {
    c->n_expert_shared = *shared;
    c->n_ff_shared = *shared * c->n_ff;  // DeepSeek: n shared experts of the experts' width, as one FFN
  }
  if (auto scale = g.get_float_opt(p + "expert_weights_scale")) c->routed_scale = static_cast<float>(*scale);
  if (auto func = g.get_int_opt(p + "expert_gating_func")) {
    // llama.cpp: 1 softmax, 2 sigmoid.
    if (*func != 1 && *func != 2) {
      c->unsupported.push_back("expert_gating_func " + std::to_string(*func) +
                               " is not supported (1 softmax, 2 sigmoid)");
    }
    c->router_scoring = *func == 2 ? RouterScoring::kSigmoid : RouterScoring::kSoftmax;
  }
  c->n_expert_groups = g.get_int_opt(p + "expert_group_count").value_or(1);
  c->n_expert_groups_used = g.get_int_opt(p + "expert_group_used_count").value_or(1);
  if (c->arch == Architecture::kGemma2 || c->arch == Architecture::kGemma3) read_gemma(g, p, c);
  if (c->arch == Architecture::kPhi3 && g.get_int_opt(p + "attention.sliding_window").value_or(0) > 0) {
    log_warn("GGUF '" + g.path() + "': Phi-3's sliding window is not applied (full attention, as llama.cpp runs it)");
  }
  if (auto type = g.get_string_opt(p + "rope.scaling.type")) {
    if (*type == "linear") {
      c->rope_scaling = RopeScaling::kLinear;
    } else if (*type == "llama3") {
      c->rope_scaling = RopeScaling::kLlama3;
    } else if (*type == "yarn") {
      // llama.cpp keeps YaRN's mscale_all_dim as yarn_log_multiplier = 0.1 m;
      // with mscale equal to it (DeepSeek's files), cos / sin stay unscaled.
      if (c->arch != Architecture::kDeepseek2)
        c->unsupported.push_back("rope scaling yarn is supported for deepseek2 only");
      c->rope_scaling = RopeScaling::kYarn;
      const double mul = g.get_float_opt(p + "rope.scaling.yarn_log_multiplier").value_or(0.0);
      c->yarn_mscale = c->yarn_mscale_all_dim = static_cast<float>(mul / 0.1);
      c->yarn_beta_fast = static_cast<float>(g.get_float_opt(p + "rope.scaling.yarn_beta_fast").value_or(32.0));
      c->yarn_beta_slow = static_cast<float>(g.get_float_opt(p + "rope.scaling.yarn_beta_slow").value_or(1.0));
    } else if (*type == "longrope" || *type == "su") {
      c->rope_scaling = RopeScaling::kLongRope;  // the factors are tensors (read_longrope)
    } else if (*type != "none") {
      c->unsupported.push_back("unsupported rope scaling type '" + *type +
                               "' (supported: none, linear, llama3, longrope, yarn)");
    }
    c->rope_factor = static_cast<float>(g.get_float_opt(p + "rope.scaling.factor").value_or(1.0));
    c->rope_original_ctx = g.get_int_opt(p + "rope.scaling.original_context_length").value_or(8192);
    c->rope_low_freq_factor = static_cast<float>(g.get_float_opt(p + "rope.scaling.low_freq_factor").value_or(1.0));
    c->rope_high_freq_factor = static_cast<float>(g.get_float_opt(p + "rope.scaling.high_freq_factor").value_or(4.0));
  }
}

// Phi-3's LongRoPE: llama.cpp's converter stores the long and short factors
// as f32 tensors and the original context and cos / sin factor as keys.
void read_longrope(const GgufFile& g, ModelConfig* c) {
  const GgufTensorInfo* lf = g.find_tensor("rope_factors_long.weight");
  const GgufTensorInfo* sf = g.find_tensor("rope_factors_short.weight");
  if (lf == nullptr && sf == nullptr) {
    if (c->rope_scaling == RopeScaling::kLongRope) {
      throw InputError("GGUF '" + g.path() + "': longrope scaling without rope_factors_long / _short tensors");
    }
    return;
  }
  auto factors = [&](const GgufTensorInfo* t, const char* name) {
    constexpr uint32_t kGgmlF32 = 0;
    if (t == nullptr || t->ggml_type != kGgmlF32 || t->ne.size() != 1 ||
        t->nbytes != static_cast<size_t>(t->ne[0]) * 4) {
      throw InputError("GGUF '" + g.path() +
                       "': LongRoPE needs both rope_factors_long and rope_factors_short as f32 vectors; " + name +
                       " is missing or not one");
    }
    std::vector<float> v(static_cast<size_t>(t->ne[0]));
    std::memcpy(v.data(), g.tensor_data(*t), v.size() * 4);
    return v;
  };
  c->rope_long_factors = factors(lf, "rope_factors_long.weight");
  c->rope_short_factors = factors(sf, "rope_factors_short.weight");
  c->rope_scaling = RopeScaling::kLongRope;
  const std::string p = c->arch_name + ".";
  c->rope_original_ctx = g.get_int_opt(p + "rope.scaling.original_context_length").value_or(c->n_ctx_train);
  c->rope_attn_factor = static_cast<float>(g.get_float_opt(p + "rope.scaling.attn_factor")
                                               .value_or(longrope_attn_factor(c->n_ctx_train, c->rope_original_ctx)));
}

}  // namespace

ModelConfig read_gguf_config(const GgufFile& g) {
  ModelConfig c;
  read_config(g, &c);
  const GgufTensorInfo* embd = g.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->ne.size() != 2) {
    throw InputError("GGUF '" + g.path() + "': token_embd.weight is missing or not a matrix");
  }
  c.n_vocab = g.get_int_opt(c.arch_name + ".vocab_size").value_or(embd->ne[1]);
  c.tied_embeddings = g.find_tensor("output.weight") == nullptr;
  // What only the tensors say: q/k/v biases and q/k norms outside the
  // architectures that always have them, and DeepSeek-V3's choice bias.
  c.qkv_bias = c.qkv_bias || g.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = c.qk_norm || g.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  c.router_bias = g.find_tensor("blk." + std::to_string(c.n_dense_lead) + ".exp_probs_b.bias") != nullptr;
  read_longrope(g, &c);
  c.finalize();
  return c;
}

}  // namespace parallm
