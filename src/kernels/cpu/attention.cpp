// Paged attention, one work item per (query token, run of KV heads). The
// active ISA's kernel (attention_avx512.cpp) runs an item when it has one,
// reading the run's heads block by block; the portable item here takes one
// head, widens each key block to f32 once (one contiguous load_row_f32),
// scores it against every query head of its GQA group, then a numerically
// stable softmax and the weighted sum of values. Scratch buffers are per
// thread and reused, so a decode step allocates nothing.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/ops.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

// First byte of (block, head) in a pool: [n_blocks, n_kv_head, block_size] rows.
inline size_t block_head_offset(const PagedKv& kv, int64_t block, int64_t head) {
  return static_cast<size_t>((block * kv.n_kv_head + head) * kv.block_size) * kv_row_bytes(kv);
}

// Per-thread scratch, grown as needed and kept across calls.
struct Scratch {
  std::vector<float> scores, kbuf, vbuf, qbuf;
  std::vector<uint8_t> qrow;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

size_t kv_row_bytes(const PagedKv& kv) { return dtype_row_bytes(kv.dtype, kv.head_dim); }

bool kv_dtype_supported(DType t, int64_t head_dim) {
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) return true;
  return t == DType::kQ8_0 && head_dim % dtype_block_elems(t) == 0;
}

namespace {

// One head's row x [head_dim] into row `row` of a q8_0 chunk (attention.h):
// quantized as a ggml q8_0 row, then its quants and scales put in place.
void store_q8_0_row(const float* x, uint8_t* chunk, int64_t row, int64_t block_size, int64_t head_dim) {
  constexpr int64_t kBlock = 32, kBlockBytes = 34;
  const int64_t nblk = head_dim / kBlock;
  uint8_t blocks[16 * kBlockBytes];
  for (int64_t b0 = 0; b0 < nblk; b0 += 16) {  // 16 blocks (512 values) at a time
    const int64_t nb = std::min<int64_t>(16, nblk - b0);
    convert_row(DType::kQ8_0, x + b0 * kBlock, blocks, nb * kBlock);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* src = blocks + b * kBlockBytes;
      std::memcpy(chunk + row * head_dim + (b0 + b) * kBlock, src + 2, kBlock);
      std::memcpy(chunk + block_size * head_dim + ((b0 + b) * block_size + row) * 2, src, 2);
    }
  }
}

constexpr int kForRead = 0, kForWrite = 1;

// Every cache line of [p, p + n), fetched for reading or writing (RW).
template <int RW>
void prefetch_lines(const char* p, int64_t n) {
  const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  for (uintptr_t a = first; a < reinterpret_cast<uintptr_t>(p + n); a += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(a), RW);
  }
}

// The lines token `slot`'s K and V rows go to, every head, fetched for
// writing one token ahead of the stores.
// NOTE: a decode step's rows land in as many sequences' blocks, which the
// step before left in cache rarely; stored one after another, each row
// waited for its own write miss: with a q8_0 cache the stores (quants line
// and scales line of each row) were 4% of a 32-stream server step in perf.
// Fetched ahead, in one process alternating every 8 steps (32 sequences,
// contexts 32-160): a step's stores and attention 2.52 -> 2.42 and 2.59 ->
// 2.32 ms (q8_0), 4.32 -> 4.18 and 4.10 -> 4.00 (f16); the stores alone
// ~0.27 -> ~0.1 ms a step.
void prefetch_rows_for_write(const PagedKv& kv, int64_t slot) {
  const int64_t block = slot / kv.block_size, row = slot % kv.block_size;
  const int64_t rb = static_cast<int64_t>(kv_row_bytes(kv));
  for (int64_t h = 0; h < kv.n_kv_head; ++h) {
    const size_t chunk = block_head_offset(kv, block, h);
    for (const void* pool : {kv.k, kv.v}) {
      const char* c = static_cast<const char*>(pool) + chunk;
      if (kv.dtype != DType::kQ8_0) {
        prefetch_lines<kForWrite>(c + row * rb, rb);
        continue;
      }
      prefetch_lines<kForWrite>(c + row * kv.head_dim, kv.head_dim);  // the row's quants
      const char* scales = c + kv.block_size * kv.head_dim;
      for (int64_t b = 0; b < kv.head_dim / 32; ++b) {
        prefetch_lines<kForWrite>(scales + (b * kv.block_size + row) * 2, 2);
      }
    }
  }
}

}  // namespace

void kv_write(const PagedKv& kv, const float* k, const float* v, const int64_t* slots, int64_t n_tokens) {
  PARALLM_CHECK(kv_dtype_supported(kv.dtype, kv.head_dim));
  const int64_t width = kv.n_kv_head * kv.head_dim;
  const size_t rb = kv_row_bytes(kv);
  // One pool whose rows serve as keys and values (MLA's latent): stored once.
  const bool values_in_keys = kv.v == kv.k;
  PARALLM_CHECK(!values_in_keys || v == k);
  if (n_tokens > 0) prefetch_rows_for_write(kv, slots[0]);
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (t + 1 < n_tokens) prefetch_rows_for_write(kv, slots[t + 1]);
    const int64_t block = slots[t] / kv.block_size, row = slots[t] % kv.block_size;
    for (int64_t h = 0; h < kv.n_kv_head; ++h) {
      const size_t chunk = block_head_offset(kv, block, h);
      const float* kr = k + t * width + h * kv.head_dim;
      const float* vr = v + t * width + h * kv.head_dim;
      if (kv.dtype == DType::kQ8_0) {
        store_q8_0_row(kr, static_cast<uint8_t*>(kv.k) + chunk, row, kv.block_size, kv.head_dim);
        if (!values_in_keys) store_q8_0_row(vr, static_cast<uint8_t*>(kv.v) + chunk, row, kv.block_size, kv.head_dim);
        continue;
      }
      const size_t at = chunk + static_cast<size_t>(row) * rb;
      convert_row(kv.dtype, kr, static_cast<uint8_t*>(kv.k) + at, kv.head_dim);
      if (!values_in_keys) convert_row(kv.dtype, vr, static_cast<uint8_t*>(kv.v) + at, kv.head_dim);
    }
  }
}

void kv_widen_chunk(const PagedKv& kv, const void* chunk, int64_t n_rows, float* dst) {
  const int64_t hd = kv.head_dim, bs = kv.block_size;
  if (kv.dtype != DType::kQ8_0) {
    load_row_f32(kv.dtype, chunk, dst, n_rows * hd);
    return;
  }
  const int8_t* quants = static_cast<const int8_t*>(chunk);
  const uint8_t* scales = static_cast<const uint8_t*>(chunk) + bs * hd;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < hd / 32; ++b) {
      uint16_t h;
      std::memcpy(&h, scales + (b * bs + r) * 2, 2);
      const float d = fp16_to_fp32(h);
      for (int64_t i = 0; i < 32; ++i) dst[r * hd + b * 32 + i] = d * static_cast<float>(quants[r * hd + b * 32 + i]);
    }
  }
}

namespace {

// One work item: query token t against KV head h_kv, for the `group` query
// heads that share it. Compiled once per ISA level (target_clones; the loader
// picks one at startup), with the head_dim loops written as 16 independent
// lanes so every level vectorizes them without reassociating sums.
// NOTE: calling ops.h's dot/axpy per key row cost ~40 ns a call through the
// ISA table, which at 160 positions x 12 heads x 12 layers was a third of a
// llama-110m decode step; one dispatched call per item removes that.
__attribute__((target_clones("avx512f", "avx2", "default"))) void attend_item(float* og, const float* qg,
                                                                              const PagedKv& kv, const int32_t* table,
                                                                              int64_t len, int64_t h_kv, int64_t group,
                                                                              int64_t max_len, float scale,
                                                                              AttendLimits limits, Scratch& s) {
  const int64_t hd = kv.head_dim, bs = kv.block_size;
  // Keys [lo, len): all of them, or the window's; blocks before lo's are skipped.
  const int64_t lo = limits.window > 0 ? std::max<int64_t>(0, len - limits.window) : 0;
  const int64_t first = lo / bs * bs;
  float* scores = s.scores.data();
  if (kv.dtype == DType::kQ8_0) {  // queries rounded through q8_0 too (attention.h)
    for (int64_t g = 0; g < group; ++g) {
      convert_row(DType::kQ8_0, qg + g * hd, s.qrow.data(), hd);
      load_row_f32(DType::kQ8_0, s.qrow.data(), s.qbuf.data() + g * hd, hd);
    }
    qg = s.qbuf.data();
  }
  constexpr int kLanes = 16;
  const bool lanes_fit = hd % kLanes == 0;
  for (int64_t p0 = first; p0 < len; p0 += bs) {
    const int64_t n = std::min(bs, len - p0);
    const uint8_t* src = static_cast<const uint8_t*>(kv.k) + block_head_offset(kv, table[p0 / bs], h_kv);
    const float* kb = reinterpret_cast<const float*>(src);
    if (kv.dtype != DType::kF32) {
      kv_widen_chunk(kv, src, n, s.kbuf.data());
      kb = s.kbuf.data();
    }
    for (int64_t g = 0; g < group; ++g) {
      const float* qh = qg + g * hd;
      float* sc = scores + g * max_len + p0;
      for (int64_t r = 0; r < n; ++r) {
        const float* kr = kb + r * hd;
        float acc = 0.f;
        if (lanes_fit) {
          float lane[kLanes] = {};
          for (int64_t d = 0; d < hd; d += kLanes) {
            for (int j = 0; j < kLanes; ++j) lane[j] += qh[d + j] * kr[d + j];
          }
          for (int j = 0; j < kLanes; ++j) acc += lane[j];
        } else {
          for (int64_t d = 0; d < hd; ++d) acc += qh[d] * kr[d];
        }
        sc[r] = acc * scale;
        if (limits.softcap > 0.0f) sc[r] = limits.softcap * std::tanh(sc[r] / limits.softcap);
      }
    }
  }
  // ops.h's softmax runs the active ISA's vectorized exp: a scalar std::exp
  // per score was a visible share of decode at a few hundred positions.
  for (int64_t g = 0; g < group; ++g) {
    float* sc = scores + g * max_len;
    softmax(sc + lo, len - lo);
    std::fill(sc + first, sc + lo, 0.f);  // outside the window: no weight
  }
  std::fill(og, og + group * hd, 0.f);
  for (int64_t p0 = first; p0 < len; p0 += bs) {
    const int64_t n = std::min(bs, len - p0);
    const uint8_t* src = static_cast<const uint8_t*>(kv.v) + block_head_offset(kv, table[p0 / bs], h_kv);
    const float* vb = reinterpret_cast<const float*>(src);
    if (kv.dtype != DType::kF32) {
      kv_widen_chunk(kv, src, n, s.vbuf.data());
      vb = s.vbuf.data();
    }
    for (int64_t g = 0; g < group; ++g) {
      const float* sc = scores + g * max_len + p0;
      float* oh = og + g * hd;
      for (int64_t r = 0; r < n; ++r) {
        const float w = sc[r];
        const float* vr = vb + r * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] += w * vr[d];
      }
    }
  }
}

// The first key blocks of the next portable item, fetched while this item
// runs: an item's first blocks would otherwise start from a DRAM miss.
void prefetch_item_start(const PagedKv& kv, const int32_t* table, int64_t h_kv, int64_t len) {
  const int64_t chunk_bytes = kv.block_size * static_cast<int64_t>(kv_row_bytes(kv));
  const int64_t n_blocks = std::min<int64_t>(2, (len + kv.block_size - 1) / kv.block_size);
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch_lines<kForRead>(static_cast<const char*>(kv.k) + block_head_offset(kv, table[b], h_kv), chunk_bytes);
  }
}

}  // namespace

void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* const* block_tables, int64_t n_tokens, int64_t n_head,
                     float scale, ThreadPool& pool, const KvRows* write, AttendLimits limits) {
  const int64_t n_kv_head = kv.n_kv_head, hd = kv.head_dim, bs = kv.block_size;
  PARALLM_CHECK(n_head % n_kv_head == 0 && kv_dtype_supported(kv.dtype, hd));
  const int64_t group = n_head / n_kv_head;
  int32_t max_pos = 0;
  for (int64_t t = 0; t < n_tokens; ++t) max_pos = std::max(max_pos, positions[t]);
  const int64_t max_len = max_pos + 1;
  // The ISA's own kernel when it has one for this head size.
  // NOTE: windows and soft-caps (Gemma) run the portable loop for now.
  const bool plain = limits.window <= 0 && limits.softcap <= 0.0f;
  void (*const fast)(const AttendTask&) = plain && hd % 16 == 0 ? active_kernels().attend : nullptr;

  // Query tiles: up to kTileQueries consecutive tokens of one sequence at
  // consecutive positions (a prefill chunk) go to the ISA kernel together,
  // which widens each key and value chunk once for all of them
  // (attention_avx512.cpp); decode tokens are tiles of one. The portable
  // loop takes one token at a time. NOTE: tiles of 16 against 8, kernel
  // lab attention/prefill128-hd64 5.85 -> 4.55 ms, prefill512-hd64 78.5 ->
  // 65.4 (each tile reads its keys and values once); 32 no better.
  constexpr int64_t kTileQueries = 16;
  // The caller's buffer, reached by reference: the pool's workers read it,
  // and a thread_local named inside their lambda would be their own.
  thread_local std::vector<int64_t> tile_storage;
  std::vector<int64_t>& tile_first = tile_storage;  // [n_tiles + 1]: each tile's first token
  tile_first.clear();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const bool joins = fast != nullptr && t > 0 && t - tile_first.back() < kTileQueries &&
                       seq_of_token[t] == seq_of_token[t - 1] && positions[t] == positions[t - 1] + 1;
    if (!joins) tile_first.push_back(t);
  }
  const int64_t n_tiles = static_cast<int64_t>(tile_first.size());
  tile_first.push_back(n_tokens);
  int64_t max_tile = 1;
  for (int64_t i = 0; i < n_tiles; ++i) max_tile = std::max(max_tile, tile_first[i + 1] - tile_first[i]);

  // Items: a query tile against a run of KV heads. The ISA kernel reads a
  // run block by block across its heads (adjacent in the pool), so runs are
  // as long as still leaves every thread a few items; the portable loop
  // takes one head at a time.
  const int64_t n_threads = pool.size();
  const int64_t runs_per_tile =
      fast == nullptr ? n_kv_head : std::min<int64_t>(n_kv_head, (4 * n_threads + n_tiles - 1) / n_tiles);
  const int64_t run_len = (n_kv_head + runs_per_tile - 1) / runs_per_tile;
  const int64_t n_runs = (n_kv_head + run_len - 1) / run_len;
  const int64_t n_items = n_tiles * n_runs;
  auto run_heads = [&](int64_t run) { return std::min(run_len, n_kv_head - run * run_len); };

  // Items split by cost, not count: an item costs about its context length
  // (plus a fixed part) per head, and a split by count gave the last thread
  // the long rows of a causal prefill (3x the first one's work; it showed as
  // the other thread waiting). In batches each thread starts on its share
  // and a thread that finishes early takes items from the back of the
  // other's (WorkRanges).
  // NOTE: with the shares alone, the two threads of a 32-sequence decode
  // step finished 11 us (q8_0 cache) and 26 us (f16) apart on average, 7-10%
  // of the region, on this shared host; taking over cut a step's attention
  // by 0.01-0.17 ms and its median by 0.06-0.1 ms (one process, alternating
  // every 8 steps, four runs). A lone token's few short items ran 3-6%
  // slower with the claims, so they keep the fixed shares.
  constexpr int64_t kStealMinTokens = 8;
  constexpr int64_t kItemFixedCost = 16;
  auto item_cost = [&](int64_t item) {
    const int64_t tile = item / n_runs, t0 = tile_first[tile], nq = tile_first[tile + 1] - t0;
    return (nq * (positions[t0] + 1 + kItemFixedCost) + nq * (nq - 1) / 2) * run_heads(item % n_runs);
  };
  int64_t total_cost = 0;
  for (int64_t item = 0; item < n_items; ++item) total_cost += item_cost(item);
  const bool steal = n_tokens >= kStealMinTokens && n_threads > 1 && n_threads <= WorkRanges::kMaxThreads;
  // The caller's buffer, reused (a step allocates nothing), and named by a
  // reference: the region's lambda captures that, where a thread_local name
  // would be each worker's own.
  thread_local std::vector<int64_t> share_storage;
  std::vector<int64_t>& share_begin = share_storage;
  share_begin.assign(static_cast<size_t>(n_threads) + 1, n_items);
  share_begin[0] = 0;
  for (int64_t item = 0, ti = 1, cum = 0; item < n_items && ti < n_threads; ++item) {
    while (ti < n_threads && cum >= total_cost * ti / n_threads) share_begin[static_cast<size_t>(ti++)] = item;
    cum += item_cost(item);
  }
  WorkRanges ranges;
  if (steal) {
    for (int64_t ti = 0; ti < n_threads; ++ti) {
      ranges.set(static_cast<int>(ti), share_begin[static_cast<size_t>(ti)], share_begin[static_cast<size_t>(ti) + 1]);
    }
  }

  // The batch's K/V rows: a decode batch's land in as many sequences' blocks,
  // rarely in cache, and one thread storing them all waited on one write miss
  // after another (~25-50 us a layer at 32 sequences, 4% of the step). Large
  // batches share the stores between the threads, who meet at a spin barrier
  // before any reads them; a few tokens are stored by the caller.
  constexpr int64_t kSharedWriteMinTokens = 8;
  const bool shared_write = write != nullptr && n_tokens >= kSharedWriteMinTokens && n_threads > 1;
  if (write != nullptr && !shared_write) kv_write(kv, write->k, write->v, write->slots, n_tokens);
  RegionBarrier written;
  pool.run([&](int ti, int nt) {
    if (shared_write) {
      int64_t tb, te;
      ThreadPool::split(n_tokens, 1, ti, nt, &tb, &te);
      const int64_t width = kv.n_kv_head * kv.head_dim;
      if (tb < te) kv_write(kv, write->k + tb * width, write->v + tb * width, write->slots + tb, te - tb);
      written.arrive_and_wait(nt);
    }
    Scratch& s = scratch();
    if (static_cast<int64_t>(s.scores.size()) < run_len * group * max_tile * max_len) {
      s.scores.resize(static_cast<size_t>(run_len * group * max_tile * max_len));
    }
    if (static_cast<int64_t>(s.kbuf.size()) < bs * hd) {
      s.kbuf.resize(static_cast<size_t>(bs * hd));
      s.vbuf.resize(static_cast<size_t>(bs * hd));
    }
    if (fast == nullptr && kv.dtype == DType::kQ8_0) {
      if (static_cast<int64_t>(s.qbuf.size()) < group * hd) s.qbuf.resize(static_cast<size_t>(group * hd));
      if (s.qrow.size() < kv_row_bytes(kv)) s.qrow.resize(kv_row_bytes(kv));
    }
    // Item `item`, whose start the item before on this thread fetched when
    // `start_fetched`; it fetches the start of `next` (-1: none) as it ends.
    auto run_item = [&](int64_t item, int64_t next, bool start_fetched) {
      const int64_t tile = item / n_runs, t = tile_first[tile], h0 = (item % n_runs) * run_len;
      const int64_t offset = (t * n_head + h0 * group) * hd;
      if (fast != nullptr) {
        AttendTask task{out + offset,
                        q + offset,
                        static_cast<const char*>(kv.k),
                        static_cast<const char*>(kv.v),
                        kv.dtype,
                        block_tables[seq_of_token[t]],
                        positions[t] + 1,
                        h0,
                        n_kv_head,
                        bs,
                        hd,
                        group,
                        scale,
                        s.scores.data(),
                        run_heads(item % n_runs)};
        task.n_queries = tile_first[tile + 1] - t;
        task.q_stride = task.out_stride = n_head * hd;
        if (next >= 0) {
          const int64_t t1 = tile_first[next / n_runs];
          task.next_table = block_tables[seq_of_token[t1]];
          task.next_len = positions[t1] + 1;
          task.next_h_kv = (next % n_runs) * run_len;
        }
        task.start_fetched = start_fetched;
        fast(task);
        return;
      }
      if (next >= 0) {
        const int64_t t1 = tile_first[next / n_runs];
        prefetch_item_start(kv, block_tables[seq_of_token[t1]], next % n_runs, positions[t1] + 1);
      }
      attend_item(out + offset, q + offset, kv, block_tables[seq_of_token[t]], positions[t] + 1, h0, group, max_len,
                  scale, limits, s);
    };
    int64_t b = share_begin[static_cast<size_t>(ti)], e = share_begin[static_cast<size_t>(ti) + 1];
    int64_t fetched = -1;  // the item whose start the last one fetched
    while (steal ? ranges.next(ti, nt, 1, &b, &e) : b < e) {
      for (int64_t item = b; item < e; ++item) {
        // After a claim's last item, the thread's own next one is a guess: a
        // thief may take it (its start is then fetched for nothing).
        const int64_t next = item + 1 < e ? item + 1 : (steal ? ranges.peek_own(ti) : -1);
        run_item(item, next, item == fetched);
        fetched = next;
      }
      if (!steal) break;
    }
  });
}

}  // namespace parallm::cpu
