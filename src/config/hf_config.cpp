// Reading of Hugging Face config.json (see hf_config.h). Malformed input
// (bad JSON, a missing or mistyped field) throws here; a well-formed field
// asking for what the engine cannot run is recorded in `unsupported` by
// ConfigReader::unsupported and refused by parse_hf_config.
#include "config/hf_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "util/check.h"
#include "util/json_parse.h"
#include "util/log.h"

namespace parallm {

namespace {

using nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const { throw InputError(source_ + ": " + what); }
  // A feature the engine does not run: kept by name in the description.
  void unsupported(ModelConfig* c, const std::string& what) const { c->unsupported.push_back(what); }

  const json* find(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t get_int(const std::string& key, std::optional<int64_t> fallback, const json* obj = nullptr) const {
    const json* v = find(obj ? *obj : j_, key);
    if (v == nullptr) {
      if (!fallback) fail("lacks the field '" + key + "'");
      return *fallback;
    }
    if (!v->is_number_integer()) fail("field '" + key + "' is not an integer");
    return v->get<int64_t>();
  }
  double get_number(const std::string& key, double fallback, const json* obj = nullptr) const {
    const json* v = find(obj ? *obj : j_, key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail("field '" + key + "' is not a number");
    return v->get<double>();
  }
  bool get_bool(const std::string& key, bool fallback) const {
    const json* v = find(j_, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail("field '" + key + "' is not a boolean");
    return v->get<bool>();
  }
  std::optional<std::string> get_string(const std::string& key, const json* obj = nullptr) const {
    const json* v = find(obj ? *obj : j_, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) fail("field '" + key + "' is not a string");
    return v->get<std::string>();
  }

 private:
  const json& j_;
  const std::string& source_;
};

// DeepSeek-V2 / V3 (transformers' DeepseekV2Config / DeepseekV3Config):
// latent attention, routed and shared experts after dense layers.
void read_deepseek(const ConfigReader& r, const json& j, bool v3, ModelConfig* c) {
  const json* q_lora = r.find(j, "q_lora_rank");
  c->q_lora_rank = q_lora == nullptr ? 0 : r.get_int("q_lora_rank", 0);
  c->kv_lora_rank = r.get_int("kv_lora_rank", std::nullopt);
  c->qk_nope_dim = r.get_int("qk_nope_head_dim", std::nullopt);
  c->qk_rope_dim = r.get_int("qk_rope_head_dim", std::nullopt);
  c->v_head_dim = r.get_int("v_head_dim", std::nullopt);
  c->head_dim = c->qk_nope_dim + c->qk_rope_dim;
  c->n_expert = r.get_int("n_routed_experts", 0);
  if (c->n_expert == 0) return;  // a dense DeepSeek
  c->n_expert_used = r.get_int("num_experts_per_tok", std::nullopt);
  c->n_ff_dense = c->n_ff;  // intermediate_size: the dense layers'
  c->n_ff = r.get_int("moe_intermediate_size", std::nullopt);
  c->n_dense_lead = r.get_int("first_k_dense_replace", 0);
  if (r.get_int("moe_layer_freq", 1) != 1) r.unsupported(c, "moe_layer_freq other than 1 is not supported");
  c->n_expert_shared = r.get_int("n_shared_experts", 0);
  c->n_ff_shared = c->n_expert_shared * c->n_ff;
  c->routed_scale = static_cast<float>(r.get_number("routed_scaling_factor", 1.0));
  // DeepseekV3Config has no scoring_func / topk_method: V3 always routes by
  // sigmoid with the choice bias (noaux_tc) and renormalizes its top-k.
  c->norm_topk_prob = r.get_bool("norm_topk_prob", v3);
  const std::string scoring = r.get_string("scoring_func").value_or(v3 ? "sigmoid" : "softmax");
  if (scoring != "softmax" && scoring != "sigmoid") {
    r.unsupported(c, "scoring_func '" + scoring + "' is not supported (softmax, sigmoid)");
  }
  c->router_scoring = scoring == "sigmoid" ? RouterScoring::kSigmoid : RouterScoring::kSoftmax;
  const std::string method = r.get_string("topk_method").value_or(v3 ? "noaux_tc" : "greedy");
  if (method == "group_limited_greedy" || method == "noaux_tc") {
    c->n_expert_groups = r.get_int("n_group", 1);
    c->n_expert_groups_used = r.get_int("topk_group", 1);
  } else if (method != "greedy") {
    r.unsupported(c, "topk_method '" + method + "' is not supported (greedy, group_limited_greedy, noaux_tc)");
  }
  // noaux_tc chooses with e_score_correction_bias, one per expert and layer.
  c->router_bias = method == "noaux_tc";
}

// Gemma 2 / Gemma 3 text fields (transformers' Gemma2Config, Gemma3TextConfig).
void read_gemma(const ConfigReader& r, const json& j, ModelConfig* c) {
  const bool gemma2 = c->arch == Architecture::kGemma2;
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    if (auto act = r.get_string(key); act && *act != "gelu_pytorch_tanh" && *act != "gelu_tanh") {
      r.unsupported(c, std::string(key) + " '" + *act + "' is not supported (Gemma uses gelu_pytorch_tanh)");
    }
  }
  c->tied_embeddings = r.get_bool("tie_word_embeddings", true);
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  const double head_dim =
      static_cast<double>(c->head_dim > 0 ? c->head_dim : c->n_embd / std::max<int64_t>(1, c->n_head));
  const double qpas = r.get_number("query_pre_attn_scalar", head_dim);
  if (!(qpas > 0)) r.fail("query_pre_attn_scalar must be positive");
  c->attn_scale = static_cast<float>(1.0 / std::sqrt(qpas));
  c->attn_softcap = static_cast<float>(r.get_number("attn_logit_softcapping", gemma2 ? 50.0 : 0.0));
  c->final_softcap = static_cast<float>(r.get_number("final_logit_softcapping", gemma2 ? 30.0 : 0.0));
  c->sliding_window = r.get_int("sliding_window", gemma2 ? 4096 : 512);
  if (!gemma2) c->rope_theta_swa = static_cast<float>(r.get_number("rope_local_base_freq", 10000.0));
  if (const json* types = r.find(j, "layer_types")) {
    // Newer transformers list every layer's kind.
    if (!types->is_array()) r.fail("layer_types is not a list");
    for (const json& t : *types) {
      if (!t.is_string()) r.fail("layer_types holds a non-string");
      const std::string kind = t.get<std::string>();
      if (kind != "sliding_attention" && kind != "full_attention") {
        r.unsupported(c, "layer_types entry '" + kind + "' is not supported (sliding_attention, full_attention)");
      }
      c->sliding_layers.push_back(kind == "sliding_attention" ? 1 : 0);
    }
  } else {
    c->set_sliding_pattern(gemma2 ? 2 : r.get_int("sliding_window_pattern", 6));
  }
}

// LongRoPE (Phi-3): factor lists, the original context (top level in
// Phi3Config) and the cos / sin factor, given or derived.
void read_longrope(const ConfigReader& r, const json& j, const json& rs, ModelConfig* c) {
  auto factors = [&](const char* key) {
    const json* v = r.find(rs, key);
    if (v == nullptr || !v->is_array()) r.fail(std::string("rope_scaling longrope needs the list '") + key + "'");
    std::vector<float> out;
    for (const json& x : *v) {
      if (!x.is_number()) r.fail(std::string("rope_scaling '") + key + "' holds a non-number");
      out.push_back(x.get<float>());
    }
    return out;
  };
  c->rope_scaling = RopeScaling::kLongRope;
  c->rope_long_factors = factors("long_factor");
  c->rope_short_factors = factors("short_factor");
  c->rope_original_ctx = r.get_int("original_max_position_embeddings", c->n_ctx_train, &rs);
  c->rope_original_ctx = r.get_int("original_max_position_embeddings", c->rope_original_ctx, &j);
  c->rope_attn_factor = static_cast<float>(
      r.get_number("attention_factor", longrope_attn_factor(c->n_ctx_train, c->rope_original_ctx), &rs));
}

// Every field after the architecture, into c.
void read_fields(const ConfigReader& r, const ConfigReader& top, const json& j, const std::string& type,
                 const std::string& source, ModelConfig& c) {
  const bool qwen_moe = c.arch == Architecture::kQwen2Moe || c.arch == Architecture::kQwen3Moe;
  c.n_vocab = r.get_int("vocab_size", std::nullopt);
  c.n_embd = r.get_int("hidden_size", std::nullopt);
  c.n_ff = r.get_int("intermediate_size", std::nullopt);
  c.n_layer = r.get_int("num_hidden_layers", std::nullopt);
  c.n_head = r.get_int("num_attention_heads", std::nullopt);
  c.n_kv_head = r.get_int("num_key_value_heads", c.n_head);
  c.head_dim = r.get_int("head_dim", 0);
  c.n_ctx_train = r.get_int("max_position_embeddings", 2048);
  c.rms_eps = static_cast<float>(r.get_number("rms_norm_eps", 1e-6));
  c.rope_theta = static_cast<float>(r.get_number("rope_theta", 10000.0));
  c.tied_embeddings = r.get_bool("tie_word_embeddings", top.get_bool("tie_word_embeddings", false));
  // HF keeps q / k unpermuted for rotate-half RoPE; DeepSeek's own code
  // rotates interleaved pairs (apply_architecture_defaults).
  if (c.arch != Architecture::kDeepseek2) c.rope_style = RopeStyle::kHalf;
  if (c.arch == Architecture::kDeepseek2) {
    read_deepseek(r, j, type == "deepseek_v3" || type == "DeepseekV3ForCausalLM", &c);
  } else if (qwen_moe) {
    // Qwen-MoE: every layer sparse, experts of moe_intermediate_size; the
    // dense intermediate_size only serves mlp_only_layers.
    c.n_expert = r.get_int("num_experts", std::nullopt);
    c.n_expert_used = r.get_int("num_experts_per_tok", std::nullopt);
    c.n_ff_dense = c.n_ff;
    c.n_ff = r.get_int("moe_intermediate_size", std::nullopt);
    // transformers' Qwen2Moe/Qwen3Moe configs default it to false.
    c.norm_topk_prob = r.get_bool("norm_topk_prob", false);
    if (c.arch == Architecture::kQwen2Moe) {
      c.n_ff_shared = r.get_int("shared_expert_intermediate_size", std::nullopt);
      c.n_expert_shared = 1;
    }
    if (r.get_int("decoder_sparse_step", 1) != 1) {
      r.unsupported(&c, "decoder_sparse_step other than 1 is not supported");
    }
    if (const json* dense = r.find(j, "mlp_only_layers"); dense && !(dense->is_array() && dense->empty())) {
      r.unsupported(&c, "mlp_only_layers (dense layers among the sparse ones) is not supported");
    }
  } else {
    // Mixtral's num_local_experts; other families' num_experts and
    // moe_intermediate_size (how an architecture parallm does not run is
    // still described by its shapes, for the planner).
    c.n_expert = r.get_int("num_local_experts", r.get_int("num_experts", 0));
    c.n_expert_used = c.n_expert > 0 ? r.get_int("num_experts_per_tok", 2) : 0;
    if (c.n_expert > 0 && r.find(j, "moe_intermediate_size") != nullptr) {
      c.n_ff_dense = c.n_ff;
      c.n_ff = r.get_int("moe_intermediate_size", std::nullopt);
    }
  }

  const bool gemma = c.arch == Architecture::kGemma2 || c.arch == Architecture::kGemma3;
  if (gemma) {
    read_gemma(r, j, &c);
  } else if (auto act = r.get_string("hidden_act"); act && *act != "silu") {
    r.unsupported(&c, "hidden_act '" + *act + "' is not supported (the Llama and Qwen families use silu)");
  }
  const bool bias_fixed = c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen2Moe;
  const bool attention_bias = r.get_bool("attention_bias", false);
  if (!bias_fixed && (attention_bias || r.get_bool("mlp_bias", false))) {
    r.unsupported(&c, "attention_bias / mlp_bias are not supported for " + c.arch_name + " models");
  }
  c.qkv_bias = c.qkv_bias || attention_bias;
  if (r.get_bool("use_sliding_window", false)) {
    r.unsupported(&c, "use_sliding_window is not supported (full attention only)");
  }
  if (c.arch == Architecture::kPhi3) {
    if (r.get_number("partial_rotary_factor", 1.0) != 1.0) {
      r.unsupported(&c, "partial_rotary_factor other than 1 is not supported (RoPE over the whole head only)");
    }
    if (const int64_t window = r.get_int("sliding_window", 0); window > 0 && window < c.n_ctx_train) {
      log_warn(source + ": Phi-3's sliding_window is not applied (full attention, as llama.cpp runs it)");
    }
  }
  const json* rs = r.find(j, "rope_scaling");
  if (c.arch == Architecture::kGemma2 && rs != nullptr) {
    r.unsupported(&c, "rope_scaling is not supported for gemma2");
    rs = nullptr;
  }
  if (rs != nullptr) {
    if (!rs->is_object()) r.fail("rope_scaling is not an object");
    std::string rtype = r.get_string("rope_type", rs).value_or(r.get_string("type", rs).value_or("default"));
    if (rtype == "llama3") {
      c.rope_scaling = RopeScaling::kLlama3;
      c.rope_factor = static_cast<float>(r.get_number("factor", 8.0, rs));
      c.rope_low_freq_factor = static_cast<float>(r.get_number("low_freq_factor", 1.0, rs));
      c.rope_high_freq_factor = static_cast<float>(r.get_number("high_freq_factor", 4.0, rs));
      c.rope_original_ctx = r.get_int("original_max_position_embeddings", 8192, rs);
      if (!(c.rope_high_freq_factor > c.rope_low_freq_factor) || c.rope_low_freq_factor <= 0 ||
          c.rope_original_ctx <= 0) {
        r.fail("rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor and a positive original context");
      }
    } else if (rtype == "linear") {
      c.rope_scaling = RopeScaling::kLinear;
      c.rope_factor = static_cast<float>(r.get_number("factor", 1.0, rs));
    } else if (rtype == "yarn" && c.arch != Architecture::kDeepseek2) {
      r.unsupported(&c, "rope_scaling yarn is supported for deepseek models only");
    } else if (rtype == "yarn") {
      c.rope_scaling = RopeScaling::kYarn;
      c.rope_factor = static_cast<float>(r.get_number("factor", 1.0, rs));
      c.rope_original_ctx = r.get_int("original_max_position_embeddings", 4096, rs);
      c.yarn_beta_fast = static_cast<float>(r.get_number("beta_fast", 32.0, rs));
      c.yarn_beta_slow = static_cast<float>(r.get_number("beta_slow", 1.0, rs));
      c.yarn_mscale = static_cast<float>(r.get_number("mscale", 1.0, rs));
      c.yarn_mscale_all_dim = static_cast<float>(r.get_number("mscale_all_dim", 0.0, rs));
      if (!(c.yarn_beta_fast > c.yarn_beta_slow) || c.yarn_beta_slow <= 0 || c.rope_original_ctx <= 0) {
        r.fail("rope_scaling yarn needs beta_fast > beta_slow > 0 and a positive original context");
      }
    } else if (rtype == "longrope" || rtype == "su") {
      read_longrope(r, j, *rs, &c);
    } else if (rtype != "default") {
      r.unsupported(&c,
                    "rope_scaling type '" + rtype + "' is not supported (supported: linear, llama3, longrope, yarn)");
    }
  }
}

}  // namespace

ModelConfig read_hf_config(const std::string& json_text, const std::string& source) {
  JsonError error;
  const std::optional<json> parsed = try_parse_json<json>(json_text, JsonLimits{kFileJsonDepth}, &error);
  if (!parsed || !parsed->is_object()) {
    throw InputError(source + " is not a JSON object" + (parsed ? std::string() : " (" + error.message + ")"));
  }
  const json& root = *parsed;
  // Multimodal configs (Gemma 3, Llama 4, Qwen2-VL) nest the language model.
  const auto text_it = root.find("text_config");
  const bool nested = text_it != root.end() && text_it->is_object();
  const json& j = nested ? *text_it : root;
  ConfigReader r(j, source);
  const ConfigReader top(root, source);

  std::string type;
  if (auto t = r.get_string("model_type")) {
    type = *t;
  } else if (auto rt = top.get_string("model_type")) {
    type = *rt;
  } else if (const json* a = top.find(root, "architectures");
             a != nullptr && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    type = (*a)[0].get<std::string>();
  } else {
    r.fail("has neither model_type nor architectures");
  }

  ModelConfig c;
  bool known = true;
  try {
    c.arch = parse_architecture(type);
    apply_architecture_defaults(&c);
  } catch (const InputError& e) {
    known = false;
    // Described as a Llama-family model (the planner plans it so); the
    // engine refuses it by this message.
    apply_architecture_defaults(&c);
    c.arch_name = type;
    r.unsupported(&c, e.what());
  }
  try {
    read_fields(r, top, j, type, source, c);
  } catch (const InputError&) {
    // A model_type parallm does not know, whose fields do not read as a
    // Llama-family model either: the architecture is the message.
    if (!known) throw InputError(source + ": " + c.unsupported.front());
    throw;
  }
  try {
    c.finalize();
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
  return c;
}

ModelConfig parse_hf_config(const std::string& json_text, const std::string& source) {
  ModelConfig c = read_hf_config(json_text, source);
  c.require_supported(source);
  return c;
}

}  // namespace parallm
