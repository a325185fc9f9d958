// Threading and dispatch of matmul (matmul.h): splits the rows of all targets
// into one contiguous range per thread and hands each piece to the active
// ISA's row kernel (isa_table.h). When the kernel wants 8-bit activations, a
// few tokens are quantized by each thread for itself (a few hundred
// nanoseconds, no waiting); batches by all threads together, a share each,
// meeting at one spin barrier before the rows. The float GEMM's transposed x
// is prepared the same way, once for all the call's matrices.
//
// Mat-vec (decode, a few tokens) is memory-bound, and on a shared host one
// core often streams slower than the other: with a fixed split the faster
// thread then waits at the barrier (a fifth of decode time in perf). So each
// thread takes its range in shrinking chunks from the front, and a thread
// that runs out takes chunks from the back of the range with the most left.
// Every range is still read front to back by its owner, one stream the
// hardware prefetcher follows. Packed matrices and float GEMMs with a shared
// x^T split the same way (no per-call packing to repeat per chunk). NOTE:
// handing out interleaved chunks from one shared counter measured 0.69 vs
// 0.86 of bandwidth (the streams broke up).
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/packed.h"
#include "util/check.h"
#include "util/huge_pages.h"

namespace parallm::cpu {

namespace {

// Rows per scheduling unit: keeps SIMD row groups, GEMM panels and packed
// 16-row groups whole.
constexpr int64_t kRowGrain = kPackRows;

void check_target(const MatmulTarget& t, int64_t n_in) {
  PARALLM_CHECK(t.out != nullptr && t.w != nullptr && t.n_out >= 0);
  PARALLM_CHECK_MSG(n_in % dtype_block_elems(t.wtype) == 0,
                    std::string("matmul: n_in not a multiple of the block of ") + dtype_name(t.wtype));
  PARALLM_CHECK(t.packed ? t.w_row_stride_bytes >= packed_group_bytes(t.wtype, n_in)
                         : t.w_row_stride_bytes >= dtype_row_bytes(t.wtype, n_in));
}

// Batches up to this many tokens take the stealing split (every ISA runs them
// as mat-vec, whose row kernels need no per-call packing); packed matrices
// take it at any batch size (their GEMM tiles need no per-call packing either).
constexpr int64_t kStealMaxTokens = 3;

// Batches from this size on are quantized by the threads together, a share
// of the tokens each, into one buffer. NOTE: each thread quantizing the
// whole batch for itself was 5% of a 32-sequence serving step (perf).
constexpr int64_t kSharedQuantizeMinTokens = 8;

// Units in one panel of the float GEMM (48 rows, gemm_avx512.cpp).
constexpr uint32_t kGemmPanelUnits = 3;

}  // namespace

void matmul_multi(const MatmulTarget* targets, int n_targets, const float* x, int64_t n_tokens, int64_t n_in,
                  ThreadPool& pool) {
  PARALLM_CHECK(n_tokens >= 0 && n_in > 0 && n_targets >= 0);
  if (n_tokens == 0) return;
  int64_t total_units = 0;
  for (int i = 0; i < n_targets; ++i) {
    check_target(targets[i], n_in);
    total_units += (targets[i].n_out + kRowGrain - 1) / kRowGrain;
  }
  const IsaKernels& k = active_kernels();
  bool need_xq = false, all_packed = true, all_xt = k.wants_xt != nullptr;
  for (int i = 0; i < n_targets; ++i) {
    const MatmulTarget& t = targets[i];
    need_xq = need_xq || k.wants_xq(t.wtype, n_tokens, t.packed);
    all_packed = all_packed && t.packed;
    all_xt = all_xt && k.wants_xt(t.wtype, n_tokens, t.packed);
  }
  const size_t xq_bytes = need_xq ? k.xq_bytes(n_tokens, n_in) : 0;
  // x^T for the float GEMM, when every target takes it (one layout for all).
  const size_t xt_floats = all_xt && n_targets > 0 ? k.xt_floats(n_tokens, n_in) : 0;
  auto wants_xt = [&](const MatmulTarget& t) { return xt_floats > 0 && k.wants_xt(t.wtype, n_tokens, t.packed); };

  // Units [ub, ue) across the targets, one row-kernel call per target touched.
  auto run_units = [&](int64_t ub, int64_t ue, const void* xq, const float* xt) {
    int64_t unit0 = 0;  // first unit of target i
    for (int i = 0; i < n_targets && unit0 < ue; ++i) {
      const MatmulTarget& t = targets[i];
      const int64_t units = (t.n_out + kRowGrain - 1) / kRowGrain;
      const int64_t b = std::max(ub, unit0) - unit0, e = std::min(ue, unit0 + units) - unit0;
      if (b < e) {
        RowsTask task{t.out,
                      t.n_out,
                      static_cast<const char*>(t.w),
                      t.w_row_stride_bytes,
                      t.wtype,
                      x,
                      xq,
                      n_tokens,
                      n_in,
                      b * kRowGrain,
                      std::min(e * kRowGrain, t.n_out),
                      t.packed,
                      wants_xt(t) ? xt : nullptr};
        k.rows(task);
      }
      unit0 += units;
    }
  };
  // Every thread of the region must call this (the shared path waits for all).
  const bool shared_xq = xq_bytes > 0 && n_tokens >= kSharedQuantizeMinTokens && pool.size() > 1;
  const bool shared_xt = xt_floats > 0 && pool.size() > 1;
  // The calling thread's buffers are lent to the region when shared.
  thread_local HugeVector<uint8_t> caller_xq;
  thread_local HugeVector<float> caller_xt;
  uint8_t* shared_q = shared_xq ? grown(caller_xq, xq_bytes) : nullptr;
  float* shared_t = shared_xt ? grown(caller_xt, xt_floats) : nullptr;
  RegionBarrier prepared;
  struct Prepared {
    const void* xq = nullptr;
    const float* xt = nullptr;
  };
  // x in the forms the kernels want, shared: each thread does a share of the
  // tokens, then all meet at one barrier. NOTE: each thread transposing the
  // whole x for itself, once per target, was 3-4% of the f16 GEMM (rdtsc).
  auto prepare_x = [&](int thread_index, int n_threads) -> Prepared {
    // This thread's tokens: a share when shared, else all of them.
    auto tokens = [&](bool is_shared, int64_t grain, int64_t* tb, int64_t* te) {
      *tb = 0, *te = n_tokens;
      if (is_shared) ThreadPool::split(n_tokens, grain, thread_index, n_threads, tb, te);
    };
    Prepared p;
    int64_t tb, te;
    if (xq_bytes > 0) {
      thread_local HugeVector<uint8_t> own;
      uint8_t* dst = shared_xq ? shared_q : grown(own, xq_bytes);
      tokens(shared_xq, 1, &tb, &te);
      if (tb < te) k.quantize_x(x, dst, n_tokens, n_in, tb, te);
      p.xq = dst;
    }
    if (xt_floats > 0) {
      thread_local HugeVector<float> own;
      float* dst = shared_xt ? shared_t : grown(own, xt_floats);
      tokens(shared_xt, kXtTokenGrain, &tb, &te);
      if (tb < te) k.pack_xt(x, dst, n_tokens, n_in, tb, te);
      p.xt = dst;
    }
    if (shared_xq || shared_xt) prepared.arrive_and_wait(n_threads);
    return p;
  };

  // Float GEMMs with a shared x^T need no per-call packing either, so they
  // take the stealing split too, in whole 48-row panels (gemm_avx512.cpp).
  // NOTE: with the static split the faster thread waited 10-14% of each f16
  // GEMM region on the Ice Lake host.
  // The AVX2 and scalar levels (no wants_xt) pack nothing per call at all:
  // their batches read x in place over f32 panels of 32 rows. NOTE: AVX2
  // level forced on the Ice Lake host, kernel lab, six alternating runs:
  // prefill128/f16 median 85 -> 89 GFLOP/s, batch32/q8_0 76 -> 85, batch32/f16
  // 74 -> 71 (3 of 6 faster).
  const bool packs_nothing = k.wants_xt == nullptr;
  const bool steal = (n_tokens <= kStealMaxTokens || all_packed || shared_xt || packs_nothing) && pool.size() > 1 &&
                     pool.size() <= WorkRanges::kMaxThreads;
  if (!steal) {
    pool.run([&](int thread_index, int n_threads) {
      const Prepared p = prepare_x(thread_index, n_threads);
      int64_t ub, ue;
      ThreadPool::split(total_units, 1, thread_index, n_threads, &ub, &ue);
      if (ub >= ue) return;
      run_units(ub, ue, p.xq, p.xt);
    });
    return;
  }
  // Packed batches run their groups in pairs (packed_avx512.cpp), so ranges
  // and claims come in even numbers of units. NOTE: with single units, the
  // odd claims left one lone group each, run by the slower one-group tile:
  // 5% of a 32-sequence decode step (perf); even claims took the kernel lab's
  // batch32 from 7.2-8.1 to 7.05-7.2 ms (q8_0), 6.5-7.0 to 6.2-6.3 (q4_0).
  const uint32_t grain = all_packed && n_tokens > 1                    ? 2
                         : shared_xt                                   ? kGemmPanelUnits
                         : packs_nothing && n_tokens > kStealMaxTokens ? 2
                                                                       : 1;
  WorkRanges ranges;
  for (int ti = 0; ti < pool.size(); ++ti) {
    int64_t ub, ue;
    ThreadPool::split(total_units, grain, ti, pool.size(), &ub, &ue);
    ranges.set(ti, ub, ue);
  }
  pool.run([&](int thread_index, int n_threads) {
    const Prepared p = prepare_x(thread_index, n_threads);
    int64_t b, e;
    while (ranges.next(thread_index, n_threads, grain, &b, &e)) run_units(b, e, p.xq, p.xt);
  });
}

void matmul(float* out, const void* w, DType wtype, size_t w_row_stride_bytes, const float* x, int64_t n_tokens,
            int64_t n_in, int64_t n_out, ThreadPool& pool) {
  MatmulTarget t{out, w, wtype, w_row_stride_bytes, n_out};
  matmul_multi(&t, 1, x, n_tokens, n_in, pool);
}

}  // namespace parallm::cpu
