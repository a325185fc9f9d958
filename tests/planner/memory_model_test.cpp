// The playbook's worked examples, checked on the memory model:
//   70B fp16 ~ 140 GB: doesn't fit one 80 GB card, fits 2 x 80 GB with tp=2
//   and room for KV; int4 ~ 35 GB fits one; 13B fp16 doesn't fit one 24 GB
//   card, fits 2 with tp=2. Plus the per-device arithmetic of a layout.
#include "planner/memory_model.h"

#include <gtest/gtest.h>

#include "planner/hardware.h"
#include "planner/model_catalog.h"

namespace parallm::planner {
namespace {

DeviceMemory mem(const char* model, const char* weights, const char* gpu, Layout l, int64_t len = 4096) {
  ModelSpec m = catalog_model(model);
  return device_memory(m, count_params(m), parse_weight_format(weights), 2, catalog_gpu(gpu), l, MemoryOptions{}, len);
}

TEST(MemoryModel, Llama70BFp16NeedsTwo80GBCards) {
  DeviceMemory one = mem("llama-2-70b", "fp16", "A100-80G", {1, 1, 1, 1});
  EXPECT_FALSE(one.weights_fit);
  EXPECT_FALSE(one.fits);
  DeviceMemory two = mem("llama-2-70b", "fp16", "A100-80G", {1, 2, 1, 1});
  EXPECT_TRUE(two.fits);
  EXPECT_NEAR(two.weights_bytes / 1e9, 69.0, 0.5);  // half of 137.95 GB
  // Room for KV: tens of thousands of tokens (KV per device per token = 163840 B).
  EXPECT_DOUBLE_EQ(two.kv_bytes_per_token, 327680.0 / 2);
  EXPECT_GT(two.kv_capacity_tokens, 20000);
  EXPECT_EQ(two.kv_capacity_tokens, static_cast<int64_t>(two.kv_bytes / two.kv_bytes_per_token));
}

TEST(MemoryModel, Llama70BInt4FitsOne80GBCard) {
  DeviceMemory d = mem("llama-2-70b", "int4", "A100-80G", {1, 1, 1, 1});
  EXPECT_TRUE(d.fits);
  EXPECT_NEAR(d.weights_bytes / 1e9, 36.6, 0.2);
}

TEST(MemoryModel, Llama13BFp16NeedsTwo24GBCards) {
  EXPECT_FALSE(mem("llama-2-13b", "fp16", "RTX-4090", {1, 1, 1, 1}).fits);
  DeviceMemory two = mem("llama-2-13b", "fp16", "RTX-4090", {1, 2, 1, 1});
  EXPECT_TRUE(two.fits);
  EXPECT_GT(two.kv_capacity_tokens, 8 * 2048);  // the document's "dozens of sequences" territory
}

TEST(MemoryModel, TotalsAddUpUnderTheCap) {
  DeviceMemory d = mem("llama-3.1-8b", "bf16", "H100-SXM", {1, 1, 1, 1});
  EXPECT_DOUBLE_EQ(d.total_bytes, d.weights_bytes + d.kv_bytes + d.activation_bytes + d.overhead_bytes);
  EXPECT_NEAR(d.total_bytes, d.usable_bytes, 1.0);
  EXPECT_DOUBLE_EQ(d.usable_bytes, 0.9 * 80.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(d.weights_bytes, 2.0 * 8030261248);
}

TEST(MemoryModel, KvHeadsReplicateBeyondTheirCount) {
  // Qwen2.5-7B has 4 KV heads: at tp=4 each device keeps one, at tp=... the
  // same one head (replicated) since heads cannot be split further.
  ModelSpec m = catalog_model("qwen2.5-7b");
  const double per_head = 2.0 * 28 * 128 * 2;  // K and V of one head over 28 layers, 2 bytes
  EXPECT_DOUBLE_EQ(mem("qwen2.5-7b", "bf16", "A100-80G", {1, 1, 1, 1}).kv_bytes_per_token, 4 * per_head);
  EXPECT_DOUBLE_EQ(mem("qwen2.5-7b", "bf16", "A100-80G", {1, 2, 1, 1}).kv_bytes_per_token, 2 * per_head);
  EXPECT_DOUBLE_EQ(mem("qwen2.5-7b", "bf16", "A100-80G", {1, 4, 1, 1}).kv_bytes_per_token, per_head);
  (void)m;
}

TEST(MemoryModel, MlaLatentIsWholeOnEveryRankAndPipelineSplitsLayers) {
  DeviceMemory tp8 = mem("deepseek-v3", "fp8", "H200", {1, 8, 1, 1});
  EXPECT_DOUBLE_EQ(tp8.kv_bytes_per_token, 61.0 * 576 * 2);
  EXPECT_TRUE(tp8.fits);                                                   // 671 GB fp8 over 8 x 141 GB
  EXPECT_FALSE(mem("deepseek-v3", "fp8", "H100-SXM", {1, 8, 1, 1}).fits);  // 8 x 80 GB is too small
  DeviceMemory pp2 = mem("deepseek-v3", "fp8", "H100-SXM", {1, 8, 2, 1});
  EXPECT_EQ(pp2.layers_per_stage, 31);
  EXPECT_TRUE(pp2.fits);
}

}  // namespace
}  // namespace parallm::planner
