// make-model's llama.cpp mixes (--dtype q4_k_m, ...): every tensor's type,
// read back from the written GGUF, against expectations restated here from
// llama.cpp's quantizer (src/llama-quant.cpp, llama_tensor_get_type_impl and
// tensor_type_fallback), independently of modelgen/quant_mix.cpp's table;
// general.file_type as llama.h's LLAMA_FTYPE values; and the files load and
// generate through the binary.
#include "modelgen/quant_mix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "common/command_output.h"
#include "loader/gguf_reader.h"
#include "loader/model_file.h"
#include "modelgen/make_model.h"
#include "safetensors_test_writer.h"
#include "util/check.h"

namespace parallm {
namespace {

const std::string kBin = PARALLM_BINARY;

// llama.cpp's published use_more_bits rule, layer i of n.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// A Llama of 256-wide rows: n_layer layers, 4 heads over n_kv_head KV heads.
ModelPreset llama_shape(int64_t n_layer, int64_t n_kv_head, int64_t n_ff, int64_t n_expert = 0) {
  ModelPreset p;
  p.name = "mix-test";
  p.description = "test shape";
  ModelConfig& c = p.config;
  c.arch = Architecture::kLlama;
  apply_architecture_defaults(&c);
  c.n_vocab = 512;
  c.n_embd = 256;
  c.n_layer = n_layer;
  c.n_head = 4;
  c.n_kv_head = n_kv_head;
  c.n_ff = n_ff;
  c.n_ctx_train = 512;
  if (n_expert > 0) {
    c.n_expert = n_expert;
    c.n_expert_used = 2;
  }
  complete_generated_config(&c);
  return p;
}

std::string write_model(const test::TempDir& dir, const ModelPreset* shape, const std::string& preset,
                        const std::string& type, const std::string& file) {
  MakeModelOptions o;
  if (shape != nullptr) o.shape = shape;
  o.preset = preset;
  set_make_model_type(type, &o);
  o.seed = 5;
  o.out_path = dir.file(file);
  make_model(o);
  return o.out_path;
}

// Every tensor's ggml type, by name.
std::map<std::string, uint32_t> tensor_types(const std::string& path) {
  GgufFile g(path);
  std::map<std::string, uint32_t> t;
  for (const auto& info : g.tensors()) t[info.name] = info.ggml_type;
  return t;
}

uint32_t id(GgmlType t) { return static_cast<uint32_t>(t); }

// Compares every tensor of the file with `want` (which must name them all).
void expect_types(const std::string& path, const std::map<std::string, uint32_t>& want) {
  const auto got = tensor_types(path);
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [name, type] : got) {
    auto it = want.find(name);
    ASSERT_NE(it, want.end()) << name << " not expected";
    EXPECT_EQ(ggml_type_name(type), ggml_type_name(it->second)) << name;
  }
}

test::CommandResult generate(const std::string& model) {
  return test::run_command(kBin + " generate --model " + model + " --prompt 'Once upon a time' -n 6 --threads 2");
}

TEST(QuantMix, NamesParseAndPlainTypesStayPlain) {
  MakeModelOptions o;
  set_make_model_type("Q4_K_M", &o);
  EXPECT_EQ(o.mix, QuantMix::kQ4_K_M);
  EXPECT_EQ(make_model_type_name(o), "q4_k_m");
  set_make_model_type("q4_k", &o);  // a plain type clears the mix
  EXPECT_EQ(o.mix, QuantMix::kNone);
  EXPECT_EQ(o.dtype, DType::kQ4_K);
  set_make_model_type("q2_k", &o);
  EXPECT_EQ(o.mix, QuantMix::kNone);
  EXPECT_EQ(o.dtype, DType::kQ2_K);
  set_make_model_type("q2_k_mix", &o);
  EXPECT_EQ(o.mix, QuantMix::kQ2_K);
  try {
    set_make_model_type("q4_k_x", &o);
    FAIL();
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("q4_k_x"), std::string::npos) << m;
    EXPECT_NE(m.find("iq4_xs"), std::string::npos) << m;
    EXPECT_NE(m.find("q5_k_m"), std::string::npos) << m;
  }
}

// The case: 16 layers of 256-wide rows, Q4_K_M, every tensor.
TEST(QuantMix, Q4KMGivesEveryTensorLlamaCppsType) {
  test::TempDir dir;
  const int n = 16;
  const ModelPreset shape = llama_shape(n, 1, 512);
  const std::string path = write_model(dir, &shape, "", "q4_k_m", "m.gguf");
  // Layers use_more_bits picks out of 16, as the published rule gives them.
  std::set<int> more;
  for (int i = 0; i < n; ++i) {
    if (use_more_bits(i, n)) more.insert(i);
  }
  EXPECT_EQ(more, (std::set<int>{0, 1, 4, 7, 10, 13, 14, 15}));
  const uint32_t q4k = id(GgmlType::kQ4_K), q6k = id(GgmlType::kQ6_K), f32 = id(GgmlType::kF32);
  std::map<std::string, uint32_t> want = {
      {"token_embd.weight", q4k}, {"output.weight", q6k}, {"output_norm.weight", f32}};
  for (int i = 0; i < n; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const uint32_t bumped = more.count(i) ? q6k : q4k;
    want[b + "attn_norm.weight"] = f32;
    want[b + "ffn_norm.weight"] = f32;
    want[b + "attn_q.weight"] = q4k;
    want[b + "attn_k.weight"] = q4k;
    want[b + "attn_v.weight"] = bumped;
    want[b + "attn_output.weight"] = q4k;
    want[b + "ffn_gate.weight"] = q4k;
    want[b + "ffn_up.weight"] = q4k;
    want[b + "ffn_down.weight"] = bumped;
  }
  expect_types(path, want);
  GgufFile g(path);
  EXPECT_EQ(g.get_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(g.get_int("general.quantization_version"), 2);
  auto m = load_gguf_model(path);
  EXPECT_EQ(m->get("blk.7.ffn_down.weight").dtype, DType::kQ6_K);
  EXPECT_EQ(m->get("blk.8.ffn_down.weight").dtype, DType::kQ4_K);
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  const auto r = generate(path);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
}

// Every mix through the binary on tiny-256 (2 layers, 4 heads over 2 KV
// heads, rows of 256 and 512): general.file_type, the bumped tensors of each
// mix as llama.cpp's rules give them at 2 layers (use_more_bits picks layer
// 1 only; n/8 = n/16 = 0), and generation.
TEST(QuantMix, EveryMixIsWrittenLoadedAndGenerates) {
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  using G = GgmlType;
  struct Want {
    const char* name;
    int file_type;
    G base, attn_v0, attn_v1, attn_output, ffn_down0, ffn_down1;
  };
  const Want mixes[] = {
      {"q2_k_mix", 10, G::kQ2_K, G::kQ3_K, G::kQ3_K, G::kQ3_K, G::kQ3_K, G::kQ3_K},  // GQA 2 < 4
      {"q2_k_s", 21, G::kQ2_K, G::kQ2_K, G::kQ2_K, G::kQ2_K, G::kQ2_K, G::kQ2_K},
      {"q3_k_s", 11, G::kQ3_K, G::kQ3_K, G::kQ3_K, G::kQ3_K, G::kQ3_K, G::kQ3_K},
      {"q3_k_m", 12, G::kQ3_K, G::kQ5_K, G::kQ5_K, G::kQ4_K, G::kQ4_K, G::kQ4_K},
      {"q3_k_l", 13, G::kQ3_K, G::kQ5_K, G::kQ5_K, G::kQ5_K, G::kQ5_K, G::kQ5_K},
      {"q4_k_s", 14, G::kQ4_K, G::kQ5_K, G::kQ5_K, G::kQ4_K, G::kQ4_K, G::kQ4_K},
      {"q4_k_m", 15, G::kQ4_K, G::kQ4_K, G::kQ6_K, G::kQ4_K, G::kQ4_K, G::kQ6_K},
      {"q5_k_s", 16, G::kQ5_K, G::kQ5_K, G::kQ5_K, G::kQ5_K, G::kQ5_K, G::kQ5_K},
      {"q5_k_m", 17, G::kQ5_K, G::kQ5_K, G::kQ6_K, G::kQ5_K, G::kQ5_K, G::kQ6_K},
  };
  test::TempDir dir;
  for (const Want& w : mixes) {
    SCOPED_TRACE(w.name);
    const std::string out = dir.file(std::string(w.name) + ".gguf");
    const auto made =
        test::run_command(kBin + " make-model --preset tiny-256 --dtype " + w.name + " --seed 3 --out " + out);
    ASSERT_EQ(made.code, 0) << made.err;
    EXPECT_NE(made.err.find(w.name), std::string::npos) << made.err;
    GgufFile g(out);
    EXPECT_EQ(g.get_int("general.file_type"), w.file_type);
    auto t = tensor_types(out);
    EXPECT_EQ(ggml_type_name(t["output.weight"]), "q6_k");
    EXPECT_EQ(ggml_type_name(t["token_embd.weight"]), ggml_type_name(id(w.base)));
    for (const char* same : {"attn_q", "attn_k", "ffn_gate", "ffn_up"}) {
      for (int l = 0; l < 2; ++l) {
        const std::string name = "blk." + std::to_string(l) + "." + same + ".weight";
        EXPECT_EQ(ggml_type_name(t[name]), ggml_type_name(id(w.base))) << name;
      }
    }
    EXPECT_EQ(ggml_type_name(t["blk.0.attn_v.weight"]), ggml_type_name(id(w.attn_v0)));
    EXPECT_EQ(ggml_type_name(t["blk.1.attn_v.weight"]), ggml_type_name(id(w.attn_v1)));
    EXPECT_EQ(ggml_type_name(t["blk.0.attn_output.weight"]), ggml_type_name(id(w.attn_output)));
    EXPECT_EQ(ggml_type_name(t["blk.1.attn_output.weight"]), ggml_type_name(id(w.attn_output)));
    EXPECT_EQ(ggml_type_name(t["blk.0.ffn_down.weight"]), ggml_type_name(id(w.ffn_down0)));
    EXPECT_EQ(ggml_type_name(t["blk.1.ffn_down.weight"]), ggml_type_name(id(w.ffn_down1)));
    const auto r = generate(out);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
  }
}

// Rows that are not whole 256-value super-blocks: llama.cpp's fallback
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K / Q3_K -> Q4_0) and an
// output of such rows Q8_0 instead of Q6_K.
TEST(QuantMix, RowsOfNoWholeSuperBlockFallBack) {
  test::TempDir dir;
  using G = GgmlType;
  // ffn_down's rows are n_ff = 320 values; every other row is 256 wide.
  const int n = 8;
  const ModelPreset shape = llama_shape(n, 2, 320);
  const std::string path = write_model(dir, &shape, "", "q4_k_m", "ff320.gguf");
  auto t = tensor_types(path);
  for (int i = 0; i < n; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(ggml_type_name(t[b + "ffn_down.weight"]), use_more_bits(i, n) ? "q8_0" : "q5_0") << i;
    EXPECT_EQ(ggml_type_name(t[b + "attn_v.weight"]), use_more_bits(i, n) ? "q6_k" : "q4_k") << i;
    EXPECT_EQ(ggml_type_name(t[b + "ffn_up.weight"]), "q4_k") << i;  // rows of n_embd = 256
  }
  // tiny: rows of 64 and 128, nothing holds a super-block.
  const std::map<std::string, std::map<std::string, G>> want = {
      {"q4_k_m",
       {{"token_embd.weight", G::kQ5_0},
        {"output.weight", G::kQ8_0},
        {"blk.0.attn_v.weight", G::kQ5_0},
        {"blk.1.attn_v.weight", G::kQ8_0},
        {"blk.1.ffn_down.weight", G::kQ8_0},
        {"blk.0.attn_q.weight", G::kQ5_0}}},
      {"q5_k_s", {{"token_embd.weight", G::kQ5_1}, {"output.weight", G::kQ8_0}, {"blk.0.ffn_down.weight", G::kQ5_1}}},
      {"q2_k_mix",
       {{"token_embd.weight", G::kQ4_0}, {"blk.0.attn_v.weight", G::kQ4_0}, {"blk.0.ffn_down.weight", G::kQ4_0}}},
      {"q3_k_l", {{"blk.0.attn_v.weight", G::kQ5_1}, {"blk.0.attn_q.weight", G::kQ4_0}}},
  };
  for (const auto& [mix, types] : want) {
    SCOPED_TRACE(mix);
    const std::string p = write_model(dir, nullptr, "tiny", mix, "tiny-" + mix + ".gguf");
    auto got = tensor_types(p);
    for (const auto& [name, type] : types) EXPECT_EQ(ggml_type_name(got[name]), ggml_type_name(id(type))) << name;
    load_gguf_model(p);
  }
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  for (const std::string& f : {path, dir.file("tiny-q4_k_m.gguf")}) {
    const auto r = generate(f);
    EXPECT_EQ(r.code, 0) << f << ": " << r.err;
  }
}

// Eight experts (Mixtral's rule, which llama.cpp applies to any 8-expert
// model): attn_v and attn_k Q8_0, attn_output Q5_K; the experts' ffn_down
// by layer.
TEST(QuantMix, EightExpertModelsGetMixtralsRule) {
  test::TempDir dir;
  const int n = 4;  // use_more_bits picks layers 2 and 3
  const ModelPreset shape = llama_shape(n, 2, 256, /*n_expert=*/8);
  const std::string path = write_model(dir, &shape, "", "q4_k_m", "moe.gguf");
  auto t = tensor_types(path);
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(ggml_type_name(t[b + "attn_v.weight"]), "q8_0");
    EXPECT_EQ(ggml_type_name(t[b + "attn_k.weight"]), "q8_0");
    EXPECT_EQ(ggml_type_name(t[b + "attn_q.weight"]), "q4_k");
    EXPECT_EQ(ggml_type_name(t[b + "attn_output.weight"]), "q5_k");
    EXPECT_EQ(ggml_type_name(t[b + "ffn_down_exps.weight"]), use_more_bits(i, n) ? "q6_k" : "q4_k");
    EXPECT_EQ(ggml_type_name(t[b + "ffn_gate_exps.weight"]), "q4_k");
    EXPECT_EQ(ggml_type_name(t[b + "ffn_gate_inp.weight"]), "f32");
  }
  // Q3_K_L has no 8-expert attn_output rule: the base type.
  const std::string l = write_model(dir, &shape, "", "q3_k_l", "moe-l.gguf");
  EXPECT_EQ(ggml_type_name(tensor_types(l)["blk.0.attn_output.weight"]), "q3_k");
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  const auto r = generate(path);
  EXPECT_EQ(r.code, 0) << r.err;
}

// Layouts without attn_v: Phi-3's fused attn_qkv and DeepSeek's attn_kv_b
// take attn_v's rule (as llama.cpp does); the split attn_k_b / attn_v_b and
// the other MLA projections keep the base type; tied models' token_embd
// takes output's rule. Every preset loads as q4_k_m.
TEST(QuantMix, OtherLayoutsGetTheDocumentedTypes) {
  test::TempDir dir;
  auto types = [&](const std::string& preset) {
    return tensor_types(write_model(dir, nullptr, preset, "q4_k_m", preset + ".gguf"));
  };
  auto phi = types("tiny-phi3");  // rows of 64: Q4_K -> Q5_0, Q6_K -> Q8_0
  EXPECT_EQ(ggml_type_name(phi["blk.0.attn_qkv.weight"]), "q5_0");
  EXPECT_EQ(ggml_type_name(phi["blk.1.attn_qkv.weight"]), "q8_0");
  EXPECT_EQ(ggml_type_name(phi["blk.1.ffn_up.weight"]), "q5_0");
  auto ds = types("tiny-deepseek2");  // 8 experts
  EXPECT_EQ(ggml_type_name(ds["blk.0.attn_kv_b.weight"]), "q8_0");
  EXPECT_EQ(ggml_type_name(ds["blk.0.attn_q_a.weight"]), "q5_0");
  EXPECT_EQ(ggml_type_name(ds["blk.0.attn_kv_a_mqa.weight"]), "q5_0");
  EXPECT_EQ(ggml_type_name(ds["blk.0.attn_output.weight"]), "q5_1");  // Q5_K for 8 experts, rows of 96
  auto lite = types("tiny-deepseek2-lite");
  EXPECT_EQ(ggml_type_name(lite["blk.1.attn_k_b.weight"]), "q5_0");
  EXPECT_EQ(ggml_type_name(lite["blk.1.attn_v_b.weight"]), "q5_0");
  EXPECT_EQ(ggml_type_name(lite["blk.1.attn_q.weight"]), "q5_0");
  auto tied = types("tiny-qwen2");
  EXPECT_EQ(tied.count("output.weight"), 0u);
  EXPECT_EQ(ggml_type_name(tied["token_embd.weight"]), "q8_0");  // output's rule: rows of 64 -> Q8_0
  for (const auto& p : model_presets()) {
    if (p.name == "llama-8b" || p.name == "llama-gqa-250m" || p.name == "llama-110m") continue;  // large
    SCOPED_TRACE(p.name);
    const std::string f = write_model(dir, nullptr, p.name, "q4_k_m", "all-" + p.name + ".gguf");
    auto m = load_gguf_model(f);
    EXPECT_EQ(m->config.n_layer, p.config.n_layer);
  }
}

TEST(QuantMix, BadNameIsOneLineAndExit2) {
  if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "parallm binary not built";
  test::TempDir dir;
  const auto r = test::run_command(kBin + " make-model --preset tiny --dtype q4_k_mm --out " + dir.file("x.gguf"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("q4_k_mm"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("q4_k_m,"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
  const auto help = test::run_command(kBin + " make-model --help");
  EXPECT_NE(help.out.find("q3_k_l"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace parallm
