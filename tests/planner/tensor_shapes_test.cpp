// Exact parameter counts, weight bytes and KV bytes per token against an
// independent reference: the list of tensors each checkpoint holds, written
// out tensor by tensor from the Hugging Face model definitions
// (modeling_llama.py, modeling_qwen2.py, modeling_mixtral.py,
// modeling_qwen3_moe.py, modeling_deepseek_v3.py) with their shapes taken
// from the config.json in tests/planner/data. The planner derives its counts
// from grouped formulas (model_spec.cpp); here nothing is grouped: every
// tensor name and shape is listed and multiplied out.
//
// DeepSeek-V3: the checkpoint's layer 61 is the multi-token-prediction
// module (num_nextn_predict_layers = 1), which serving without speculative
// decoding never loads; it is excluded, as in the published 671B / 37B.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "planner/memory_model.h"
#include "planner/model_source.h"

namespace parallm::planner {
namespace {

const std::string kData = std::string(PARALLM_SOURCE_DIR) + "/tests/planner/data/";

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  bool routed_expert = false;  // one of the n_expert routed experts' weights
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

nlohmann::json config(const std::string& file) {
  std::ifstream f(kData + file);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

int64_t i(const nlohmann::json& j, const char* k) { return j.at(k).get<int64_t>(); }

using Tensors = std::vector<Tensor>;

void add(Tensors* t, const std::string& name, std::vector<int64_t> shape, bool expert = false) {
  t->push_back(Tensor{name, std::move(shape), expert});
}

// Llama / Mistral / Qwen2 / Mixtral / Qwen3-MoE decoder (GQA attention).
Tensors gqa_model(const nlohmann::json& c) {
  const std::string type = c.at("model_type");
  const int64_t E = i(c, "hidden_size"), L = i(c, "num_hidden_layers"), H = i(c, "num_attention_heads");
  const int64_t KV = i(c, "num_key_value_heads"), V = i(c, "vocab_size");
  const int64_t hd = c.contains("head_dim") ? i(c, "head_dim") : E / H;
  Tensors t;
  add(&t, "model.embed_tokens.weight", {V, E});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(&t, p + "self_attn.q_proj.weight", {H * hd, E});
    add(&t, p + "self_attn.k_proj.weight", {KV * hd, E});
    add(&t, p + "self_attn.v_proj.weight", {KV * hd, E});
    add(&t, p + "self_attn.o_proj.weight", {E, H * hd});
    if (type == "qwen2") {
      add(&t, p + "self_attn.q_proj.bias", {H * hd});
      add(&t, p + "self_attn.k_proj.bias", {KV * hd});
      add(&t, p + "self_attn.v_proj.bias", {KV * hd});
    }
    if (type == "qwen3_moe") {
      add(&t, p + "self_attn.q_norm.weight", {hd});
      add(&t, p + "self_attn.k_norm.weight", {hd});
    }
    if (type == "mixtral") {
      const int64_t X = i(c, "num_local_experts"), F = i(c, "intermediate_size");
      add(&t, p + "block_sparse_moe.gate.weight", {X, E});
      for (int64_t x = 0; x < X; ++x) {
        const std::string q = p + "block_sparse_moe.experts." + std::to_string(x) + ".";
        add(&t, q + "w1.weight", {F, E}, true);
        add(&t, q + "w2.weight", {E, F}, true);
        add(&t, q + "w3.weight", {F, E}, true);
      }
    } else if (type == "qwen3_moe") {
      const int64_t X = i(c, "num_experts"), F = i(c, "moe_intermediate_size");
      add(&t, p + "mlp.gate.weight", {X, E});
      for (int64_t x = 0; x < X; ++x) {
        const std::string q = p + "mlp.experts." + std::to_string(x) + ".";
        add(&t, q + "gate_proj.weight", {F, E}, true);
        add(&t, q + "up_proj.weight", {F, E}, true);
        add(&t, q + "down_proj.weight", {E, F}, true);
      }
    } else {
      const int64_t F = i(c, "intermediate_size");
      add(&t, p + "mlp.gate_proj.weight", {F, E});
      add(&t, p + "mlp.up_proj.weight", {F, E});
      add(&t, p + "mlp.down_proj.weight", {E, F});
    }
    add(&t, p + "input_layernorm.weight", {E});
    add(&t, p + "post_attention_layernorm.weight", {E});
  }
  add(&t, "model.norm.weight", {E});
  if (!c.value("tie_word_embeddings", false)) add(&t, "lm_head.weight", {V, E});
  return t;
}

// DeepSeek-V3: MLA attention, first_k_dense_replace dense layers, then MoE
// layers with a sigmoid router that holds a per-expert score bias.
Tensors deepseek_v3(const nlohmann::json& c) {
  const int64_t E = i(c, "hidden_size"), L = i(c, "num_hidden_layers"), H = i(c, "num_attention_heads");
  const int64_t V = i(c, "vocab_size"), F = i(c, "intermediate_size"), Fm = i(c, "moe_intermediate_size");
  const int64_t X = i(c, "n_routed_experts"), S = i(c, "n_shared_experts"), K = i(c, "first_k_dense_replace");
  const int64_t ql = i(c, "q_lora_rank"), kvl = i(c, "kv_lora_rank"), nope = i(c, "qk_nope_head_dim");
  const int64_t rope = i(c, "qk_rope_head_dim"), vd = i(c, "v_head_dim");
  Tensors t;
  add(&t, "model.embed_tokens.weight", {V, E});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(&t, p + "self_attn.q_a_proj.weight", {ql, E});
    add(&t, p + "self_attn.q_a_layernorm.weight", {ql});
    add(&t, p + "self_attn.q_b_proj.weight", {H * (nope + rope), ql});
    add(&t, p + "self_attn.kv_a_proj_with_mqa.weight", {kvl + rope, E});
    add(&t, p + "self_attn.kv_a_layernorm.weight", {kvl});
    add(&t, p + "self_attn.kv_b_proj.weight", {H * (nope + vd), kvl});
    add(&t, p + "self_attn.o_proj.weight", {E, H * vd});
    if (l < K) {
      add(&t, p + "mlp.gate_proj.weight", {F, E});
      add(&t, p + "mlp.up_proj.weight", {F, E});
      add(&t, p + "mlp.down_proj.weight", {E, F});
    } else {
      add(&t, p + "mlp.gate.weight", {X, E});
      add(&t, p + "mlp.gate.e_score_correction_bias", {X});
      for (int64_t x = 0; x < X; ++x) {
        const std::string q = p + "mlp.experts." + std::to_string(x) + ".";
        add(&t, q + "gate_proj.weight", {Fm, E}, true);
        add(&t, q + "up_proj.weight", {Fm, E}, true);
        add(&t, q + "down_proj.weight", {E, Fm}, true);
      }
      add(&t, p + "mlp.shared_experts.gate_proj.weight", {Fm * S, E});
      add(&t, p + "mlp.shared_experts.up_proj.weight", {Fm * S, E});
      add(&t, p + "mlp.shared_experts.down_proj.weight", {E, Fm * S});
    }
    add(&t, p + "input_layernorm.weight", {E});
    add(&t, p + "post_attention_layernorm.weight", {E});
  }
  add(&t, "model.norm.weight", {E});
  add(&t, "lm_head.weight", {V, E});
  return t;
}

struct Counts {
  int64_t total = 0, active = 0, kv_elems_per_token = 0;
};

// Active per token: everything but the routed experts a token does not use
// (n_expert - n_expert_used of them in each MoE layer).
Counts count(const nlohmann::json& c, const Tensors& t) {
  Counts r;
  int64_t routed = 0;
  for (const Tensor& x : t) {
    r.total += x.numel();
    if (x.routed_expert) routed += x.numel();
  }
  r.active = r.total;
  const std::string type = c.at("model_type");
  if (routed > 0) {
    const int64_t n_expert = c.contains("num_local_experts") ? i(c, "num_local_experts")
                             : c.contains("num_experts")     ? i(c, "num_experts")
                                                             : i(c, "n_routed_experts");
    r.active = r.total - routed / n_expert * (n_expert - i(c, "num_experts_per_tok"));
  }
  // KV cache: what the attention stores per token and layer. GQA: the outputs
  // of k_proj and v_proj; MLA: the normalized latent (kv_a_layernorm's width)
  // plus the rope part of kv_a_proj_with_mqa.
  for (const Tensor& x : t) {
    const auto ends = [&](const char* s) {
      const std::string suf(s);
      return x.name.size() > suf.size() && x.name.compare(x.name.size() - suf.size(), suf.size(), suf) == 0;
    };
    if (ends("self_attn.k_proj.weight") || ends("self_attn.v_proj.weight")) r.kv_elems_per_token += x.shape[0];
    if (ends("self_attn.kv_a_proj_with_mqa.weight")) r.kv_elems_per_token += x.shape[0];
  }
  return r;
}

struct Case {
  const char* file;
  int64_t published_total;  // 0 = the card gives a rounded figure only
};

TEST(TensorShapes, CountsMatchEveryTensorOfTheCheckpoint) {
  const Case cases[] = {
      // Exact totals of the safetensors headers (bf16 checkpoints).
      {"llama-3.1-8b-config.json", 8030261248}, {"llama-3.1-70b-config.json", 70553706496},
      {"qwen2.5-7b-config.json", 7615616512},   {"mixtral-8x7b-config.json", 46702792704},
      {"qwen3-30b-a3b-config.json", 0},         {"deepseek-v3-config.json", 0},
  };
  for (const Case& k : cases) {
    const nlohmann::json c = config(k.file);
    const Tensors t = c.at("model_type") == "deepseek_v3" ? deepseek_v3(c) : gqa_model(c);
    const Counts want = count(c, t);
    const ModelSpec m = load_model_spec(kData + k.file);
    const ParamCounts got = count_params(m);
    std::printf("%-28s %zu tensors: total %lld, active %lld, KV %lld elements/token\n", k.file, t.size(),
                static_cast<long long>(want.total), static_cast<long long>(want.active),
                static_cast<long long>(want.kv_elems_per_token));
    EXPECT_EQ(got.total, want.total) << k.file;
    EXPECT_EQ(got.active, want.active) << k.file;
    if (k.published_total > 0) {
      EXPECT_EQ(want.total, k.published_total) << k.file;
    }
    // bf16 weights: 2 bytes per parameter, every tensor.
    EXPECT_DOUBLE_EQ(model_weight_bytes(m, got, parse_weight_format("bf16")), 2.0 * static_cast<double>(want.total))
        << k.file;
    EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, 2), 2.0 * static_cast<double>(want.kv_elems_per_token)) << k.file;
    EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, 1), static_cast<double>(want.kv_elems_per_token)) << k.file;
  }
}

TEST(TensorShapes, DeepSeekV3MatchesItsPublishedBreakdown) {
  // The V3 report: 671B total, 37B activated per token, main model only.
  const nlohmann::json c = config("deepseek-v3-config.json");
  const Counts want = count(c, deepseek_v3(c));
  EXPECT_NEAR(static_cast<double>(want.total) / 1e9, 671.0, 0.5);
  EXPECT_NEAR(static_cast<double>(want.active) / 1e9, 37.5, 1.0);
  // Without the router's score bias (256 experts x 58 MoE layers) the count
  // is short by exactly that: the 14,848 the planner used to miss.
  ModelSpec m = load_model_spec(kData + "deepseek-v3-config.json");
  m.config.router_bias = false;
  EXPECT_EQ(want.total - count_params(m).total, 256 * 58);
  EXPECT_EQ(want.active - count_params(m).active, 256 * 58);
}

}  // namespace
}  // namespace parallm::planner
