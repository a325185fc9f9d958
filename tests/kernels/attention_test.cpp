// Paged attention (kernels/cpu/attention.h) against a naive double-precision
// attention over contiguous K/V, on every ISA level, for f32/f16/bf16/q8_0 caches,
// GQA groups, head sizes on and off the vectorized paths, scattered block
// tables and prefill chunks mixed with decode tokens.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/ops.h"

namespace parallm::cpu {
namespace {

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

// Values as the cache holds them: rounded (or quantized per 32 values, which
// never straddle two heads) through `t` and back.
std::vector<float> stored(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> h(dtype_row_bytes(t, static_cast<int64_t>(x.size())));
  std::vector<float> y(x.size());
  if (t == DType::kF32) return x;
  convert_row(t, x.data(), h.data(), static_cast<int64_t>(x.size()));
  load_row_f32(t, h.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

struct Case {
  int64_t head_dim, n_head, n_kv_head;
  DType dtype;
  // > 0: the batch is only the decode tokens of sequences 1..decode_tokens
  // (small batches split each token's KV heads into runs between threads).
  int decode_tokens = 0;
  int64_t block_size = 16;
  // The batch's own rows stored by paged_attention (KvRows), not beforehand.
  bool write_in_call = false;
  AttendLimits limits = {};  // Gemma's window and soft-cap
};

void run_case(const Case& c, ThreadPool& pool) {
  const int64_t bs = c.block_size, width = c.n_kv_head * c.head_dim, group = c.n_head / c.n_kv_head;
  // Sequence 0: a 37-token prefill chunk at positions 20..56 after 20 cached
  // tokens; sequences 1-3: one decode token each at positions 0, 15, 70.
  const std::vector<int64_t> lens = {57, 1, 16, 71};
  std::vector<std::vector<int32_t>> tables;
  int64_t n_blocks = 0;
  for (int64_t l : lens) n_blocks += (l + bs - 1) / bs;
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(7);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (int64_t l : lens) {
    tables.emplace_back();
    for (int64_t b = 0; b < (l + bs - 1) / bs; ++b) tables.back().push_back(ids[next++]);
  }
  // The batch: positions 20..56 of sequence 0, then the last position of the others.
  std::vector<int32_t> pos, seq;
  if (c.decode_tokens == 0) {
    for (int32_t p = 20; p < 57; ++p) {
      pos.push_back(p);
      seq.push_back(0);
    }
  }
  for (int32_t s = 1; s < (c.decode_tokens == 0 ? 4 : 1 + c.decode_tokens); ++s) {
    pos.push_back(static_cast<int32_t>(lens[s] - 1));
    seq.push_back(s);
  }
  auto in_batch = [&](int32_t s, int32_t p) {
    for (size_t t = 0; t < pos.size(); ++t) {
      if (seq[t] == s && pos[t] == p) return true;
    }
    return false;
  };
  std::normal_distribution<float> nd(0.f, 1.f);
  // Contiguous K/V per sequence [len, width]; written into the pool by kv_write.
  const size_t row_bytes = dtype_row_bytes(c.dtype, c.head_dim);
  std::vector<uint8_t> kpool(static_cast<size_t>(n_blocks * bs * c.n_kv_head) * row_bytes), vpool(kpool.size());
  PagedKv kv{kpool.data(), vpool.data(), c.dtype, bs, c.n_kv_head, c.head_dim};
  std::vector<std::vector<float>> ks, vs, raw_k, raw_v;
  for (size_t s = 0; s < lens.size(); ++s) {
    std::vector<float> k(static_cast<size_t>(lens[s] * width)), v(k.size());
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (int64_t p = 0; p < lens[s]; ++p) {
      if (c.write_in_call && in_batch(static_cast<int32_t>(s), static_cast<int32_t>(p))) continue;
      const int64_t slot = tables[s][p / bs] * bs + p % bs;
      kv_write(kv, k.data() + p * width, v.data() + p * width, &slot, 1);
    }
    raw_k.push_back(k);
    raw_v.push_back(v);
    ks.push_back(stored(c.dtype, k));
    vs.push_back(stored(c.dtype, v));
  }
  const int64_t nt = static_cast<int64_t>(pos.size());
  std::vector<float> q(static_cast<size_t>(nt * c.n_head * c.head_dim));
  for (auto& x : q) x = nd(rng);
  // A q8_0 cache scores rounded queries (attention.h): so does the reference.
  const std::vector<float> q_ref = c.dtype == DType::kQ8_0 ? stored(c.dtype, q) : q;
  std::vector<const int32_t*> tabs;
  for (auto& t : tables) tabs.push_back(t.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  std::vector<float> out(q.size(), -1.f);
  std::vector<float> batch_k, batch_v;
  std::vector<int64_t> batch_slots;
  for (int64_t t = 0; t < nt; ++t) {
    const size_t s = static_cast<size_t>(seq[t]), p = static_cast<size_t>(pos[t]);
    batch_k.insert(batch_k.end(), raw_k[s].begin() + p * width, raw_k[s].begin() + (p + 1) * width);
    batch_v.insert(batch_v.end(), raw_v[s].begin() + p * width, raw_v[s].begin() + (p + 1) * width);
    batch_slots.push_back(tables[s][p / bs] * bs + p % bs);
  }
  const KvRows rows{batch_k.data(), batch_v.data(), batch_slots.data()};
  paged_attention(out.data(), q.data(), kv, pos.data(), seq.data(), tabs.data(), nt, c.n_head, scale, pool,
                  c.write_in_call ? &rows : nullptr, c.limits);

  for (int64_t t = 0; t < nt; ++t) {
    const auto& k = ks[static_cast<size_t>(seq[t])];
    const auto& v = vs[static_cast<size_t>(seq[t])];
    const int64_t len = pos[t] + 1;
    for (int64_t h = 0; h < c.n_head; ++h) {
      const int64_t hk = h / group;
      const float* qh = q_ref.data() + (t * c.n_head + h) * c.head_dim;
      std::vector<double> w(static_cast<size_t>(len));
      double mx = -1e300, sum = 0;
      // Keys the window leaves out weigh nothing.
      const int64_t lo = c.limits.window > 0 ? std::max<int64_t>(0, len - c.limits.window) : 0;
      for (int64_t p = lo; p < len; ++p) {
        double d = 0;
        for (int64_t i = 0; i < c.head_dim; ++i) d += static_cast<double>(qh[i]) * k[p * width + hk * c.head_dim + i];
        w[p] = d * scale;
        if (c.limits.softcap > 0) w[p] = c.limits.softcap * std::tanh(w[p] / c.limits.softcap);
        mx = std::max(mx, w[p]);
      }
      for (int64_t p = lo; p < len; ++p) sum += (w[p] = std::exp(w[p] - mx));
      for (int64_t i = 0; i < c.head_dim; ++i) {
        double o = 0;
        for (int64_t p = 0; p < len; ++p) o += w[p] / sum * v[p * width + hk * c.head_dim + i];
        ASSERT_NEAR(out[(t * c.n_head + h) * c.head_dim + i], o, 2e-5 * (1 + std::fabs(o)))
            << "token " << t << " head " << h << " dim " << i;
      }
    }
  }
}

TEST(PagedAttention, MatchesNaiveOnEveryIsaDtypeAndHeadSize) {
  IsaGuard guard;
  ThreadPool pool(2);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    set_active_isa(isa);
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
      for (Case c : {Case{64, 8, 2, dt}, Case{128, 4, 4, dt}, Case{80, 6, 3, dt}, Case{48, 4, 1, dt},
                     Case{96, 6, 3, dt}, Case{32, 4, 2, dt}}) {
        if (!kv_dtype_supported(dt, c.head_dim)) continue;  // q8_0: head sizes of whole 32-blocks
        SCOPED_TRACE(std::string(isa_name(isa)) + " " + dtype_name(dt) + " head_dim " + std::to_string(c.head_dim) +
                     " group " + std::to_string(c.n_head / c.n_kv_head));
        run_case(c, pool);
      }
    }
    // The batch's rows stored by the call: 40 tokens share the stores, 2 do not.
    for (int decode_tokens : {0, 2}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " rows stored in the call, decode tokens " +
                   std::to_string(decode_tokens));
      for (DType dt : {DType::kF16, DType::kQ8_0}) {
        Case c{64, 8, 2, dt, decode_tokens};
        c.write_in_call = true;
        run_case(c, pool);
      }
    }
    // Blocks shorter and longer than the AVX-512 kernel's 16-key score tiles.
    // q8_0 chunks keep their scales by block of rows, at offsets that
    // depend on the block size; head size 96 leaves a lone 32-block.
    for (int64_t bs : {8, 24, 32}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " block size " + std::to_string(bs));
      for (Case c : {Case{64, 8, 2, DType::kF16}, Case{64, 8, 2, DType::kQ8_0}, Case{96, 6, 3, DType::kQ8_0}}) {
        c.block_size = bs;
        run_case(c, pool);
      }
    }
  }
}

TEST(PagedAttention, SlidingWindowsAndSoftCapsMatchNaive) {
  // Windows shorter than a block, across block edges, longer than every
  // context; a soft-cap that bends these scores (about N(0, 1) x sqrt(hd) / sqrt(hd)).
  IsaGuard guard;
  ThreadPool pool(2);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    set_active_isa(isa);
    for (AttendLimits limits : {AttendLimits{5, 0.0f}, AttendLimits{16, 0.0f}, AttendLimits{23, 1.5f},
                                AttendLimits{1000, 0.0f}, AttendLimits{0, 0.7f}}) {
      for (DType dt : {DType::kF32, DType::kF16, DType::kQ8_0}) {
        for (int decode_tokens : {0, 3}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " " + dtype_name(dt) + " window " + std::to_string(limits.window) +
                       " softcap " + std::to_string(limits.softcap) + " decode " + std::to_string(decode_tokens));
          Case c{64, 8, 2, dt, decode_tokens};
          c.limits = limits;
          c.write_in_call = decode_tokens == 0;
          run_case(c, pool);
        }
      }
    }
  }
}

TEST(PagedAttention, Q8_0CacheNeedsWholeBlocksPerHead) {
  EXPECT_TRUE(kv_dtype_supported(DType::kQ8_0, 64));
  EXPECT_TRUE(kv_dtype_supported(DType::kQ8_0, 96));
  EXPECT_FALSE(kv_dtype_supported(DType::kQ8_0, 80));
  EXPECT_FALSE(kv_dtype_supported(DType::kQ4_0, 64));
  EXPECT_TRUE(kv_dtype_supported(DType::kBF16, 80));
}

// One to three decode tokens with 5 KV heads: the heads of a token are split
// into runs of unequal length (2, 2, 1 with two tokens on two threads).
TEST(PagedAttention, SmallDecodeBatchesSplitHeadsIntoRuns) {
  IsaGuard guard;
  ThreadPool pool2(2), pool3(3);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    set_active_isa(isa);
    for (int tokens = 1; tokens <= 3; ++tokens) {
      for (ThreadPool* pool : {&pool2, &pool3}) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " tokens " + std::to_string(tokens) + " threads " +
                     std::to_string(pool->size()));
        run_case(Case{64, 10, 5, DType::kF16, tokens}, *pool);
        run_case(Case{64, 10, 5, DType::kQ8_0, tokens}, *pool);
      }
    }
  }
}

}  // namespace
}  // namespace parallm::cpu
