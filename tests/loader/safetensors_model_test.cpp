// load_safetensors_model / parse_hf_config: Hugging Face checkpoints written
// by the test's own writer, single file and sharded, every supported
// architecture feature, and the errors a user can make.
#include <gtest/gtest.h>

#include <cmath>

#include "config/hf_config.h"
#include "loader/model_file.h"
#include "safetensors_test_writer.h"
#include "util/check.h"

namespace parallm {
namespace {

using nlohmann::json;
using test::StTensor;

// A small checkpoint: n_embd 8, 2 heads of 4, 1 KV head, FFN 16, 2 layers, vocab 10.
struct Checkpoint {
  json config;
  std::vector<StTensor> tensors;
};

std::vector<uint8_t> ramp(int64_t n, float start, const std::string& dtype) {
  std::vector<uint8_t> b;
  for (int64_t i = 0; i < n; ++i) {
    float x = start + 0.01f * static_cast<float>(i);
    if (dtype == "F32") {
      uint8_t raw[4];
      std::memcpy(raw, &x, 4);
      b.insert(b.end(), raw, raw + 4);
    } else {
      uint16_t h = dtype == "F16" ? fp32_to_fp16(x) : fp32_to_bf16(x);
      b.insert(b.end(), {static_cast<uint8_t>(h), static_cast<uint8_t>(h >> 8)});
    }
  }
  return b;
}

Checkpoint make_checkpoint(const std::string& type, const std::string& dtype = "F32", int n_expert = 0) {
  Checkpoint c;
  c.config = {
      {"model_type", type},     {"vocab_size", 10},         {"hidden_size", 8},         {"intermediate_size", 16},
      {"num_hidden_layers", 2}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"max_position_embeddings", 64},
      {"rms_norm_eps", 1e-5},   {"rope_theta", 10000.0},    {"hidden_act", "silu"},     {"tie_word_embeddings", false}};
  const bool qwen_moe = type == "qwen2_moe" || type == "qwen3_moe";
  if (n_expert > 0 && qwen_moe) {
    c.config["num_experts"] = n_expert;
    c.config["num_experts_per_tok"] = 2;
    c.config["moe_intermediate_size"] = 16;
    c.config["intermediate_size"] = 48;  // the dense width, unused when every layer is sparse
    c.config["norm_topk_prob"] = type == "qwen3_moe";
    if (type == "qwen2_moe") c.config["shared_expert_intermediate_size"] = 24;
  } else if (n_expert > 0) {
    c.config["num_local_experts"] = n_expert;
    c.config["num_experts_per_tok"] = 2;
  }
  float start = 0.0f;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const std::string& dt) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    c.tensors.push_back({name, dt, shape, ramp(n, start, dt)});
    start += 1.0f;
  };
  add("model.embed_tokens.weight", {10, 8}, dtype);
  add("model.norm.weight", {8}, dtype);
  add("lm_head.weight", {10, 8}, dtype);
  for (int l = 0; l < 2; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {8}, dtype);
    add(p + "post_attention_layernorm.weight", {8}, dtype);
    add(p + "self_attn.q_proj.weight", {8, 8}, dtype);
    add(p + "self_attn.k_proj.weight", {4, 8}, dtype);
    add(p + "self_attn.v_proj.weight", {4, 8}, dtype);
    add(p + "self_attn.o_proj.weight", {8, 8}, dtype);
    add(p + "self_attn.rotary_emb.inv_freq", {2}, "F32");
    if (type == "qwen2" || type == "qwen2_moe") {
      add(p + "self_attn.q_proj.bias", {8}, dtype);
      add(p + "self_attn.k_proj.bias", {4}, dtype);
      add(p + "self_attn.v_proj.bias", {4}, dtype);
    }
    if (type == "qwen3" || type == "qwen3_moe" || type == "gemma3_text") {
      add(p + "self_attn.q_norm.weight", {4}, dtype);
      add(p + "self_attn.k_norm.weight", {4}, dtype);
    }
    if (type == "gemma2" || type == "gemma3_text") {
      add(p + "pre_feedforward_layernorm.weight", {8}, dtype);
      add(p + "post_feedforward_layernorm.weight", {8}, dtype);
    }
    if (n_expert > 0 && qwen_moe) {
      add(p + "mlp.gate.weight", {n_expert, 8}, dtype);
      for (int e = 0; e < n_expert; ++e) {
        std::string q = p + "mlp.experts." + std::to_string(e) + ".";
        add(q + "gate_proj.weight", {16, 8}, dtype);
        add(q + "up_proj.weight", {16, 8}, dtype);
        add(q + "down_proj.weight", {8, 16}, dtype);
      }
      if (type == "qwen2_moe") {
        add(p + "mlp.shared_expert.gate_proj.weight", {24, 8}, dtype);
        add(p + "mlp.shared_expert.up_proj.weight", {24, 8}, dtype);
        add(p + "mlp.shared_expert.down_proj.weight", {8, 24}, dtype);
        add(p + "mlp.shared_expert_gate.weight", {1, 8}, dtype);
      }
    } else if (n_expert > 0) {
      add(p + "block_sparse_moe.gate.weight", {n_expert, 8}, dtype);
      for (int e = 0; e < n_expert; ++e) {
        std::string q = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
        add(q + "w1.weight", {16, 8}, dtype);
        add(q + "w2.weight", {8, 16}, dtype);
        add(q + "w3.weight", {16, 8}, dtype);
      }
    } else {
      add(p + "mlp.gate_proj.weight", {16, 8}, dtype);
      add(p + "mlp.up_proj.weight", {16, 8}, dtype);
      add(p + "mlp.down_proj.weight", {8, 16}, dtype);
    }
  }
  return c;
}

void write_checkpoint(const test::TempDir& dir, const Checkpoint& c, int n_shards = 1) {
  test::write_text(dir.file("config.json"), c.config.dump());
  if (n_shards == 1) {
    test::write_bytes(dir.file("model.safetensors"), test::safetensors_bytes(c.tensors));
    return;
  }
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  std::vector<std::vector<StTensor>> shards(static_cast<size_t>(n_shards));
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    size_t s = i % static_cast<size_t>(n_shards);
    std::string file = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(n_shards) + ".safetensors";
    shards[s].push_back(c.tensors[i]);
    index["weight_map"][c.tensors[i].name] = file;
  }
  for (int s = 0; s < n_shards; ++s) {
    std::string file = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(n_shards) + ".safetensors";
    test::write_bytes(dir.file(file), test::safetensors_bytes(shards[static_cast<size_t>(s)]));
  }
  test::write_text(dir.file("model.safetensors.index.json"), index.dump());
}

const StTensor& hf(const Checkpoint& c, const std::string& name) {
  for (const auto& t : c.tensors) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

void expect_same_bytes(const ModelFile& m, const std::string& canonical, const StTensor& t) {
  const WeightTensor& w = m.get(canonical);
  EXPECT_EQ(w.shape, t.shape) << canonical;
  ASSERT_EQ(w.nbytes, t.bytes.size()) << canonical;
  EXPECT_EQ(std::vector<uint8_t>(w.data, w.data + w.nbytes), t.bytes) << canonical;
}

// parse_hf_config's message for j ("" when it parses).
std::string err(const json& j) {
  try {
    parse_hf_config(j.dump(), "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string load_error(const std::string& path) {
  try {
    load_safetensors_model(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsModel, LoadsLlamaWithCanonicalNamesAndRotateHalfRope) {
  test::TempDir dir;
  Checkpoint c = make_checkpoint("llama", "BF16");
  write_checkpoint(dir, c);
  auto m = load_safetensors_model(dir.path());
  const ModelConfig& cfg = m->config;
  EXPECT_EQ(m->format, "safetensors");
  EXPECT_EQ(m->hf_dir, dir.path());
  EXPECT_EQ(cfg.arch, Architecture::kLlama);
  EXPECT_EQ(cfg.rope_style, RopeStyle::kHalf);
  EXPECT_EQ(cfg.n_vocab, 10);
  EXPECT_EQ(cfg.n_embd, 8);
  EXPECT_EQ(cfg.n_head, 2);
  EXPECT_EQ(cfg.n_kv_head, 1);
  EXPECT_EQ(cfg.head_dim, 4);
  EXPECT_EQ(cfg.n_ff, 16);
  EXPECT_EQ(cfg.n_ctx_train, 64);
  EXPECT_FLOAT_EQ(cfg.rms_eps, 1e-5f);
  EXPECT_FALSE(cfg.tied_embeddings);
  EXPECT_FALSE(cfg.qkv_bias);
  expect_same_bytes(*m, "token_embd.weight", hf(c, "model.embed_tokens.weight"));
  expect_same_bytes(*m, "output.weight", hf(c, "lm_head.weight"));
  expect_same_bytes(*m, "blk.1.attn_q.weight", hf(c, "model.layers.1.self_attn.q_proj.weight"));
  expect_same_bytes(*m, "blk.1.attn_k.weight", hf(c, "model.layers.1.self_attn.k_proj.weight"));
  expect_same_bytes(*m, "blk.0.attn_output.weight", hf(c, "model.layers.0.self_attn.o_proj.weight"));
  expect_same_bytes(*m, "blk.0.ffn_gate.weight", hf(c, "model.layers.0.mlp.gate_proj.weight"));
  expect_same_bytes(*m, "blk.0.ffn_down.weight", hf(c, "model.layers.0.mlp.down_proj.weight"));
  EXPECT_EQ(m->get("blk.0.attn_q.weight").dtype, DType::kBF16);
  // 1-D BF16 norms are widened to F32 exactly.
  const WeightTensor& norm = m->get("blk.1.ffn_norm.weight");
  ASSERT_EQ(norm.dtype, DType::kF32);
  const auto& src = hf(c, "model.layers.1.post_attention_layernorm.weight").bytes;
  for (int i = 0; i < 8; ++i) {
    uint16_t b;
    std::memcpy(&b, src.data() + 2 * i, 2);
    float x;
    std::memcpy(&x, norm.data + 4 * i, 4);
    EXPECT_EQ(x, bf16_to_fp32(b));
  }
  EXPECT_EQ(m->find("blk.0.rotary_emb.inv_freq"), nullptr);
}

TEST(SafetensorsModel, ShardedIndexGivesTheSameTensors) {
  test::TempDir one, three;
  Checkpoint c = make_checkpoint("mistral", "F16");
  write_checkpoint(one, c);
  write_checkpoint(three, c, 3);
  auto a = load_safetensors_model(one.path());
  auto b = load_safetensors_model(three.path() + "/config.json");
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const auto& [name, t] : a->tensors()) {
    const WeightTensor& u = b->get(name);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), std::vector<uint8_t>(u.data, u.data + u.nbytes)) << name;
  }
}

TEST(SafetensorsModel, Qwen2HasQkvBiasAndTiedEmbeddings) {
  test::TempDir dir;
  Checkpoint c = make_checkpoint("qwen2");
  c.config["tie_word_embeddings"] = true;
  c.tensors.erase(c.tensors.begin() + 2);  // lm_head
  write_checkpoint(dir, c);
  auto m = load_safetensors_model(dir.file("model.safetensors"));
  EXPECT_EQ(m->config.arch, Architecture::kQwen2);
  EXPECT_TRUE(m->config.qkv_bias);
  EXPECT_TRUE(m->config.tied_embeddings);
  EXPECT_EQ(m->find("output.weight"), nullptr);
  expect_same_bytes(*m, "blk.0.attn_k.bias", hf(c, "model.layers.0.self_attn.k_proj.bias"));
}

TEST(SafetensorsModel, MixtralExpertsMapToPerExpertTensors) {
  test::TempDir dir;
  Checkpoint c = make_checkpoint("mixtral", "F32", 4);
  write_checkpoint(dir, c);
  auto m = load_safetensors_model(dir.path());
  EXPECT_EQ(m->config.n_expert, 4);
  EXPECT_EQ(m->config.n_expert_used, 2);
  expect_same_bytes(*m, "blk.1.ffn_gate_inp.weight", hf(c, "model.layers.1.block_sparse_moe.gate.weight"));
  expect_same_bytes(*m, "blk.1.ffn_gate.3.weight", hf(c, "model.layers.1.block_sparse_moe.experts.3.w1.weight"));
  expect_same_bytes(*m, "blk.1.ffn_up.3.weight", hf(c, "model.layers.1.block_sparse_moe.experts.3.w3.weight"));
  expect_same_bytes(*m, "blk.0.ffn_down.2.weight", hf(c, "model.layers.0.block_sparse_moe.experts.2.w2.weight"));
  ModelFile::ExpertMatrix e = m->expert_matrix(1, "down", 3);
  EXPECT_EQ(e.rows, 8);
  EXPECT_EQ(e.cols, 16);
  EXPECT_EQ(e.data, m->get("blk.1.ffn_down.3.weight").data);
}

TEST(SafetensorsModel, Qwen3HasPerHeadQkNormsInF32) {
  test::TempDir dir;
  Checkpoint c = make_checkpoint("qwen3", "BF16");
  write_checkpoint(dir, c);
  auto m = load_safetensors_model(dir.path());
  EXPECT_EQ(m->config.arch, Architecture::kQwen3);
  EXPECT_TRUE(m->config.qk_norm);
  EXPECT_FALSE(m->config.qkv_bias);
  EXPECT_EQ(m->config.rope_style, RopeStyle::kHalf);
  const WeightTensor& qn = m->get("blk.1.attn_q_norm.weight");
  EXPECT_EQ(qn.dtype, DType::kF32);  // norms are widened for the kernels
  EXPECT_EQ(qn.shape, std::vector<int64_t>{4});
  const StTensor& src = hf(c, "model.layers.1.self_attn.q_norm.weight");
  uint16_t h1;
  std::memcpy(&h1, src.bytes.data() + 2, 2);
  EXPECT_EQ(reinterpret_cast<const float*>(qn.data)[1], bf16_to_fp32(h1));
}

TEST(SafetensorsModel, QwenMoeRoutersExpertsAndSharedExpert) {
  for (const std::string type : {"qwen2_moe", "qwen3_moe"}) {
    SCOPED_TRACE(type);
    test::TempDir dir;
    Checkpoint c = make_checkpoint(type, "F32", 4);
    write_checkpoint(dir, c, 2);
    auto m = load_safetensors_model(dir.path());
    const ModelConfig& mc = m->config;
    EXPECT_EQ(mc.n_expert, 4);
    EXPECT_EQ(mc.n_expert_used, 2);
    EXPECT_EQ(mc.n_ff, 16);  // moe_intermediate_size, not intermediate_size
    EXPECT_EQ(mc.norm_topk_prob, type == "qwen3_moe");
    expect_same_bytes(*m, "blk.1.ffn_gate_inp.weight", hf(c, "model.layers.1.mlp.gate.weight"));
    expect_same_bytes(*m, "blk.1.ffn_gate.3.weight", hf(c, "model.layers.1.mlp.experts.3.gate_proj.weight"));
    expect_same_bytes(*m, "blk.0.ffn_up.2.weight", hf(c, "model.layers.0.mlp.experts.2.up_proj.weight"));
    expect_same_bytes(*m, "blk.0.ffn_down.1.weight", hf(c, "model.layers.0.mlp.experts.1.down_proj.weight"));
    if (type == "qwen2_moe") {
      EXPECT_EQ(mc.arch, Architecture::kQwen2Moe);
      EXPECT_TRUE(mc.qkv_bias);
      EXPECT_EQ(mc.n_ff_shared, 24);
      expect_same_bytes(*m, "blk.0.ffn_gate_shexp.weight", hf(c, "model.layers.0.mlp.shared_expert.gate_proj.weight"));
      expect_same_bytes(*m, "blk.1.ffn_down_shexp.weight", hf(c, "model.layers.1.mlp.shared_expert.down_proj.weight"));
      // HF's [1, n_embd] gate is GGUF's vector.
      const WeightTensor& g = m->get("blk.1.ffn_gate_inp_shexp.weight");
      EXPECT_EQ(g.shape, std::vector<int64_t>{8});
      const StTensor& src = hf(c, "model.layers.1.mlp.shared_expert_gate.weight");
      EXPECT_EQ(std::vector<uint8_t>(g.data, g.data + g.nbytes), src.bytes);
    } else {
      EXPECT_EQ(mc.arch, Architecture::kQwen3Moe);
      EXPECT_TRUE(mc.qk_norm);
      EXPECT_FALSE(mc.has_shared_expert());
    }
  }
}

TEST(SafetensorsModel, GemmaNormsGetTheirOneAndTheirOwnNames) {
  for (const std::string type : {"gemma2", "gemma3_text"}) {
    SCOPED_TRACE(type);
    test::TempDir dir;
    Checkpoint c = make_checkpoint(type, "BF16");
    c.config["hidden_activation"] = "gelu_pytorch_tanh";
    c.config.erase("hidden_act");
    c.config["tie_word_embeddings"] = true;
    c.tensors.erase(c.tensors.begin() + 2);  // lm_head
    write_checkpoint(dir, c);
    auto m = load_safetensors_model(dir.path());
    const ModelConfig& mc = m->config;
    EXPECT_EQ(mc.ffn_act, FfnActivation::kGeluTanh);
    EXPECT_TRUE(mc.post_norms);
    EXPECT_TRUE(mc.tied_embeddings);
    EXPECT_FLOAT_EQ(mc.embd_scale, std::sqrt(8.0f));
    EXPECT_FLOAT_EQ(mc.query_scale(), 0.5f);  // query_pre_attn_scalar defaults to head_dim 4
    // Each norm's stored w is applied as 1 + w: the loader adds the 1.
    auto first = [&](const std::string& canonical, const std::string& name) {
      const StTensor& src = hf(c, name);
      uint16_t h;
      std::memcpy(&h, src.bytes.data(), 2);
      EXPECT_EQ(reinterpret_cast<const float*>(m->get(canonical).data)[0], bf16_to_fp32(h) + 1.0f) << canonical;
    };
    first("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight");
    first("blk.0.post_attention_norm.weight", "model.layers.0.post_attention_layernorm.weight");
    first("blk.1.ffn_norm.weight", "model.layers.1.pre_feedforward_layernorm.weight");
    first("blk.1.post_ffw_norm.weight", "model.layers.1.post_feedforward_layernorm.weight");
    first("output_norm.weight", "model.norm.weight");
    if (type == "gemma2") {
      EXPECT_EQ(mc.sliding_layers, (std::vector<uint8_t>{1, 0}));
      EXPECT_FLOAT_EQ(mc.attn_softcap, 50.0f);
      EXPECT_FLOAT_EQ(mc.final_softcap, 30.0f);
      EXPECT_EQ(mc.sliding_window, 4096);
    } else {
      first("blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight");
      EXPECT_EQ(mc.sliding_layers, (std::vector<uint8_t>{1, 1}));  // 5:1, and only two layers
      EXPECT_FLOAT_EQ(mc.rope_theta_swa, 10000.0f);
      EXPECT_FLOAT_EQ(mc.attn_softcap, 0.0f);
    }
  }
}

TEST(SafetensorsModel, Phi3FusedMatricesAndLongRope) {
  test::TempDir dir;
  Checkpoint c = make_checkpoint("phi3");
  std::vector<StTensor> kept;
  for (auto& t : c.tensors) {
    const bool split = t.name.find("q_proj") != std::string::npos || t.name.find("k_proj") != std::string::npos ||
                       t.name.find("v_proj") != std::string::npos || t.name.find("gate_proj") != std::string::npos ||
                       t.name.find("up_proj") != std::string::npos;
    if (!split) kept.push_back(t);
  }
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    kept.push_back({p + "self_attn.qkv_proj.weight", "F32", {16, 8}, ramp(16 * 8, 40.0f + l, "F32")});
    kept.push_back({p + "mlp.gate_up_proj.weight", "F32", {32, 8}, ramp(32 * 8, 50.0f + l, "F32")});
  }
  c.tensors = kept;
  c.config["original_max_position_embeddings"] = 16;  // max_position_embeddings is 64
  c.config["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {2.0, 8.0}}, {"short_factor", {1.0, 1.5}}};
  write_checkpoint(dir, c);
  auto m = load_safetensors_model(dir.path());
  const ModelConfig& mc = m->config;
  EXPECT_EQ(mc.arch, Architecture::kPhi3);
  EXPECT_TRUE(mc.fused_qkv && mc.fused_gate_up);
  EXPECT_EQ(mc.rope_scaling, RopeScaling::kLongRope);
  EXPECT_EQ(mc.rope_original_ctx, 16);
  EXPECT_EQ(mc.rope_long_factors, (std::vector<float>{2.0f, 8.0f}));
  EXPECT_FLOAT_EQ(mc.rope_attn_factor, std::sqrt(1.0f + std::log(4.0f) / std::log(16.0f)));
  // Past the original context the long factors divide the frequencies, within it the short ones.
  EXPECT_FLOAT_EQ(mc.rope_inv_freq(64)[1], std::pow(10000.0f, -0.5f) / 8.0f);
  EXPECT_FLOAT_EQ(mc.rope_inv_freq(16)[1], std::pow(10000.0f, -0.5f) / 1.5f);
  expect_same_bytes(*m, "blk.1.attn_qkv.weight", hf(c, "model.layers.1.self_attn.qkv_proj.weight"));
  expect_same_bytes(*m, "blk.0.ffn_up.weight", hf(c, "model.layers.0.mlp.gate_up_proj.weight"));

  json bad = c.config;
  bad["partial_rotary_factor"] = 0.75;
  EXPECT_NE(err(bad).find("partial_rotary_factor"), std::string::npos) << err(bad);
  bad = c.config;
  bad["rope_scaling"]["long_factor"] = {2.0};
  EXPECT_NE(err(bad).find("longrope needs 2 long"), std::string::npos) << err(bad);
  bad = c.config;
  bad["rope_scaling"].erase("short_factor");
  EXPECT_NE(err(bad).find("'short_factor'"), std::string::npos) << err(bad);
  bad = c.config;
  bad["rope_scaling"]["short_factor"] = {1.0, -1.0};
  EXPECT_NE(err(bad).find("positive"), std::string::npos) << err(bad);
  // Unfused matrices in a Phi-3 checkpoint are a shape error naming the fused one.
  test::TempDir dir2;
  Checkpoint unfused = make_checkpoint("phi3");
  write_checkpoint(dir2, unfused);
  EXPECT_NE(load_error(dir2.path()).find("attn_qkv"), std::string::npos) << load_error(dir2.path());
}

TEST(HfConfig, DeepseekFieldsAndRefusals) {
  // DeepSeek-V3's config.json at small sizes.
  json j = {{"model_type", "deepseek_v3"},
            {"vocab_size", 100},
            {"hidden_size", 64},
            {"intermediate_size", 96},
            {"moe_intermediate_size", 16},
            {"num_hidden_layers", 4},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 4},
            {"n_routed_experts", 8},
            {"num_experts_per_tok", 2},
            {"n_shared_experts", 1},
            {"first_k_dense_replace", 1},
            {"moe_layer_freq", 1},
            {"routed_scaling_factor", 2.5},
            {"norm_topk_prob", true},
            {"scoring_func", "sigmoid"},
            {"topk_method", "noaux_tc"},
            {"n_group", 4},
            {"topk_group", 2},
            {"q_lora_rank", 24},
            {"kv_lora_rank", 32},
            {"qk_nope_head_dim", 16},
            {"qk_rope_head_dim", 8},
            {"v_head_dim", 12},
            {"head_dim", 8},
            {"max_position_embeddings", 256},
            {"rope_scaling",
             {{"type", "yarn"},
              {"factor", 40},
              {"original_max_position_embeddings", 64},
              {"beta_fast", 32},
              {"beta_slow", 1},
              {"mscale", 1.0},
              {"mscale_all_dim", 1.0}}}};
  ModelConfig c = parse_hf_config(j.dump());
  EXPECT_EQ(c.arch, Architecture::kDeepseek2);
  EXPECT_TRUE(c.mla());
  EXPECT_EQ(c.head_dim, 24);  // nope + rope, not the config's rotary head_dim
  EXPECT_EQ(c.rope_dim(), 8);
  EXPECT_EQ(c.kv_row_dim(), 40);
  EXPECT_EQ(c.kv_heads(), 1);
  EXPECT_EQ(c.n_ff, 16);
  EXPECT_EQ(c.n_ff_dense, 96);
  EXPECT_EQ(c.n_ff_shared, 16);
  EXPECT_EQ(c.n_dense_lead, 1);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.router_scoring, RouterScoring::kSigmoid);
  EXPECT_EQ(c.n_expert_groups, 4);
  EXPECT_EQ(c.n_expert_groups_used, 2);
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
  // YaRN: the query scale gains (0.1 ln 40 + 1)^2; cos / sin unscaled (mscale == mscale_all_dim).
  const float m = 0.1f * std::log(40.0f) + 1.0f;
  EXPECT_FLOAT_EQ(c.query_scale(), m * m / std::sqrt(24.0f));
  EXPECT_FLOAT_EQ(c.rope_cos_sin_scale(), 1.0f);
  // The lowest frequency is interpolated (divided by 40), the highest kept.
  const std::vector<float> f = c.rope_inv_freq();
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[3], std::pow(10000.0f, -6.0f / 8.0f) / 40.0f);
  json lite = j;
  lite["topk_method"] = "greedy";
  lite["q_lora_rank"] = nullptr;
  EXPECT_EQ(parse_hf_config(lite.dump()).n_expert_groups, 1);  // greedy ignores n_group
  EXPECT_EQ(parse_hf_config(lite.dump()).q_lora_rank, 0);
  json bad = j;
  bad["topk_method"] = "random";
  EXPECT_NE(err(bad).find("'random'"), std::string::npos) << err(bad);
  bad = j;
  bad["scoring_func"] = "relu";
  EXPECT_NE(err(bad).find("'relu'"), std::string::npos) << err(bad);
  bad = j;
  bad["moe_layer_freq"] = 2;
  EXPECT_NE(err(bad).find("moe_layer_freq"), std::string::npos) << err(bad);
  bad = j;
  bad["topk_group"] = 5;
  EXPECT_NE(err(bad).find("expert groups"), std::string::npos) << err(bad);
  bad = j;
  bad.erase("kv_lora_rank");
  EXPECT_NE(err(bad).find("'kv_lora_rank'"), std::string::npos) << err(bad);
}

TEST(HfConfig, GemmaFields) {
  json j = make_checkpoint("gemma3_text").config;
  j.erase("hidden_act");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["query_pre_attn_scalar"] = 144;
  j["layer_types"] = {"full_attention", "sliding_attention"};
  j["sliding_window"] = 1024;
  j["rope_local_base_freq"] = 20000.0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  ModelConfig c = parse_hf_config(j.dump());
  EXPECT_EQ(c.arch, Architecture::kGemma3);
  EXPECT_FLOAT_EQ(c.query_scale(), 1.0f / 12.0f);
  EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLinear);
  // The sliding layers' base is unscaled, the global one divided by 8.
  EXPECT_FLOAT_EQ(c.rope_inv_freq_swa()[1], std::pow(20000.0f, -0.5f));
  EXPECT_FLOAT_EQ(c.rope_inv_freq()[1], std::pow(10000.0f, -0.5f) / 8.0f);
  json bad = j;
  bad["hidden_activation"] = "relu";
  EXPECT_NE(err(bad).find("relu"), std::string::npos) << err(bad);
  bad = j;
  bad["layer_types"] = {"full_attention"};
  EXPECT_NE(err(bad).find("sliding-window layer list"), std::string::npos) << err(bad);
  bad = j;
  bad["layer_types"] = {"full_attention", "chunked_attention"};
  EXPECT_NE(err(bad).find("chunked_attention"), std::string::npos) << err(bad);
  bad = j;
  bad["sliding_window"] = 0;
  EXPECT_NE(err(bad).find("sliding_window"), std::string::npos) << err(bad);
  bad = j;
  bad["query_pre_attn_scalar"] = -1;
  EXPECT_NE(err(bad).find("query_pre_attn_scalar"), std::string::npos) << err(bad);
}

TEST(HfConfig, QwenMoeFeaturesItCannotRunAreRefusedByName) {
  const json base = make_checkpoint("qwen2_moe", "F32", 4).config;
  EXPECT_EQ(err(base), "");
  json j = base;
  j["decoder_sparse_step"] = 2;
  EXPECT_NE(err(j).find("decoder_sparse_step"), std::string::npos) << err(j);
  j = base;
  j["mlp_only_layers"] = {0};
  EXPECT_NE(err(j).find("mlp_only_layers"), std::string::npos) << err(j);
  j = base;
  j.erase("moe_intermediate_size");
  EXPECT_NE(err(j).find("'moe_intermediate_size'"), std::string::npos) << err(j);
  j = base;
  j.erase("shared_expert_intermediate_size");
  EXPECT_NE(err(j).find("'shared_expert_intermediate_size'"), std::string::npos) << err(j);
  j = base;
  j["num_experts_per_tok"] = 5;
  EXPECT_NE(err(j).find("experts used per token"), std::string::npos) << err(j);
  j = make_checkpoint("qwen3").config;
  j["use_sliding_window"] = true;
  EXPECT_NE(err(j).find("use_sliding_window"), std::string::npos) << err(j);
  j = make_checkpoint("qwen3").config;
  j["attention_bias"] = true;
  EXPECT_NE(err(j).find("attention_bias"), std::string::npos) << err(j);
}

TEST(HfConfig, ParsesRopeScaling) {
  json j = make_checkpoint("llama").config;
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  ModelConfig c = parse_hf_config(j.dump());
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_factor, 32.0f);
  EXPECT_EQ(c.rope_original_ctx, 8192);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  c = parse_hf_config(j.dump());
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(c.rope_factor, 2.0f);
  j["rope_scaling"] = nullptr;
  j["head_dim"] = 8;  // explicit head_dim wins over n_embd / n_head
  c = parse_hf_config(j.dump());
  EXPECT_EQ(c.rope_scaling, RopeScaling::kNone);
  EXPECT_EQ(c.head_dim, 8);
  j.erase("model_type");
  j["architectures"] = {"MistralForCausalLM"};
  EXPECT_EQ(parse_hf_config(j.dump()).arch, Architecture::kLlama);
}

TEST(HfConfig, BadConfigsAreInputErrors) {
  json base = make_checkpoint("llama").config;
  json j = base;
  j["model_type"] = "gpt2";
  EXPECT_NE(err(j).find("qwen2"), std::string::npos) << err(j);  // lists what is supported
  j = base;
  j.erase("hidden_size");
  EXPECT_NE(err(j).find("'hidden_size'"), std::string::npos);
  j = base;
  j["num_hidden_layers"] = "two";
  EXPECT_NE(err(j).find("not an integer"), std::string::npos);
  j = base;
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  EXPECT_NE(err(j).find("dynamic"), std::string::npos);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(err(j).find("yarn is supported for deepseek"), std::string::npos);
  j = base;
  j["num_key_value_heads"] = 3;
  EXPECT_NE(err(j).find("cfg.json"), std::string::npos);
  j = base;
  j["hidden_act"] = "gelu";
  EXPECT_NE(err(j).find("gelu"), std::string::npos);
  j = base;
  j.erase("model_type");
  EXPECT_NE(err(j).find("model_type"), std::string::npos);
  EXPECT_THROW(parse_hf_config("{not json"), InputError);
  EXPECT_THROW(parse_hf_config("[]"), InputError);
}

// One reader for the engine and the planner: what the engine cannot run is
// part of the description, by name, and refused only by parse_hf_config.
TEST(HfConfig, UnsupportedFeaturesAreDescribedThenRefusedByName) {
  json j = make_checkpoint("llama").config;
  j["hidden_act"] = "gelu";
  j["use_sliding_window"] = true;
  const ModelConfig c = read_hf_config(j.dump(), "cfg.json");
  ASSERT_EQ(c.unsupported.size(), 2u);
  EXPECT_NE(c.unsupported[0].find("hidden_act 'gelu'"), std::string::npos) << c.unsupported[0];
  EXPECT_NE(c.unsupported[1].find("use_sliding_window"), std::string::npos) << c.unsupported[1];
  EXPECT_EQ(c.n_layer, j["num_hidden_layers"].get<int64_t>());  // the shapes are still read
  const std::string e = err(j);
  EXPECT_EQ(e.rfind("cfg.json: hidden_act 'gelu'", 0), 0u) << e;
  EXPECT_NE(e.find("and 1 more: use_sliding_window"), std::string::npos) << e;

  j = make_checkpoint("llama").config;
  j["model_type"] = "starcoder2";
  const ModelConfig other = read_hf_config(j.dump(), "cfg.json");
  EXPECT_EQ(other.arch_name, "starcoder2");
  ASSERT_EQ(other.unsupported.size(), 1u);
  EXPECT_NE(other.unsupported[0].find("unsupported architecture 'starcoder2'"), std::string::npos);
  EXPECT_EQ(other.n_embd, j["hidden_size"].get<int64_t>());
  EXPECT_TRUE(read_hf_config(make_checkpoint("llama").config.dump()).unsupported.empty());
}

// Multimodal configs keep the language model under text_config; the
// top-level tie_word_embeddings applies when the nested one is absent.
TEST(HfConfig, TextConfigHoldsTheLanguageModel) {
  json text = make_checkpoint("llama").config;
  text.erase("tie_word_embeddings");
  const json outer = {{"model_type", "llava"}, {"tie_word_embeddings", true}, {"text_config", text}};
  const ModelConfig c = parse_hf_config(outer.dump());
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.n_embd, text["hidden_size"].get<int64_t>());
  EXPECT_TRUE(c.tied_embeddings);
}

TEST(SafetensorsModel, BrokenCheckpointsAreInputErrors) {
  {  // no config.json
    test::TempDir dir;
    test::write_bytes(dir.file("model.safetensors"), test::safetensors_bytes(make_checkpoint("llama").tensors));
    EXPECT_NE(load_error(dir.path()).find("config.json"), std::string::npos);
  }
  {  // no weights
    test::TempDir dir;
    test::write_text(dir.file("config.json"), make_checkpoint("llama").config.dump());
    EXPECT_NE(load_error(dir.path()).find("model.safetensors"), std::string::npos);
  }
  {  // a missing tensor
    test::TempDir dir;
    Checkpoint c = make_checkpoint("llama");
    c.tensors.erase(c.tensors.begin() + 5);
    write_checkpoint(dir, c);
    EXPECT_NE(load_error(dir.path()), "");
  }
  {  // untied without lm_head
    test::TempDir dir;
    Checkpoint c = make_checkpoint("llama");
    c.tensors.erase(c.tensors.begin() + 2);
    write_checkpoint(dir, c);
    EXPECT_NE(load_error(dir.path()).find("lm_head"), std::string::npos);
  }
  {  // a shape that does not match the config
    test::TempDir dir;
    Checkpoint c = make_checkpoint("llama");
    c.config["intermediate_size"] = 32;
    write_checkpoint(dir, c);
    EXPECT_NE(load_error(dir.path()).find("shape"), std::string::npos);
  }
  {  // a tensor no supported architecture has
    test::TempDir dir;
    Checkpoint c = make_checkpoint("llama");
    c.tensors.push_back({"model.layers.0.cross_attn.weight", "F32", {1}, test::f32_bytes({1})});
    write_checkpoint(dir, c);
    EXPECT_NE(load_error(dir.path()).find("cross_attn"), std::string::npos);
  }
  {  // an unsupported dtype in a shard
    test::TempDir dir;
    Checkpoint c = make_checkpoint("llama");
    c.tensors[1].dtype = "I32";
    c.tensors[1].bytes.resize(32);
    write_checkpoint(dir, c);
    EXPECT_NE(load_error(dir.path()).find("I32"), std::string::npos);
  }
  {  // an index naming a shard outside the folder, and one naming a missing shard
    test::TempDir dir;
    test::write_text(dir.file("config.json"), make_checkpoint("llama").config.dump());
    test::write_text(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": "../x.safetensors"}})");
    EXPECT_NE(load_error(dir.path()).find("plain file name"), std::string::npos);
    test::write_text(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": "x.safetensors"}})");
    EXPECT_NE(load_error(dir.path()).find("x.safetensors"), std::string::npos);
    test::write_text(dir.file("model.safetensors.index.json"), R"({"nothing": 1})");
    EXPECT_NE(load_error(dir.path()).find("weight_map"), std::string::npos);
  }
}

}  // namespace
}  // namespace parallm
