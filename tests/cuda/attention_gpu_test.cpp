// The KV write and paged attention kernels on a real device against the
// emulated device (the same per-item math on the host; the emulation itself
// is checked against the CPU kernels in attention_emulated_test.cpp).
// Outputs are filled with 0xff bytes (NaN as f32) before each launch, so an
// element a kernel forgets to write fails the comparison; cache pools start
// as the same random bytes on both sides, so a stray write shows too. Skips
// without a device (gpu_env.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "cuda_test_data.h"
#include "device/cuda_buffer.h"
#include "device/cuda_stream.h"
#include "gpu_env.h"
#include "gpu_fixture.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/kv_cache.h"

namespace parallm::cuda {
namespace {

class CudaGpuAttention : public test::GpuFixture {};

constexpr DType kCacheTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

size_t pool_bytes(DType t, int64_t n_blocks, int64_t n_kv_head, int64_t block_size, int64_t head_dim) {
  return static_cast<size_t>(n_blocks * n_kv_head * block_size) * dtype_row_bytes(t, head_dim);
}

TEST_F(CudaGpuAttention, KvWriteMatchesEmulated) {
  for (DType t : kCacheTypes) {
    for (int64_t head_dim : {64, 128, 80, 48, 160, 256, 34}) {
      if (t == DType::kQ8_0 && head_dim % 32 != 0) continue;
      for (int64_t block_size : {16, 32}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " head_dim " + std::to_string(head_dim) + " block_size " +
                     std::to_string(block_size));
        const int64_t n_kv_head = 4, n_blocks = 6, width = n_kv_head * head_dim;
        std::vector<int64_t> slots;
        for (int64_t b : {5, 1, 2}) {
          for (int64_t r = 1; r < block_size; r += 2) slots.push_back(b * block_size + r);
        }
        std::shuffle(slots.begin(), slots.end(), std::mt19937(3));
        const auto n_tokens = static_cast<int64_t>(slots.size());
        std::vector<float> k = test::random_floats(n_tokens * width, 21, 3.0f);
        const std::vector<float> v = test::random_floats(n_tokens * width, 22, 3.0f);
        for (int64_t i = 0; i < 32; ++i) k[i] = i == 0 ? 127.0f : static_cast<float>(i % 5) - 1.5f;  // .5 ties
        const size_t bytes = pool_bytes(t, n_blocks, n_kv_head, block_size, head_dim);
        std::vector<uint8_t> want_k = random_bytes(bytes, 7), want_v = random_bytes(bytes, 8);
        DeviceBuffer d_k = upload(want_k), d_v = upload(want_v);
        DeviceBuffer d_rk = upload(k), d_rv = upload(v), d_slots = upload(slots);
        emulated::kv_write(PagedKv{want_k.data(), want_v.data(), t, block_size, n_kv_head, head_dim}, k.data(),
                           v.data(), slots.data(), n_tokens, nullptr);
        kv_write(PagedKv{d_k.data(), d_v.data(), t, block_size, n_kv_head, head_dim}, d_rk.as<float>(),
                 d_rv.as<float>(), d_slots.as<int64_t>(), n_tokens, stream_->handle());
        // The same integer conversions: bit for bit.
        ASSERT_EQ(0, std::memcmp(download<uint8_t>(d_k).data(), want_k.data(), bytes));
        ASSERT_EQ(0, std::memcmp(download<uint8_t>(d_v).data(), want_v.data(), bytes));
      }
    }
  }
}

// A mixed batch over a paged cache: sequence 0's prefill chunk at positions
// [chunk_start, chunk_start + chunk), a decode token at the end of each
// other sequence; shuffled block ids.
struct Batch {
  std::vector<int64_t> lengths;
  int64_t chunk_start, chunk;
};

struct Case {
  DType dtype;
  int64_t head_dim, n_kv_head, group, block_size;
  AttendLimits limits;
};

std::string describe(const Case& c) {
  return std::string(dtype_name(c.dtype)) + " head_dim " + std::to_string(c.head_dim) + " n_kv_head " +
         std::to_string(c.n_kv_head) + " group " + std::to_string(c.group) + " block_size " +
         std::to_string(c.block_size) + " window " + std::to_string(c.limits.window) + " softcap " +
         std::to_string(c.limits.softcap);
}

// The host side of one case and what the device holds of it.
struct Prepared {
  std::vector<int32_t> positions, seq_of_token, tables;
  std::vector<float> q;
  std::vector<uint8_t> k_pool, v_pool;  // written by the emulated kv_write
  int64_t max_blocks = 0, n_tokens = 0, n_head = 0;
};

class CudaGpuAttentionCases : public CudaGpuAttention {
 protected:
  // Builds the case on the host, writes every sequence's K/V with both
  // kv_writes (device pools checked against the host's), and returns the
  // largest |device - emulated| output difference over max |emulated|.
  double run_case(const Case& c, const Batch& batch, uint32_t seed, double* device_ms = nullptr) {
    const int64_t hd = c.head_dim, bs = c.block_size, n_seqs = static_cast<int64_t>(batch.lengths.size());
    Prepared p;
    p.n_head = c.n_kv_head * c.group;
    int64_t n_blocks = 2;
    for (int64_t len : batch.lengths) {
      p.max_blocks = std::max(p.max_blocks, (len + bs - 1) / bs);
      n_blocks += (len + bs - 1) / bs;
    }
    std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    p.tables.assign(static_cast<size_t>(n_seqs * p.max_blocks), -1000000);  // unused entries: never read
    std::vector<int64_t> slots;
    for (int64_t s = 0, next = 0; s < n_seqs; ++s) {
      for (int64_t b = 0; b < (batch.lengths[s] + bs - 1) / bs; ++b) p.tables[s * p.max_blocks + b] = ids[next++];
      for (int64_t pos = 0; pos < batch.lengths[s]; ++pos) {
        slots.push_back(p.tables[s * p.max_blocks + pos / bs] * bs + pos % bs);
      }
    }
    const auto n_rows = static_cast<int64_t>(slots.size());
    const int64_t width = c.n_kv_head * hd;
    const std::vector<float> k = test::random_floats(n_rows * width, seed + 1);
    const std::vector<float> v = test::random_floats(n_rows * width, seed + 2);
    const size_t bytes = pool_bytes(c.dtype, n_blocks, c.n_kv_head, bs, hd);
    p.k_pool = random_bytes(bytes, seed + 3);
    p.v_pool = random_bytes(bytes, seed + 4);
    DeviceBuffer d_k = upload(p.k_pool), d_v = upload(p.v_pool);
    const PagedKv hkv{p.k_pool.data(), p.v_pool.data(), c.dtype, bs, c.n_kv_head, hd};
    const PagedKv dkv{d_k.data(), d_v.data(), c.dtype, bs, c.n_kv_head, hd};
    emulated::kv_write(hkv, k.data(), v.data(), slots.data(), n_rows, nullptr);
    {
      DeviceBuffer d_rk = upload(k), d_rv = upload(v), d_slots = upload(slots);
      kv_write(dkv, d_rk.as<float>(), d_rv.as<float>(), d_slots.as<int64_t>(), n_rows, stream_->handle());
      EXPECT_EQ(0, std::memcmp(download<uint8_t>(d_k).data(), p.k_pool.data(), bytes));
      EXPECT_EQ(0, std::memcmp(download<uint8_t>(d_v).data(), p.v_pool.data(), bytes));
    }
    for (int64_t pos = batch.chunk_start; pos < batch.chunk_start + batch.chunk; ++pos) {
      p.positions.push_back(static_cast<int32_t>(pos));
      p.seq_of_token.push_back(0);
    }
    for (int64_t s = 1; s < n_seqs; ++s) {
      p.positions.push_back(static_cast<int32_t>(batch.lengths[s] - 1));
      p.seq_of_token.push_back(static_cast<int32_t>(s));
    }
    p.n_tokens = static_cast<int64_t>(p.positions.size());
    p.q = test::random_floats(p.n_tokens * p.n_head * hd, seed + 5, 2.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

    std::vector<float> want(p.q.size());
    emulated::paged_attention(want.data(), p.q.data(), hkv, p.positions.data(), p.seq_of_token.data(), p.tables.data(),
                              p.max_blocks, p.n_tokens, p.n_head, scale, c.limits, nullptr);
    DeviceBuffer d_q = upload(p.q), d_pos = upload(p.positions), d_seq = upload(p.seq_of_token);
    DeviceBuffer d_tables = upload(p.tables);
    DeviceBuffer d_out = poisoned<float>(want.size());
    auto launch = [&] {
      paged_attention(d_out.as<float>(), d_q.as<float>(), dkv, d_pos.as<int32_t>(), d_seq.as<int32_t>(),
                      d_tables.as<int32_t>(), p.max_blocks, p.n_tokens, p.n_head, scale, c.limits, stream_->handle());
    };
    launch();
    const std::vector<float> got = download<float>(d_out);
    if (device_ms != nullptr) {
      constexpr int kReps = 20;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kReps; ++i) launch();
      stream_->synchronize();
      *device_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kReps;
    }
    double max_ref = 0.0, max_err = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!std::isfinite(got[i])) {
        ADD_FAILURE() << "element " << i << " not written (or not finite): " << got[i];
        return INFINITY;
      }
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
      max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - want[i]));
    }
    return max_err / std::max(max_ref, 1e-30);
  }
};

// The same operations in the same order; the device's expf / tanhf are
// within 2 ulp of the host's, so a few f32 ulps of the output's scale.
constexpr double kTolerance = 1e-5;

TEST_F(CudaGpuAttentionCases, PagedAttentionMatchesEmulatedMixedBatch) {
  const Batch mixed{{77, 1, 31, 64, 200}, 50, 27};
  double worst = 0.0;
  uint32_t seed = 1000;
  for (DType t : kCacheTypes) {
    for (int64_t hd : {64, 128, 48, 80, 96, 112, 160, 256, 2, 34}) {
      if (t == DType::kQ8_0 && hd % 32 != 0) continue;
      for (int64_t group : {1, 2, 4, 8}) {
        const Case c{t, hd, 2, group, group % 4 == 0 ? 32 : 16, {}};
        SCOPED_TRACE(describe(c));
        const double err = run_case(c, mixed, seed++);
        ASSERT_LE(err, kTolerance);
        worst = std::max(worst, err);
      }
    }
  }
  std::printf("max error / max |emulated|: %.3g\n", worst);
}

TEST_F(CudaGpuAttentionCases, PagedAttentionMatchesEmulatedWithWindowAndSoftcap) {
  const Batch mixed{{77, 1, 31, 64, 200}, 50, 27};
  const AttendLimits limits[] = {{20, 0.0f}, {0, 5.0f}, {7, 30.0f}, {1, 0.0f}, {500, 2.0f}};
  double worst = 0.0;
  uint32_t seed = 2000;
  for (DType t : kCacheTypes) {
    for (int64_t hd : {64, 128, 80}) {
      if (t == DType::kQ8_0 && hd % 32 != 0) continue;
      for (const AttendLimits& l : limits) {
        const Case c{t, hd, 2, 4, 16, l};
        SCOPED_TRACE(describe(c));
        const double err = run_case(c, mixed, seed++);
        ASSERT_LE(err, kTolerance);
        worst = std::max(worst, err);
      }
    }
  }
  std::printf("max error / max |emulated|: %.3g\n", worst);
}

// A decode step of 16 sequences of 1-2k positions, Llama-8B-like heads (32
// query heads over 8 KV heads of 128): checked, and timed for the record.
TEST_F(CudaGpuAttentionCases, PagedAttentionDecodeBatch) {
  Batch decode{{}, 0, 1};
  for (int64_t s = 0; s < 16; ++s) decode.lengths.push_back(1000 + 67 * s);
  decode.chunk_start = decode.lengths[0] - 1;
  for (DType t : {DType::kF16, DType::kQ8_0}) {
    const Case c{t, 128, 8, 4, 16, {}};
    SCOPED_TRACE(describe(c));
    double ms = 0.0;
    EXPECT_LE(run_case(c, decode, 3000, &ms), kTolerance);
    std::printf("%s decode, 16 sequences of 1000-2005 positions: %.3f ms a launch\n", dtype_name(t), ms);
  }
}

}  // namespace
}  // namespace parallm::cuda
