// Parsing of Hugging Face config.json (see hf_config.h).
#include "loader/hf_config.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {

namespace {

using nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const { throw InputError(source_ + ": " + what); }

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

}  // namespace

ModelConfig parse_hf_config(const std::string& json_text, const std::string& source) {
  JsonError error;
  const std::optional<json> parsed = try_parse_json<json>(json_text, JsonLimits{kFileJsonDepth}, &error);
  if (!parsed || !parsed->is_object()) {
    throw InputError(source + " is not a JSON object" + (parsed ? std::string() : " (" + error.message + ")"));
  }
  const json& j = *parsed;
  ConfigReader r(j, source);

  std::string type;
  if (auto t = r.get_string("model_type")) {
    type = *t;
  } else if (const json* a = r.find(j, "architectures");
             a != nullptr && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    type = (*a)[0].get<std::string>();
  } else {
    r.fail("has neither model_type nor architectures");
  }

  ModelConfig c;
  c.arch = parse_architecture(type);  // throws listing the supported ones
  apply_architecture_defaults(&c);
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
  c.tied_embeddings = r.get_bool("tie_word_embeddings", false);
  c.rope_style = RopeStyle::kHalf;
  if (qwen_moe) {
    // Qwen-MoE: every layer sparse, experts of moe_intermediate_size; the
    // dense intermediate_size only serves mlp_only_layers.
    c.n_expert = r.get_int("num_experts", std::nullopt);
    c.n_expert_used = r.get_int("num_experts_per_tok", std::nullopt);
    c.n_ff = r.get_int("moe_intermediate_size", std::nullopt);
    // transformers' Qwen2Moe/Qwen3Moe configs default it to false.
    c.norm_topk_prob = r.get_bool("norm_topk_prob", false);
    if (c.arch == Architecture::kQwen2Moe) c.n_ff_shared = r.get_int("shared_expert_intermediate_size", std::nullopt);
    if (r.get_int("decoder_sparse_step", 1) != 1) r.fail("decoder_sparse_step other than 1 is not supported");
    if (const json* dense = r.find(j, "mlp_only_layers"); dense && !(dense->is_array() && dense->empty())) {
      r.fail("mlp_only_layers (dense layers among the sparse ones) is not supported");
    }
  } else {
    c.n_expert = r.get_int("num_local_experts", 0);
    c.n_expert_used = c.n_expert > 0 ? r.get_int("num_experts_per_tok", 2) : 0;
  }

  if (auto act = r.get_string("hidden_act"); act && *act != "silu") {
    r.fail("hidden_act '" + *act + "' is not supported (the Llama and Qwen families use silu)");
  }
  const bool bias_fixed = c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen2Moe;
  if (!bias_fixed && (r.get_bool("attention_bias", false) || r.get_bool("mlp_bias", false))) {
    r.fail("attention_bias / mlp_bias are not supported for " + std::string(architecture_name(c.arch)) + " models");
  }
  if (r.get_bool("use_sliding_window", false)) r.fail("use_sliding_window is not supported (full attention only)");
  if (const json* rs = r.find(j, "rope_scaling")) {
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
    } else if (rtype != "default") {
      r.fail("rope_scaling type '" + rtype + "' is not supported (supported: linear, llama3)");
    }
  }
  try {
    c.finalize();
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
  return c;
}

}  // namespace parallm
