// The device rank model (model/device_llama_model.h) against the CPU model,
// through the same Engine: teacher-forced logits over a prefill chunk and
// decode steps, per preset x weight dtype x KV dtype; greedy tokens of
// stories260K (.bin and .gguf) against llama2.c's reference; tp = 2,
// pp = 2 and ep = 2 on the device against tp = 1. The device is the emulated
// one (emu:N, every build) unless PARALLM_TEST_DEVICE names another kind
// ("cuda" runs the same cases on cuda:0, tools/gpu_check.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/generated_model.h"
#include "engine/engine.h"
#include "engine/rank_devices.h"
#include "util/check.h"

namespace parallm {
namespace {

std::string shared_dir() {
  const char* env = std::getenv("PARALLM_SHARED");
  return env != nullptr ? env : PARALLM_SHARED_DIR;
}

// "emu" or "cuda" (PARALLM_TEST_DEVICE, "cuda:0" accepted too).
std::string device_kind() {
  const char* env = std::getenv("PARALLM_TEST_DEVICE");
  std::string kind = env != nullptr && *env != '\0' ? env : "emu";
  return kind.substr(0, kind.find(':'));
}

// n ranks on the device under test: emu:0,emu:1,...; every CUDA rank on
// cuda:0 (ranks sharing one GPU, host-staged collectives).
std::string device_list(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ",";
    out += device_kind() + ":" + std::to_string(device_kind() == "cuda" ? 0 : i);
  }
  return out;
}

// With PARALLM_TEST_DEVICE=cuda and no usable GPU the device cases skip,
// saying why, unless PARALLM_EXPECT_GPU=1 says there must be one.
#define PARALLM_REQUIRE_TEST_DEVICE()                                                                         \
  do {                                                                                                        \
    if (device_kind() == "cuda") {                                                                            \
      std::string why_;                                                                                       \
      if (engine_gpus(&why_).empty()) {                                                                       \
        const char* expect_ = std::getenv("PARALLM_EXPECT_GPU");                                              \
        if (expect_ != nullptr && std::string(expect_) == "1") FAIL() << "PARALLM_EXPECT_GPU=1 but " << why_; \
        GTEST_SKIP() << "skipped: no CUDA device (" << why_ << ")";                                           \
      }                                                                                                       \
    }                                                                                                         \
  } while (0)

struct Layout {
  int tp = 1, pp = 1, ep = 1;
  int ranks() const { return std::max(tp, ep) * pp; }
};

std::unique_ptr<Engine> make_engine(const std::string& model, const std::string& devices, DType kv, Layout l = {},
                                    const std::string& tokenizer = "") {
  EngineOptions o;
  o.model_path = model;
  o.tokenizer_path = tokenizer;
  o.threads = 1;
  o.ctx_size = 256;
  o.kv_blocks = 40;
  o.kv_dtype = kv;
  o.tp = l.tp;
  o.pp = l.pp;
  o.ep = l.ep;
  o.devices = devices;
  return std::make_unique<Engine>(o);
}

// Logits of a fixed script: sequence A's prompt of 13 tokens in one chunk,
// then a mixed step (A's next token with B's 6-token prompt chunk), then
// decode steps of both. Block tables are scattered on purpose.
std::vector<float> teacher_forced_logits(Engine& e) {
  const int64_t bs = e.block_size();
  std::vector<int32_t> table_a = {7, 2, 30, 11}, table_b = {5, 19, 3, 26};
  auto token = [&](int i) { return static_cast<int32_t>(3 + (i * 37) % (e.config().n_vocab - 3)); };
  std::vector<float> out;
  auto step = [&](ForwardBatch& b) {
    const float* logits = e.forward(b);
    out.insert(out.end(), logits, logits + static_cast<int64_t>(b.logit_rows.size()) * e.config().n_vocab);
  };
  std::vector<int32_t> a, bb;
  for (int i = 0; i < 13; ++i) a.push_back(token(i));
  for (int i = 0; i < 6; ++i) bb.push_back(token(100 + i));
  ForwardBatch b;
  b.add_sequence_tokens(a.data(), 13, 0, 0, table_a.data(), bs, true);
  step(b);
  b.clear();
  const int32_t next_a = token(13);
  b.add_sequence_tokens(&next_a, 1, 13, 0, table_a.data(), bs, true);
  b.add_sequence_tokens(bb.data(), 6, 0, 1, table_b.data(), bs, true);
  step(b);
  for (int s = 0; s < 20; ++s) {
    b.clear();
    const int32_t ta = token(14 + s), tb = token(106 + s);
    b.add_sequence_tokens(&ta, 1, 14 + s, 0, table_a.data(), bs, true);
    b.add_sequence_tokens(&tb, 1, 6 + s, 1, table_b.data(), bs, true);
    step(b);
  }
  return out;
}

// max |a - b| / max |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Case {
  std::string preset;
  DType weights;
  DType kv;
  double tolerance;
};

std::string case_name(const Case& c) {
  return c.preset + " weights " + dtype_name(c.weights) + " kv " + dtype_name(c.kv);
}

const std::string& model_of(const std::string& preset, DType weights) {
  static std::map<std::string, std::string> made;
  const std::string key = preset + "-" + dtype_name(weights);
  auto [it, fresh] = made.try_emplace(key);
  if (fresh) {
    MakeModelOptions o;
    o.preset = preset;
    o.dtype = weights;
    o.seed = 11;
    o.out_path = testing::TempDir() + "/device_" + key + ".gguf";
    make_model(o);
    it->second = o.out_path;
  }
  return it->second;
}

void expect_device_matches_cpu(const Case& c) {
  SCOPED_TRACE(case_name(c));
  const std::string& path = model_of(c.preset, c.weights);
  const std::vector<float> cpu = teacher_forced_logits(*make_engine(path, "cpu:0", c.kv));
  const std::vector<float> dev = teacher_forced_logits(*make_engine(path, device_list(1), c.kv));
  const double err = relative_error(dev, cpu);
  EXPECT_LE(err, c.tolerance) << "max |device - cpu| / max |cpu|";
  std::printf("[ device ] %-40s relative error %.3g (tolerance %.1g)\n", case_name(c).c_str(), err, c.tolerance);
}

// f32 weights and cache: the same arithmetic up to summation order.
TEST(DeviceModel, F32PresetsEqualTheCpuModel) {
  PARALLM_REQUIRE_TEST_DEVICE();
  for (const char* preset : {"tiny", "mixtral-tiny", "tiny-qwen2", "tiny-tied", "tiny-llama3", "tiny-qwen3",
                             "tiny-qwen3moe", "tiny-phi3", "tiny-mha64"}) {
    expect_device_matches_cpu({preset, DType::kF32, DType::kF32, 1e-5});
  }
}

// The other cache dtypes (q8_0 needs 64-wide heads: tiny-mha64). Both
// backends store the same rounding of their K / V rows, but rows that
// differ in the last f32 bits round to neighbouring cache values now and
// then: one f16 step is 2^-11 of a value, a q8_0 step 1/127 of a block's
// largest; the tolerances are a fraction of those.
TEST(DeviceModel, KvCacheDtypes) {
  PARALLM_REQUIRE_TEST_DEVICE();
  for (const char* preset : {"tiny", "mixtral-tiny", "tiny-qwen3"}) {
    expect_device_matches_cpu({preset, DType::kF32, DType::kF16, 1e-4});
  }
  expect_device_matches_cpu({"tiny-mha64", DType::kF32, DType::kF16, 1e-4});
  expect_device_matches_cpu({"tiny-mha64", DType::kF32, DType::kBF16, 1e-4});
  expect_device_matches_cpu({"tiny-mha64", DType::kF32, DType::kQ8_0, 3e-3});
}

// Stored weight dtypes. f16 / bf16: the device's GEMM rounds activations to
// the weight dtype for batches above kMatVecMaxTokens (the CPU keeps f32),
// about 2^-11 / 2^-8 of each product; q8_0: the CPU's vector kernels round
// activations through q8_0 (~0.5% of a dot product), the device keeps f32;
// q4_0 / q4_k / q6_k: the device multiplies f16 copies of the dequantized
// weights. Tolerances are those roundings through a two-layer model.
TEST(DeviceModel, QuantizedWeightsStayCloseToTheCpuModel) {
  PARALLM_REQUIRE_TEST_DEVICE();
  expect_device_matches_cpu({"tiny-256", DType::kF16, DType::kF16, 5e-3});
  expect_device_matches_cpu({"tiny-256", DType::kBF16, DType::kF16, 3e-2});
  expect_device_matches_cpu({"tiny-256", DType::kQ8_0, DType::kF16, 3e-2});
  expect_device_matches_cpu({"tiny-256", DType::kQ4_0, DType::kF16, 3e-2});
  expect_device_matches_cpu({"tiny-256", DType::kQ4_K, DType::kF16, 3e-2});
  expect_device_matches_cpu({"tiny-256", DType::kQ6_K, DType::kF16, 3e-2});
  // NOTE: not an MoE preset: a random router's near ties flip an expert
  // under the activations' q8_0 rounding, and a flipped expert is no longer
  // a small difference (mixtral-tiny q8_0: 0.17).
}

// Parallel layouts on the device against one device rank: tp and ep change
// only the order of the group's sums, pp nothing.
TEST(DeviceModel, TpPpEpEqualOneRank) {
  PARALLM_REQUIRE_TEST_DEVICE();
  const std::string& dense = model_of("tiny", DType::kF32);
  const std::string& moe = model_of("mixtral-tiny", DType::kF32);
  const std::vector<float> one = teacher_forced_logits(*make_engine(dense, device_list(1), DType::kF16));
  const std::vector<float> one_moe = teacher_forced_logits(*make_engine(moe, device_list(1), DType::kF16));
  struct L {
    const char* what;
    Layout layout;
    bool moe;
  };
  for (const L& l : {L{"tp=2", {2, 1, 1}, false}, L{"pp=2", {1, 2, 1}, false}, L{"tp=2 pp=2", {2, 2, 1}, false},
                     L{"ep=2", {1, 1, 2}, true}, L{"tp=2 (MoE)", {2, 1, 1}, true}, L{"ep=2 pp=2", {1, 2, 2}, true}}) {
    SCOPED_TRACE(l.what);
    const std::vector<float> got =
        teacher_forced_logits(*make_engine(l.moe ? moe : dense, device_list(l.layout.ranks()), DType::kF16, l.layout));
    const double err = relative_error(got, l.moe ? one_moe : one);
    EXPECT_LE(err, 1e-5) << l.what;
    std::printf("[ device ] %-12s relative error against one rank %.3g\n", l.what, err);
  }
}

// llama2.c's greedy tokens, from the .bin and the .gguf of stories260K.
TEST(DeviceModel, Stories260kGreedyTokensEqualTheReference) {
  PARALLM_REQUIRE_TEST_DEVICE();
  std::ifstream in(shared_dir() + "/reference/stories260K_greedy.json");
  ASSERT_TRUE(in) << "no " << shared_dir() << "/reference/stories260K_greedy.json";
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::string dir = shared_dir() + "/models/stories260K/";
  for (const char* file : {"stories260K.bin", "stories260K.gguf"}) {
    SCOPED_TRACE(file);
    const std::string tok = std::string(file) == "stories260K.bin" ? dir + "tok512.bin" : "";
    auto e = make_engine(dir + file, device_list(1), DType::kF32, {}, tok);
    for (const auto& c : ref["cases"]) {
      const std::vector<int32_t> prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> want = c["generated_token_ids"].get<std::vector<int32_t>>();
      std::vector<int32_t> table(16);
      for (int i = 0; i < 16; ++i) table[static_cast<size_t>(i)] = 15 - i;  // any blocks will do
      ForwardBatch b;
      b.add_sequence_tokens(prompt.data(), static_cast<int64_t>(prompt.size()), 0, 0, table.data(), e->block_size(),
                            true);
      std::vector<int32_t> got;
      int32_t pos = static_cast<int32_t>(prompt.size());
      while (got.size() < want.size()) {
        const float* logits = e->forward(b);
        const int64_t v = e->config().n_vocab;
        const int32_t next = static_cast<int32_t>(std::max_element(logits, logits + v) - logits);
        got.push_back(next);
        b.clear();
        b.add_sequence_tokens(&next, 1, pos++, 0, table.data(), e->block_size(), true);
      }
      EXPECT_EQ(got, want) << c["prompt"];
    }
  }
}

// Greedy decoding of generated presets (GQA dense, MoE) from the device
// equals the CPU model's, token for token.
TEST(DeviceModel, GreedyTokensOfGeneratedPresetsEqualTheCpuModel) {
  PARALLM_REQUIRE_TEST_DEVICE();
  auto greedy = [](Engine& e) {
    std::vector<int32_t> table(16);
    for (int i = 0; i < 16; ++i) table[static_cast<size_t>(i)] = 2 * i + 1;
    std::vector<int32_t> prompt = {1, 17, 243, 99, 5};
    ForwardBatch b;
    b.add_sequence_tokens(prompt.data(), 5, 0, 0, table.data(), e.block_size(), true);
    std::vector<int32_t> out;
    for (int32_t pos = 5; pos < 5 + 48; ++pos) {
      const float* logits = e.forward(b);
      const int32_t next = static_cast<int32_t>(std::max_element(logits, logits + e.config().n_vocab) - logits);
      out.push_back(next);
      b.clear();
      b.add_sequence_tokens(&next, 1, pos, 0, table.data(), e.block_size(), true);
    }
    return out;
  };
  for (const char* preset : {"tiny", "mixtral-tiny", "tiny-qwen3moe", "tiny-llama3"}) {
    SCOPED_TRACE(preset);
    const std::string& path = model_of(preset, DType::kF32);
    EXPECT_EQ(greedy(*make_engine(path, device_list(1), DType::kF32)),
              greedy(*make_engine(path, "cpu:0", DType::kF32)));
  }
}

// What the device model does not run says so before anything is uploaded.
TEST(DeviceModel, RefusesWhatItDoesNotRunYet) {
  PARALLM_REQUIRE_TEST_DEVICE();
  for (const char* preset : {"tiny-gemma2", "tiny-deepseek2", "tiny-qwen2moe"}) {
    SCOPED_TRACE(preset);
    try {
      make_engine(model_of(preset, DType::kF32), device_list(1), DType::kF16);
      FAIL() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("not on CUDA devices yet"), std::string::npos) << e.what();
    }
  }
}

// A budget too small for the weights is a CapacityError with advice, before
// any upload.
TEST(DeviceModel, TooSmallADeviceSaysWhatWouldFit) {
  PARALLM_REQUIRE_TEST_DEVICE();
  EngineOptions o;
  o.model_path = model_of("tiny-256", DType::kF32);
  o.devices = device_list(1);
  o.device_memory_bytes = 4 << 20;
  o.ctx_size = 256;
  try {
    Engine e(o);
    FAIL() << "accepted";
  } catch (const CapacityError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(device_kind() + ":0 has 4.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("try --tp"), std::string::npos) << m;
  }
}

// serve's sizing on GPU ranks: a profiled step reports the device memory its
// activations hold, the budget is the device's, and a resized pool serves
// the same logits.
TEST(DeviceModel, ProfiledStepAndResizedPoolOnTheDevice) {
  PARALLM_REQUIRE_TEST_DEVICE();
  const std::string& path = model_of("tiny", DType::kF32);
  EngineOptions o;
  o.model_path = path;
  o.devices = device_list(1);
  o.device_memory_bytes = 64 << 20;
  o.ctx_size = 256;
  o.kv_blocks = 64;
  o.kv_dtype = DType::kF32;
  Engine e(o);
  ASSERT_TRUE(e.on_devices());
  EXPECT_EQ(e.rank_budgets(), std::vector<uint64_t>{64u << 20});
  const size_t activations = e.profile_step(256, 4);
  // At least the residual stream, its norm and the FFN's gate and up rows of 256 tokens in f32.
  const ModelConfig& c = e.config();
  EXPECT_GE(activations, static_cast<size_t>(256 * (2 * c.n_embd + 2 * c.n_ff) * 4));
  EXPECT_LT(activations, size_t{64} << 20);
  e.resize_kv_pool(40);
  EXPECT_EQ(e.rank_kv_blocks(), std::vector<int64_t>{40});
  const std::vector<float> cpu = teacher_forced_logits(*make_engine(path, "cpu:0", DType::kF32));
  EXPECT_LE(relative_error(teacher_forced_logits(e), cpu), 1e-5);
}

// bench-model --synthetic: a preset's shape with its weights filled on the
// device; the host never holds (nor touches) them, and CPU ranks refuse it.
TEST(DeviceModel, SyntheticWeightsAreFilledOnTheDevice) {
  PARALLM_REQUIRE_TEST_DEVICE();
  for (const char* spec : {"tiny-256", "tiny-256:f32", "mixtral-tiny:q8_0", "tiny-qwen2:f16"}) {
    SCOPED_TRACE(spec);
    EngineOptions o;
    o.synthetic = spec;
    o.devices = device_list(1);
    o.ctx_size = 256;
    o.kv_blocks = 40;
    Engine e(o);
    EXPECT_TRUE(e.model_file().synthetic);
    const std::vector<float> logits = teacher_forced_logits(e);
    double sum = 0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      sum += std::fabs(v);
    }
    EXPECT_GT(sum, 0.0);  // weights were filled: zeros would give all-zero logits
  }
  EngineOptions cpu;
  cpu.synthetic = "tiny";
  EXPECT_THROW(Engine e(cpu), InputError);
  cpu.synthetic = "tiny:q4_k";
  cpu.devices = device_list(1);
  EXPECT_THROW(Engine e(cpu), InputError);
}

// The engine's answers to CUDA devices it cannot use, in the build at hand
// (the suite name puts them in the CUDA build check's ctest run too).
TEST(CudaErrors, EngineRefusesCudaDevicesItCannotUse) {
  const std::string& path = model_of("tiny", DType::kF32);
  auto message = [&](const std::string& devices, const std::string& comm) {
    EngineOptions o;
    o.model_path = path;
    o.devices = devices;
    o.comm = comm;
    o.ctx_size = 64;
    try {
      Engine e(o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
#if PARALLM_HAVE_CUDA
  const std::string m = message("cuda:99", "local");
  // No driver, no device or no 100th device: each names itself.
  EXPECT_TRUE(m.find("no usable CUDA driver") != std::string::npos ||
              m.find("cuda:99 does not exist") != std::string::npos)
      << m;
  EXPECT_NE(message("cpu:0", "nccl").find("--comm nccl moves GPU memory: it needs CUDA devices"), std::string::npos);
#else
  EXPECT_NE(message("cuda:0", "local").find("built without CUDA; rebuild with -DPARALLM_CUDA=ON"), std::string::npos);
  EXPECT_NE(message("cpu:0", "nccl").find("--comm nccl: this parallm was built without CUDA"), std::string::npos);
#endif
  EXPECT_NE(message("emu:0,cpu:0", "local").find("the layout needs 1"), std::string::npos);
}

}  // namespace
}  // namespace parallm
