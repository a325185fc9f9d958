// Exact parameter counts, weight bytes and KV bytes per token for public
// configs. Reference counts are the totals published for each checkpoint
// (the "params" of the Hugging Face model pages, from the safetensors headers);
// the planner derives them from the config alone.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "planner/hardware.h"
#include "planner/memory_model.h"
#include "planner/model_catalog.h"
#include "planner/model_source.h"
#include "util/check.h"

namespace parallm::planner {
namespace {

const std::string kData = std::string(PARALLM_SOURCE_DIR) + "/tests/planner/data/";

int64_t total(const char* name) { return count_params(catalog_model(name)).total; }

TEST(ModelSpec, ExactParameterCountsOfDenseModels) {
  EXPECT_EQ(total("llama-2-7b"), 6738415616);
  EXPECT_EQ(total("llama-2-13b"), 13015864320);
  EXPECT_EQ(total("llama-2-70b"), 68976648192);
  EXPECT_EQ(total("llama-3.1-8b"), 8030261248);
  EXPECT_EQ(total("llama-3.1-70b"), 70553706496);
  EXPECT_EQ(total("mistral-7b"), 7241732096);
  EXPECT_EQ(total("qwen2.5-7b"), 7615616512);
  EXPECT_EQ(total("mixtral-8x7b"), 46702792704);
}

TEST(ModelSpec, LargeAndMoEModelsMatchTheirCards) {
  // Cards state rounded figures: 405B; 14.7B; 32.5B; 72.7B; 141B (39B active);
  // 30.5B (3.3B active); 235B (22B active); DeepSeek-V3 671B (37B active),
  // without its 14B multi-token-prediction module.
  auto near = [](int64_t v, double ref) { return std::abs(static_cast<double>(v) - ref) / ref; };
  EXPECT_LT(near(total("llama-3.1-405b"), 405.85e9), 0.002);
  EXPECT_LT(near(total("qwen2.5-14b"), 14.77e9), 0.005);
  EXPECT_LT(near(total("qwen2.5-32b"), 32.76e9), 0.005);
  EXPECT_LT(near(total("qwen2.5-72b"), 72.71e9), 0.005);
  EXPECT_LT(near(total("mixtral-8x22b"), 140.6e9), 0.01);
  EXPECT_LT(near(count_params(catalog_model("mixtral-8x22b")).active, 39.2e9), 0.02);
  EXPECT_LT(near(total("qwen3-30b-a3b"), 30.5e9), 0.01);
  EXPECT_LT(near(count_params(catalog_model("qwen3-30b-a3b")).active, 3.3e9), 0.03);
  EXPECT_LT(near(total("qwen3-235b-a22b"), 235.1e9), 0.01);
  EXPECT_LT(near(count_params(catalog_model("qwen3-235b-a22b")).active, 22.2e9), 0.03);
  EXPECT_LT(near(total("deepseek-v3"), 671e9), 0.005);
  EXPECT_LT(near(count_params(catalog_model("deepseek-v3")).active, 37e9), 0.03);
  // Mixtral active = total minus the 6 unused experts of each of 32 layers:
  // 46702792704 - 6*32*(3*4096*14336) = 12879925248 (the card's "12.9B").
  EXPECT_EQ(count_params(catalog_model("mixtral-8x7b")).active, 46702792704 - 6LL * 32 * 3 * 4096 * 14336);
}

TEST(ModelSpec, KvBytesPerToken) {
  EXPECT_EQ(kv_bytes_per_token(catalog_model("llama-2-70b"), 2), 327680);   // 2*80*8*128*2
  EXPECT_EQ(kv_bytes_per_token(catalog_model("llama-3.1-8b"), 2), 131072);  // 2*32*8*128*2
  EXPECT_EQ(kv_bytes_per_token(catalog_model("llama-2-7b"), 2), 524288);    // MHA: 2*32*32*128*2
  EXPECT_EQ(kv_bytes_per_token(catalog_model("qwen2.5-7b"), 2), 57344);     // 2*28*4*128*2
  // MLA keeps the 512-wide latent plus the 64-wide rope key: 61*(512+64)*2.
  EXPECT_EQ(kv_bytes_per_token(catalog_model("deepseek-v3"), 2), 70272);
  EXPECT_EQ(kv_bytes_per_token(catalog_model("llama-2-70b"), 1), 163840);  // fp8 KV
}

TEST(ModelSpec, WeightBytesPerFormat) {
  ModelSpec m = catalog_model("llama-2-70b");
  ParamCounts p = count_params(m);
  EXPECT_DOUBLE_EQ(model_weight_bytes(m, p, parse_weight_format("fp16")), 2.0 * 68976648192);
  EXPECT_DOUBLE_EQ(model_weight_bytes(m, p, parse_weight_format("int8")), 68976648192.0);
  EXPECT_DOUBLE_EQ(model_weight_bytes(m, p, parse_weight_format("int4")), 68976648192.0 * 4.25 / 8);
  EXPECT_DOUBLE_EQ(model_weight_bytes(m, p, parse_weight_format("q4_0")), 68976648192.0 * 18 / 32);
  // The playbook's round figures: 70B fp16 ~ 140 GB, int4 ~ 35 GB.
  EXPECT_NEAR(model_weight_bytes(m, p, parse_weight_format("fp16")) / 1e9, 140, 3);
  EXPECT_NEAR(model_weight_bytes(m, p, parse_weight_format("int4")) / 1e9, 35, 2);
  m.file_weight_bytes = 12345;  // a GGUF file's exact size wins
  EXPECT_DOUBLE_EQ(model_weight_bytes(m, p, parse_weight_format("q4_k")), 12345);
}

void expect_same_arch(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(count_params(a).total, count_params(b).total);
  EXPECT_EQ(count_params(a).active, count_params(b).active);
  EXPECT_EQ(kv_bytes_per_token(a, 2), kv_bytes_per_token(b, 2));
}

TEST(HfConfig, ParsesConfigsLikeTheCatalog) {
  expect_same_arch(load_model_spec(kData + "llama-3.1-8b-config.json"), catalog_model("llama-3.1-8b"));
  expect_same_arch(load_model_spec(kData + "qwen2.5-7b-config.json"), catalog_model("qwen2.5-7b"));
  expect_same_arch(load_model_spec(kData + "mixtral-8x7b-config.json"), catalog_model("mixtral-8x7b"));
  expect_same_arch(load_model_spec(kData + "deepseek-v3-config.json"), catalog_model("deepseek-v3"));
  expect_same_arch(load_model_spec(kData + "qwen3-30b-a3b-config.json"), catalog_model("qwen3-30b-a3b"));
}

// The planner reads config.json with the engine's reader, and plans what the
// engine would refuse (here an architecture it does not run) by its shapes.
TEST(HfConfig, PlansWhatTheEngineRefusesByItsShapes) {
  std::ifstream f(kData + "llama-3.1-8b-config.json");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  const size_t at = text.find("\"llama\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "\"starcoder2\"");
  expect_same_arch(model_from_hf_config_text(text, "x.json"), catalog_model("llama-3.1-8b"));
}

TEST(HfConfig, BadInputIsOneClearError) {
  try {
    load_model_spec(kData + "missing-heads-config.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model_spec(kData + "broken-config.json"), InputError);
  EXPECT_THROW(load_model_spec("no-such-model-7b"), InputError);
  EXPECT_THROW(model_from_hf_config_text("[1,2]", "x"), InputError);
  EXPECT_THROW(model_from_hf_config_text(R"({"hidden_size": "big"})", "x"), InputError);
  EXPECT_THROW(parse_weight_format("int3"), InputError);
  EXPECT_THROW(parse_kv_dtype_bytes("fp4"), InputError);
  EXPECT_THROW(catalog_gpu("GTX-480"), InputError);
}

TEST(Hardware, CatalogHasTheIssueDevices) {
  for (const char* g : {"A100-40G", "A100-80G", "H100-SXM", "H100-PCIe", "H200", "B200", "L40S", "L4", "A10",
                        "RTX-4090", "RTX-3090", "RTX-PRO-6000", "V100", "MI300X", "cpu"})
    EXPECT_NO_THROW(catalog_gpu(g)) << g;
  EXPECT_EQ(catalog_gpu("h100sxm").name, "H100-SXM");
  GpuSpec g;
  ASSERT_TRUE(match_gpu_name("NVIDIA H200", 150e9, &g));
  EXPECT_EQ(g.name, "H200");
  EXPECT_DOUBLE_EQ(g.memory_bytes, 150e9);
  ASSERT_TRUE(match_gpu_name("NVIDIA A100-SXM4-80GB", 85e9, &g));
  EXPECT_EQ(g.name, "A100-80G");
  EXPECT_FALSE(match_gpu_name("Matrox G200", 0, &g));
}

}  // namespace
}  // namespace parallm::planner
