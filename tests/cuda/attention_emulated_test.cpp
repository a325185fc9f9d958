// The emulated KV write and paged attention (kernels/cuda/emulated) against
// the CPU kernels (kernels/cpu/attention.h), which share their cache layout:
// kv_write byte for byte over every cache dtype, and paged attention over
// cache dtypes, head sizes, GQA ratios, block sizes, windows and soft-caps
// on a mixed batch (a prefill chunk starting mid-sequence, decode tokens of
// other sequences, shuffled block ids). Also the argument checks the CUDA
// launchers share.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_data.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cuda/emulated/launchers.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace parallm::cuda {
namespace {

// The CPU's q8_0 row converter rounds ties to even on AVX-512 (what the CUDA
// kernels do) and away from zero in the scalar reference: the CPU side of
// these tests runs AVX-512 where the host has it, and is restored after.
class IsaForTest {
 public:
  IsaForTest() {
    if (cpu::isa_supported(cpu::Isa::kAvx512)) cpu::set_active_isa(cpu::Isa::kAvx512);
  }
  ~IsaForTest() { cpu::set_active_isa(saved_); }
  static bool ties_to_even() { return cpu::active_isa() == cpu::Isa::kAvx512; }

 private:
  cpu::Isa saved_ = cpu::active_isa();
};

constexpr DType kCacheTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0};

size_t pool_bytes(DType t, int64_t n_blocks, int64_t n_kv_head, int64_t block_size, int64_t head_dim) {
  return static_cast<size_t>(n_blocks * n_kv_head * block_size) * dtype_row_bytes(t, head_dim);
}

// Random bytes: what a reused pool holds where no row was written.
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// Rows [n_tokens, width] of q8_0 edge cases among random values: per token
// one 32-value block with exact .5 ties (amax 127: d = 1, q = x), one all
// zeros (d = 0), one of tiny values (f16 subnormal d).
std::vector<float> kv_rows(int64_t n_tokens, int64_t width, uint32_t seed) {
  std::vector<float> x = test::random_floats(n_tokens * width, seed, 2.0f);
  for (int64_t t = 0; t < n_tokens && width >= 96; ++t) {
    float* r = x.data() + t * width;
    r[0] = 127.0f;
    for (int j = 1; j < 32; ++j) r[j] = static_cast<float>(j % 7) - 2.5f;  // ..., -2.5, -1.5, ..., 3.5
    std::fill(r + 32, r + 64, 0.0f);
    for (int j = 64; j < 96; ++j) r[j] *= 1e-6f;
  }
  return x;
}

TEST(CudaEmulated, KvWriteBitIdenticalToCpu) {
  IsaForTest isa;
  for (DType t : kCacheTypes) {
    for (int64_t head_dim : {64, 128, 80, 48, 96, 112, 160, 256, 2, 34}) {
      if (t == DType::kQ8_0 && head_dim % 32 != 0) continue;
      for (int64_t block_size : {16, 32}) {
        for (bool one_pool : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " head_dim " + std::to_string(head_dim) + " block_size " +
                       std::to_string(block_size) + (one_pool ? " one pool" : ""));
          const int64_t n_kv_head = 3, n_blocks = 5, width = n_kv_head * head_dim;
          // Slots in shuffled blocks, some rows of a block left alone.
          std::vector<int64_t> slots;
          for (int64_t b : {3, 0, 4}) {
            for (int64_t r = 0; r < block_size; r += 3) slots.push_back(b * block_size + r);
          }
          std::shuffle(slots.begin(), slots.end(), std::mt19937(7));
          const auto n_tokens = static_cast<int64_t>(slots.size());
          const std::vector<float> k = kv_rows(n_tokens, width, 11), v = kv_rows(n_tokens, width, 12);
          const size_t bytes = pool_bytes(t, n_blocks, n_kv_head, block_size, head_dim);
          std::vector<uint8_t> cpu_k = random_bytes(bytes, 1), cpu_v = random_bytes(bytes, 2);
          std::vector<uint8_t> emu_k = cpu_k, emu_v = cpu_v;
          cpu::PagedKv ckv{cpu_k.data(), one_pool ? cpu_k.data() : cpu_v.data(), t, block_size, n_kv_head, head_dim};
          PagedKv ekv{emu_k.data(), one_pool ? emu_k.data() : emu_v.data(), t, block_size, n_kv_head, head_dim};
          const float* vr = one_pool ? k.data() : v.data();
          cpu::kv_write(ckv, k.data(), vr, slots.data(), n_tokens);
          emulated::kv_write(ekv, k.data(), vr, slots.data(), n_tokens, nullptr);
          if (t != DType::kQ8_0 || IsaForTest::ties_to_even()) {
            ASSERT_EQ(0, std::memcmp(emu_k.data(), cpu_k.data(), bytes));
            ASSERT_EQ(0, std::memcmp(emu_v.data(), cpu_v.data(), bytes));
            continue;
          }
          // The scalar CPU rounds .5 away from zero: a quant may be one step
          // off, nothing else (the scales, after each chunk's quants, match).
          const size_t chunk = static_cast<size_t>(block_size) * dtype_row_bytes(t, head_dim);
          const size_t quants = static_cast<size_t>(block_size * head_dim);
          for (size_t i = 0; i < bytes; ++i) {
            const int limit = i % chunk < quants ? 1 : 0;
            ASSERT_LE(std::abs(static_cast<int8_t>(emu_k[i]) - static_cast<int8_t>(cpu_k[i])), limit) << i;
            ASSERT_LE(std::abs(static_cast<int8_t>(emu_v[i]) - static_cast<int8_t>(cpu_v[i])), limit) << i;
          }
        }
      }
    }
  }
}

// Ties to even, by hand: amax 127 makes d = 1 and q = rint(x).
TEST(CudaEmulated, KvWriteQ8_0RoundsTiesToEven) {
  std::vector<float> row(32, 0.0f);
  row[0] = 127.0f;
  row[1] = 2.5f;
  row[2] = -2.5f;
  row[3] = 3.5f;
  row[4] = 0.5f;
  std::vector<uint8_t> pool(dtype_row_bytes(DType::kQ8_0, 32) * 16, 0);
  const PagedKv kv{pool.data(), pool.data(), DType::kQ8_0, 16, 1, 32};
  const int64_t slot = 1;
  emulated::kv_write(kv, row.data(), row.data(), &slot, 1, nullptr);
  const auto* q = reinterpret_cast<const int8_t*>(pool.data() + 32);
  EXPECT_EQ(127, q[0]);
  EXPECT_EQ(2, q[1]);
  EXPECT_EQ(-2, q[2]);
  EXPECT_EQ(4, q[3]);
  EXPECT_EQ(0, q[4]);
  uint16_t d;
  std::memcpy(&d, pool.data() + 16 * 32 + 2, 2);  // scales [1, 16]: row 1's
  EXPECT_EQ(fp32_to_fp16(1.0f), d);
}

// One attention case: the cache written by the CPU, read by both kernels.
struct Case {
  DType dtype;
  int64_t head_dim, group, block_size;
  AttendLimits limits;
};

std::string describe(const Case& c) {
  return std::string(dtype_name(c.dtype)) + " head_dim " + std::to_string(c.head_dim) + " group " +
         std::to_string(c.group) + " block_size " + std::to_string(c.block_size) + " window " +
         std::to_string(c.limits.window) + " softcap " + std::to_string(c.limits.softcap);
}

// Sequences (their lengths after this step) and the batch: sequence 0's
// prefill chunk at positions [chunk_start, chunk_start + chunk), then one
// decode token at the end of each other sequence.
struct Batch {
  std::vector<int64_t> lengths;
  int64_t chunk_start, chunk;
};

// The largest |emulated - cpu| over the output, relative to max |cpu|.
double attention_error(const Case& c, const Batch& batch, uint32_t seed) {
  const int64_t n_kv_head = c.group >= 8 ? 1 : 2, n_head = n_kv_head * c.group, hd = c.head_dim;
  const int64_t bs = c.block_size, n_seqs = static_cast<int64_t>(batch.lengths.size());
  int64_t max_blocks = 0, n_blocks = 0;
  for (int64_t len : batch.lengths) {
    max_blocks = std::max(max_blocks, (len + bs - 1) / bs);
    n_blocks += (len + bs - 1) / bs;
  }
  n_blocks += 3;  // blocks no sequence owns
  // Shuffled block ids, handed out in sequence order; the flat table's
  // unused entries are poison (no kernel may read them).
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  std::vector<int32_t> flat(static_cast<size_t>(n_seqs * max_blocks), -1000000);
  std::vector<const int32_t*> tables(static_cast<size_t>(n_seqs));
  for (int64_t s = 0, next = 0; s < n_seqs; ++s) {
    for (int64_t b = 0; b < (batch.lengths[s] + bs - 1) / bs; ++b) flat[s * max_blocks + b] = ids[next++];
    tables[s] = flat.data() + s * max_blocks;
  }
  // Every sequence's K/V (the positions before this step and the batch's
  // own), written by the CPU into pools of random bytes.
  const size_t bytes = pool_bytes(c.dtype, n_blocks, n_kv_head, bs, hd);
  std::vector<uint8_t> kp = random_bytes(bytes, seed + 1), vp = random_bytes(bytes, seed + 2);
  if (c.dtype == DType::kF32 || c.dtype == DType::kF16) {
    // Unwritten rows as NaN / inf where random bytes make them so: harmless
    // only if no kernel reads them.
    for (size_t i = 1; i < bytes; i += 2) kp[i] = vp[i] = 0xff;
  }
  const cpu::PagedKv ckv{kp.data(), vp.data(), c.dtype, bs, n_kv_head, hd};
  const int64_t width = n_kv_head * hd;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int64_t len = batch.lengths[s];
    const std::vector<float> k = test::random_floats(len * width, seed + 10 + static_cast<uint32_t>(s));
    const std::vector<float> v = test::random_floats(len * width, seed + 50 + static_cast<uint32_t>(s));
    std::vector<int64_t> slots(static_cast<size_t>(len));
    for (int64_t p = 0; p < len; ++p) slots[p] = tables[s][p / bs] * bs + p % bs;
    cpu::kv_write(ckv, k.data(), v.data(), slots.data(), len);
  }
  std::vector<int32_t> positions, seq_of_token;
  for (int64_t p = batch.chunk_start; p < batch.chunk_start + batch.chunk; ++p) {
    positions.push_back(static_cast<int32_t>(p));
    seq_of_token.push_back(0);
  }
  for (int64_t s = 1; s < n_seqs; ++s) {
    positions.push_back(static_cast<int32_t>(batch.lengths[s] - 1));
    seq_of_token.push_back(static_cast<int32_t>(s));
  }
  const auto n_tokens = static_cast<int64_t>(positions.size());
  // Queries large enough that the softmax is far from flat.
  const std::vector<float> q = test::random_floats(n_tokens * n_head * hd, seed + 99, 2.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  std::vector<float> want(q.size(), NAN), got(q.size(), NAN);
  ThreadPool pool(2);
  cpu::AttendLimits cl;
  cl.window = c.limits.window;
  cl.softcap = c.limits.softcap;
  cpu::paged_attention(want.data(), q.data(), ckv, positions.data(), seq_of_token.data(), tables.data(), n_tokens,
                       n_head, scale, pool, nullptr, cl);
  const PagedKv ekv{kp.data(), vp.data(), c.dtype, bs, n_kv_head, hd};
  emulated::paged_attention(got.data(), q.data(), ekv, positions.data(), seq_of_token.data(), flat.data(), max_blocks,
                            n_tokens, n_head, scale, c.limits, nullptr);
  double max_ref = 0.0, max_err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) return INFINITY;
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return max_err / std::max(max_ref, 1e-30);
}

// Both read the same stored values: they differ by f32 rounding only.
constexpr double kTolerance = 1e-5;

// A prefill chunk of 19 tokens at positions 40-58 of a 59-token sequence,
// and decode tokens of sequences of 1, 17, 75 and 140 positions.
const Batch kMixed{{59, 1, 17, 75, 140}, 40, 19};

TEST(CudaEmulated, PagedAttentionMatchesCpuMixedBatch) {
  IsaForTest isa;
  double worst = 0.0;
  uint32_t seed = 100;
  for (DType t : kCacheTypes) {
    for (int64_t hd : {64, 128, 48, 80, 96, 112, 160, 256, 16, 34}) {
      if (t == DType::kQ8_0 && hd % 32 != 0) continue;
      for (int64_t group : {1, 2, 4, 8}) {
        for (int64_t bs : {16, 32}) {
          const Case c{t, hd, group, bs, {}};
          SCOPED_TRACE(describe(c));
          const double err = attention_error(c, kMixed, seed++);
          ASSERT_LE(err, kTolerance);
          worst = std::max(worst, err);
        }
      }
    }
  }
  std::printf("max error / max |cpu|: %.3g\n", worst);
}

TEST(CudaEmulated, PagedAttentionMatchesCpuWithWindowAndSoftcap) {
  IsaForTest isa;
  double worst = 0.0;
  uint32_t seed = 300;
  const AttendLimits limits[] = {{20, 0.0f}, {0, 5.0f}, {7, 30.0f}, {1, 0.0f}, {200, 2.0f}};
  for (DType t : kCacheTypes) {
    for (int64_t hd : {64, 128, 80, 160}) {
      if (t == DType::kQ8_0 && hd % 32 != 0) continue;
      for (int64_t group : {1, 4}) {
        for (const AttendLimits& l : limits) {
          const Case c{t, hd, group, group == 1 ? 16 : 32, l};
          SCOPED_TRACE(describe(c));
          const double err = attention_error(c, kMixed, seed++);
          ASSERT_LE(err, kTolerance);
          worst = std::max(worst, err);
        }
      }
    }
  }
  std::printf("max error / max |cpu|: %.3g\n", worst);
}

// A long decode context (every warp takes many tiles) and a prefill chunk
// long enough to span several tiles.
TEST(CudaEmulated, PagedAttentionMatchesCpuLongContext) {
  IsaForTest isa;
  const Batch longer{{300, 1000, 33}, 200, 100};
  uint32_t seed = 500;
  for (DType t : kCacheTypes) {
    for (int64_t window : {0, 333}) {
      const Case c{t, 128, 4, 16, {window, 0.0f}};
      SCOPED_TRACE(describe(c));
      EXPECT_LE(attention_error(c, longer, seed++), kTolerance);
    }
  }
}

TEST(CudaEmulated, KvCacheRejectsWhatItCannotRead) {
  std::vector<uint8_t> pool(1 << 16);
  std::vector<float> rows(256), out(256);
  const int64_t slot = 0;
  const int32_t pos = 0, seq = 0, table = 0;
  PagedKv kv{pool.data(), pool.data() + (1 << 15), DType::kQ4_0, 16, 1, 64};
  auto expect_input_error = [](const auto& call, const std::string& needle) {
    try {
      call();
      FAIL() << "accepted; wanted an error naming " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_input_error([&] { emulated::kv_write(kv, rows.data(), rows.data(), &slot, 1, nullptr); }, "q4_0");
  expect_input_error(
      [&] { emulated::paged_attention(out.data(), rows.data(), kv, &pos, &seq, &table, 1, 1, 1, 1.0f, {}, nullptr); },
      "q4_0");
  kv.dtype = DType::kQ6_K;
  expect_input_error([&] { emulated::kv_write(kv, rows.data(), rows.data(), &slot, 1, nullptr); }, "q6_k");
  kv.dtype = DType::kQ8_0;
  kv.head_dim = 48;
  expect_input_error([&] { emulated::kv_write(kv, rows.data(), rows.data(), &slot, 1, nullptr); }, "multiple of 32");
  expect_input_error(
      [&] { emulated::paged_attention(out.data(), rows.data(), kv, &pos, &seq, &table, 1, 1, 1, 1.0f, {}, nullptr); },
      "multiple of 32");
}

}  // namespace
}  // namespace parallm::cuda
