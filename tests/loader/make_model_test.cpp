// make-model: deterministic bytes, llama.cpp names and keys, weights with the
// documented statistics, loadable by the GGUF model loader for every preset
// feature and dtype, and the generated vocabulary's structure.
#include "modelgen/make_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/cpu/quant.h"
#include "loader/model_file.h"
#include "modelgen/generated_vocab.h"
#include "safetensors_test_writer.h"
#include "util/check.h"

namespace parallm {
namespace {

std::vector<uint8_t> model_bytes(const std::string& preset, DType dt, uint64_t seed) {
  MakeModelOptions o;
  o.preset = preset;
  o.dtype = dt;
  o.seed = seed;
  return build_model_gguf(o).to_bytes();
}

std::vector<float> dequantized(const GgufFile& g, const std::string& name) {
  const GgufTensorInfo* t = g.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  DType dt;
  EXPECT_TRUE(dtype_from_ggml(t->ggml_type, &dt));
  int64_t n = 1;
  for (auto d : t->ne) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  cpu::dequantize_row(dt, g.tensor_data(*t), out.data(), n);
  return out;
}

void mean_std(const std::vector<float>& v, double* mean, double* std) {
  double s = 0, s2 = 0;
  for (float x : v) s += x, s2 += double(x) * x;
  *mean = s / v.size();
  *std = std::sqrt(s2 / v.size() - *mean * *mean);
}

TEST(MakeModel, SameSeedSameBytesOtherSeedOtherWeights) {
  auto a = model_bytes("tiny", DType::kQ8_0, 7);
  auto b = model_bytes("tiny", DType::kQ8_0, 7);
  auto c = model_bytes("tiny", DType::kQ8_0, 8);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
  test::TempDir dir;
  MakeModelOptions o;
  o.preset = "tiny";
  o.dtype = DType::kQ8_0;
  o.seed = 7;
  o.out_path = dir.file("t.gguf");
  MakeModelSummary s = make_model(o);
  EXPECT_EQ(test::read_bytes(o.out_path), a);
  EXPECT_EQ(s.file_bytes, a.size());
  EXPECT_EQ(s.n_vocab, 512);
}

TEST(MakeModel, WritesLlamaCppKeysAndWeightStatistics) {
  auto bytes = model_bytes("tiny", DType::kF32, 1);
  GgufFile g(bytes.data(), bytes.size());
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_int("general.file_type"), 0);
  EXPECT_EQ(g.get_int("llama.context_length"), 512);
  EXPECT_EQ(g.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(g.get_int("llama.block_count"), 2);
  EXPECT_EQ(g.get_int("llama.feed_forward_length"), 128);
  EXPECT_EQ(g.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(g.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(g.get_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(g.get_int("llama.vocab_size"), 512);
  EXPECT_FLOAT_EQ(static_cast<float>(g.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.array_length("tokenizer.ggml.tokens"), 512u);
  EXPECT_EQ(g.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(g.find_tensor("blk.1.attn_k.weight")->ne, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(g.find_tensor("output.weight")->ne, (std::vector<int64_t>{64, 512}));
  double mean, std;
  mean_std(dequantized(g, "token_embd.weight"), &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std, 0.25, 0.01);  // 2/sqrt(64)
  mean_std(dequantized(g, "blk.0.ffn_down.weight"), &mean, &std);
  EXPECT_NEAR(std, 1.0 / std::sqrt(128.0), 0.005);
  mean_std(dequantized(g, "blk.1.attn_norm.weight"), &mean, &std);
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(std, 0.1, 0.03);
  // Different tensors get different streams.
  EXPECT_NE(dequantized(g, "blk.0.ffn_gate.weight"), dequantized(g, "blk.0.ffn_up.weight"));
}

TEST(MakeModel, QuantizedFilesHoldTheQuantizedF32Weights) {
  auto f32 = model_bytes("tiny", DType::kF32, 3);
  GgufFile gf(f32.data(), f32.size());
  for (DType dt : {DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    auto q = model_bytes("tiny", dt, 3);
    GgufFile gq(q.data(), q.size());
    EXPECT_EQ(gq.get_int("general.file_type"), gguf_file_type(dt));
    EXPECT_EQ(gq.find_tensor("blk.0.attn_norm.weight")->ggml_type, 0u);  // norms stay f32
    std::vector<float> ref = dequantized(gf, "blk.0.attn_q.weight");
    std::vector<float> got = dequantized(gq, "blk.0.attn_q.weight");
    ASSERT_EQ(ref.size(), got.size());
    // Same values, to within the dtype's resolution (relative to the row's scale).
    std::vector<uint8_t> expect(dtype_row_bytes(dt, static_cast<int64_t>(ref.size())));
    cpu::quantize_row(dt, ref.data(), expect.data(), static_cast<int64_t>(ref.size()));
    const GgufTensorInfo* t = gq.find_tensor("blk.0.attn_q.weight");
    EXPECT_EQ(std::vector<uint8_t>(gq.tensor_data(*t), gq.tensor_data(*t) + t->nbytes), expect) << dtype_name(dt);
  }
}

TEST(MakeModel, EveryPresetFeatureLoadsWithTheRightShapes) {
  test::TempDir dir;
  for (const char* preset :
       {"tiny", "mixtral-tiny", "tiny-qwen2", "tiny-tied", "tiny-llama3", "tiny-mha64", "tiny-qwen3", "tiny-qwen3moe",
        "tiny-qwen2moe", "tiny-gemma2", "tiny-gemma3", "tiny-phi3", "tiny-deepseek2", "tiny-deepseek2-lite"}) {
    for (DType dt : {DType::kF32, DType::kQ4_0}) {
      MakeModelOptions o;
      o.preset = preset;
      o.dtype = dt;
      o.out_path = dir.file(std::string(preset) + ".gguf");
      make_model(o);
      auto m = load_gguf_model(o.out_path);
      const ModelPreset& p = find_model_preset(preset);
      const ModelConfig& want = p.config;  // the description the file must read back as
      const ModelConfig& c = m->config;
      SCOPED_TRACE(preset);
      EXPECT_EQ(c.summary(), want.summary());
      EXPECT_EQ(c.arch, want.arch);
      EXPECT_EQ(c.n_vocab, want.n_vocab);
      EXPECT_EQ(c.n_embd, want.n_embd);
      EXPECT_EQ(c.n_layer, want.n_layer);
      EXPECT_EQ(c.n_head, want.n_head);
      EXPECT_EQ(c.n_kv_head, want.n_kv_head);
      EXPECT_EQ(c.head_dim, want.head_dim);
      EXPECT_EQ(c.n_ctx_train, want.n_ctx_train);
      EXPECT_EQ(c.n_expert, want.n_expert);
      EXPECT_EQ(c.n_expert_used, want.n_expert_used);
      EXPECT_EQ(c.qkv_bias, want.qkv_bias);
      EXPECT_EQ(c.tied_embeddings, want.tied_embeddings);
      EXPECT_FLOAT_EQ(c.rope_theta, want.rope_theta);
      EXPECT_FLOAT_EQ(c.rms_eps, want.rms_eps);
      const bool pairs = want.arch == Architecture::kLlama || want.arch == Architecture::kDeepseek2;
      EXPECT_EQ(c.rope_style, pairs ? RopeStyle::kInterleaved : RopeStyle::kHalf);
      EXPECT_EQ(c.rope_style, want.rope_style);
      EXPECT_EQ(c.qk_norm, want.qk_norm);
      EXPECT_EQ(c.n_ff, want.n_ff);
      EXPECT_EQ(c.n_ff_dense, want.n_ff_dense);
      EXPECT_EQ(c.n_ff_shared, want.n_ff_shared);
      EXPECT_EQ(c.n_expert_shared, want.n_expert_shared);
      EXPECT_EQ(c.shared_expert_gated, want.shared_expert_gated);
      // llama.cpp's choice per architecture, or the file's key (DeepSeek).
      EXPECT_EQ(c.norm_topk_prob, want.norm_topk_prob);
      EXPECT_EQ(c.sliding_window, want.sliding_window);
      EXPECT_EQ(c.sliding_layers, want.sliding_layers);
      EXPECT_FLOAT_EQ(c.embd_scale, want.embd_scale);
      EXPECT_FLOAT_EQ(c.rope_theta_swa, want.rope_theta_swa);
      EXPECT_FLOAT_EQ(c.attn_softcap, want.attn_softcap);
      EXPECT_FLOAT_EQ(c.final_softcap, want.final_softcap);
      EXPECT_EQ(c.post_norms, want.post_norms);
      if (want.rope_scaling == RopeScaling::kLlama3) {
        // Kept as llama.cpp keeps it: divisors in rope_freqs.weight, which
        // the loader applies (Llama3RopeFactorsMatchTheConfigFormula).
        EXPECT_NE(m->find("rope_freqs.weight"), nullptr);
      } else {
        EXPECT_EQ(c.rope_scaling, want.rope_scaling);
        EXPECT_FLOAT_EQ(c.rope_factor, want.rope_factor);
        EXPECT_EQ(c.rope_inv_freq(), want.rope_inv_freq());
      }
      const int64_t q_dim = want.n_head * want.head_dim, kv_dim = want.n_kv_head * want.head_dim;
      if (want.mla()) {
        EXPECT_TRUE(c.mla());
        EXPECT_EQ(c.kv_lora_rank, want.kv_lora_rank);
        EXPECT_EQ(c.q_lora_rank, want.q_lora_rank);
        EXPECT_EQ(c.qk_nope_dim, want.qk_nope_dim);
        EXPECT_EQ(c.qk_rope_dim, want.qk_rope_dim);
        EXPECT_EQ(c.v_head_dim, want.v_head_dim);
        EXPECT_EQ(c.n_dense_lead, want.n_dense_lead);
        EXPECT_EQ(c.router_scoring, want.router_scoring);
        EXPECT_EQ(c.router_bias, want.router_bias);
        EXPECT_EQ(c.n_expert_groups, want.n_expert_groups);
        EXPECT_EQ(c.n_expert_groups_used, want.n_expert_groups_used);
        EXPECT_FLOAT_EQ(c.routed_scale, want.routed_scale);
        EXPECT_FLOAT_EQ(c.yarn_mscale_all_dim, want.yarn_mscale_all_dim);
        EXPECT_FLOAT_EQ(c.query_scale(), want.query_scale());
        EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
        EXPECT_EQ(m->find("blk.1.exp_probs_b.bias") != nullptr, want.router_bias);
        EXPECT_EQ(m->find("blk.0.ffn_gate_inp.weight"), nullptr);  // the leading dense layer
        EXPECT_EQ(m->get("blk.0.ffn_up.weight").shape, (std::vector<int64_t>{want.n_ff_dense, want.n_embd}));
        EXPECT_EQ(m->get("blk.1.attn_kv_a_mqa.weight").shape,
                  (std::vector<int64_t>{want.kv_lora_rank + want.qk_rope_dim, want.n_embd}));
        EXPECT_EQ(m->find("blk.1.attn_k_b.weight") != nullptr, p.split_kv_b);
        EXPECT_EQ(m->get("blk.1.attn_kv_a_mqa.weight").dtype, dt);
      } else if (want.arch == Architecture::kPhi3) {
        EXPECT_TRUE(c.fused_qkv && c.fused_gate_up);
        EXPECT_EQ(m->get("blk.1.attn_qkv.weight").dtype, dt);
        EXPECT_EQ(m->get("blk.1.attn_qkv.weight").shape, (std::vector<int64_t>{q_dim + 2 * kv_dim, want.n_embd}));
        EXPECT_EQ(m->get("blk.0.ffn_up.weight").shape, (std::vector<int64_t>{2 * want.n_ff, want.n_embd}));
        EXPECT_EQ(c.rope_scaling, RopeScaling::kLongRope);
        EXPECT_EQ(c.rope_original_ctx, want.rope_original_ctx);
        EXPECT_EQ(c.rope_long_factors, want.rope_long_factors);
        EXPECT_EQ(c.rope_short_factors, want.rope_short_factors);
        EXPECT_FLOAT_EQ(c.rope_attn_factor, longrope_attn_factor(want.n_ctx_train, want.rope_original_ctx));
        EXPECT_GT(c.rope_attn_factor, 1.0f);
        EXPECT_EQ(c.rope_inv_freq(want.n_ctx_train), want.rope_inv_freq(want.n_ctx_train));
      } else {
        EXPECT_EQ(m->get("blk.1.attn_q.weight").dtype, dt);
        EXPECT_EQ(m->get("blk.1.attn_q.weight").shape, (std::vector<int64_t>{q_dim, want.n_embd}));
      }
      if (want.is_moe()) {
        const std::string b = "blk." + std::to_string(want.n_dense_lead) + ".";
        EXPECT_EQ(m->get(b + "ffn_up_exps.weight").shape,
                  (std::vector<int64_t>{want.n_expert, want.n_ff, want.n_embd}));
        EXPECT_EQ(m->get(b + "ffn_gate_inp.weight").dtype, DType::kF32);
      }
      if (want.qk_norm) {
        EXPECT_EQ(m->get("blk.0.attn_k_norm.weight").shape, std::vector<int64_t>{want.head_dim});
      }
      if (want.shared_expert_gated) {
        EXPECT_EQ(m->get("blk.1.ffn_down_shexp.weight").shape, (std::vector<int64_t>{want.n_embd, want.n_ff_shared}));
        EXPECT_EQ(m->get("blk.1.ffn_gate_inp_shexp.weight").shape, std::vector<int64_t>{want.n_embd});
      }
      // Every weight counted: the tensors' elements less the RoPE tables.
      const GgufFile file(o.out_path);
      int64_t elements = 0;
      for (const auto& t : file.tensors()) {
        if (t.name.rfind("rope_factors_", 0) == 0 || t.name == "rope_freqs.weight") continue;
        int64_t n = 1;
        for (int64_t d : t.ne) n *= d;
        elements += n;
      }
      EXPECT_EQ(parameter_count(want), elements);
    }
  }
}

TEST(MakeModel, Llama3RopeFactorsMatchTheConfigFormula) {
  auto bytes = model_bytes("tiny-llama3", DType::kF32, 0);
  GgufFile g(bytes.data(), bytes.size());
  EXPECT_EQ(g.get_string("parallm.rope_scaling.type"), "llama3");
  EXPECT_EQ(g.get_int("parallm.rope_scaling.original_context_length"), 64);
  EXPECT_FALSE(g.has("llama.rope.scaling.type"));  // llama.cpp would assert on "llama3"
  std::vector<float> factors = dequantized(g, "rope_freqs.weight");
  ModelConfig plain;
  plain.n_vocab = 512, plain.n_embd = 64, plain.n_layer = 2, plain.n_head = 4, plain.n_ff = 128;
  plain.rope_theta = static_cast<float>(g.get_float("llama.rope.freq_base"));
  plain.finalize();
  ModelConfig scaled = plain;
  scaled.rope_scaling = RopeScaling::kLlama3;
  scaled.rope_factor = static_cast<float>(g.get_float("parallm.rope_scaling.factor"));
  scaled.rope_low_freq_factor = static_cast<float>(g.get_float("parallm.rope_scaling.low_freq_factor"));
  scaled.rope_high_freq_factor = static_cast<float>(g.get_float("parallm.rope_scaling.high_freq_factor"));
  scaled.rope_original_ctx = 64;
  std::vector<float> base = plain.rope_inv_freq(), want = scaled.rope_inv_freq();
  ASSERT_EQ(factors.size(), 8u);
  std::set<float> distinct(factors.begin(), factors.end());
  EXPECT_GE(distinct.size(), 3u);  // unscaled, scaled and smoothed bands all present
  for (size_t i = 0; i < factors.size(); ++i) EXPECT_NEAR(base[i] / factors[i], want[i], 1e-6 * want[i]) << i;
}

TEST(MakeModel, GeneratedVocabularyIsAReachableSentencePieceVocab) {
  for (int64_t n : {300, 512, 32000}) {
    SpmVocab v = generate_spm_vocab(n);
    ASSERT_EQ(static_cast<int64_t>(v.tokens.size()), n);
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.tokens[1], "<s>");
    EXPECT_EQ(v.tokens[2], "</s>");
    EXPECT_EQ(v.tokens[3 + 0x0A], "<0x0A>");
    EXPECT_EQ(v.types[3 + 0xFF], 6);
    std::set<std::string> all(v.tokens.begin(), v.tokens.end());
    EXPECT_EQ(all.size(), v.tokens.size());
    for (size_t i = 259; i < v.tokens.size(); ++i) {
      const std::string& t = v.tokens[i];
      EXPECT_EQ(v.types[i], 1);
      EXPECT_LT(v.scores[i], v.scores[i - 1] + (i == 259 ? 1.0f : 0.0f));
      // Dropping the last UTF-8 character leaves a piece of the vocabulary.
      size_t cut = t.size() - 1;
      while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) --cut;
      if (cut > 0) {
        EXPECT_TRUE(all.count(t.substr(0, cut))) << t;
      }
    }
  }
  EXPECT_THROW(generate_spm_vocab(100), InputError);
}

TEST(MakeModel, VocabularyCanBeCopiedFromAnotherGguf) {
  const std::string src = std::string(PARALLM_SHARED_DIR) + "/models/vocab/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(src)) GTEST_SKIP() << src << " not present";
  MakeModelOptions o;
  o.preset = "tiny";
  o.vocab_from = src;
  auto bytes = build_model_gguf(o).to_bytes();
  GgufFile g(bytes.data(), bytes.size());
  GgufFile s(src);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens"), s.get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(g.get_float_array("tokenizer.ggml.scores"), s.get_float_array("tokenizer.ggml.scores"));
  const int64_t n = static_cast<int64_t>(s.array_length("tokenizer.ggml.tokens"));
  EXPECT_EQ(g.get_int("llama.vocab_size"), n);
  EXPECT_EQ(g.find_tensor("token_embd.weight")->ne, (std::vector<int64_t>{64, n}));
}

TEST(MakeModel, BadRequestsAreInputErrors) {
  MakeModelOptions o;
  o.preset = "huge";
  try {
    build_model_gguf(o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("llama-gqa-250m"), std::string::npos) << e.what();
  }
  o.preset = "tiny";
  o.dtype = DType::kQ4_K;  // rows of 64 are not a multiple of 256
  EXPECT_THROW(build_model_gguf(o), InputError);
  o.dtype = DType::kF32;
  o.vocab_from = "/no/such/file.gguf";
  EXPECT_THROW(build_model_gguf(o), InputError);
  o.vocab_from = "";
  EXPECT_THROW(make_model(o), InputError);  // no output path
}

TEST(MakeModel, CommandLineWritesTheSameFile) {
  if (!std::filesystem::exists(PARALLM_BINARY)) GTEST_SKIP() << "parallm binary not built";
  test::TempDir dir;
  const std::string out = dir.file("cli.gguf");
  std::string cmd =
      std::string(PARALLM_BINARY) + " make-model --preset tiny --dtype q4_0 --seed 5 --out " + out + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(test::read_bytes(out), model_bytes("tiny", DType::kQ4_0, 5));
  std::string bad = std::string(PARALLM_BINARY) + " make-model --preset nope --out " + out + " 2>/dev/null";
  int rc = std::system(bad.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

}  // namespace
}  // namespace parallm
