// AVX-512 GEMM for batches (prefill, batched decode): out = x W^T over the
// rows [o_begin, o_end) of one matrix, any weight dtype.
//
// Layout (BLIS-style, with the roles chosen so that no weight transpose is
// needed):
//   - x is transposed once per call into token blocks xt[block][k][width]
//     (16x16 in-register transposes, zero-padded), shared by all rows. A
//     block is 64 tokens wide (4 vectors), 48 (3) or 32 (2), see
//     token_blocks();
//   - weight rows are converted to f32 one panel of kPanelRows rows at a time
//     (row-major, this is where f16/bf16/q8_0/... are widened);
//   - the micro-kernel keeps a tile of 6 rows x 64 tokens (8 x 48, 12 x 32)
//     in 24 zmm accumulators: per k it loads 4 (3, 2) vectors of x^T and
//     broadcasts 6 (8, 12) weights, 24 FMAs; no horizontal sums. K is
//     blocked only past kKc, so that a token block of x^T and the panel stay
//     in L2;
//   - results collect in a panel-sized buffer c[row][token] that is
//     transposed into out[token][row] once per panel.
// NOTE: 6 x 64 needs 10 loads per 24 FMAs, 8 x 48 11, 12 x 32 14. Alone on
// L1-resident data on an Ice Lake core: 8 x 48 at kc 128 reached 170-176
// GFLOP/s of the core's 177, 12 x 32 at kc 256 (the previous kernel)
// 145-155; over a 48-row panel 132-140 against 109-119. But a 32-token block
// in the 8-row tile (8 x 32) is slower than 12 x 32, so a batch is cut into
// 64-token blocks, then a 48 where exactly 48 are left, then 32s. NOTE:
// 128-token prefill of llama-110m f16 as 64 + 64 against 48 + 48 + 32
// (bench-model, five alternating runs): 1,312-1,338 against 1,155-1,312
// tokens/s, faster in all five.
// NOTE: the first version (dot-product tiles of 4 rows x 6 tokens with
// horizontal sums, no x packing) reached 50-74% of the FMA peak per core
// (50% at n_in = 2048, where a tile's rows and x no longer fit L1).
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/quant.h"
#include "util/huge_pages.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int64_t kPanelRows = 48;  // a multiple of every tile's rows
// k block: a 64-token block of x^T (512 KB) and the panel (384 KB) in L2.
// NOTE: with the scratch on huge pages, llama-110m's f16 GEMM at 128 tokens
// in one process, alternating against k blocks of 128 (sized for L1, the
// earlier choice): 256 +3-5%, 1024 and 2048 (whole rows here) +6-8%, in 14-20
// of 20 pairs each; 64 tokens +2%, 32 unchanged. Each tile then loads and
// stores its accumulators once per k block.
constexpr int64_t kKc = 2048;

// The tile shapes: rows x (vectors of 16 tokens), 24 accumulators each.
constexpr int kBroadRows = 6, kBroadVecs = 4;     // 64-token blocks
constexpr int kWideRows = 8, kWideVecs = 3;       // 48-token blocks
constexpr int kNarrowRows = 12, kNarrowVecs = 2;  // 32-token blocks
constexpr int tile_rows(int width) { return width == 64 ? kBroadRows : width == 48 ? kWideRows : kNarrowRows; }

// ------------------------------------------------------------ widening rows
template <class L>
void widen_row(const char* row, float* y, int64_t n) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    // A panel's rows are one run of memory, read here in a burst: the bytes
    // kPrefetchAhead on are requested so the stream does not restart at
    // every 4 KB page (isa_table.h). NOTE: f16 GEMM of llama-110m's
    // matrices, in one process with and without, alternating: faster in
    // 30-31 of 40 pairs at 32 tokens (median +5%), 29 at 64 (+2%), 23-31 at
    // 128 (+1-2%), 16 at 256 (same).
#pragma GCC unroll 2
    for (int64_t b = 0; b < 32 * L::kBytes; b += 64)
      _mm_prefetch(row + L::kBytes * k + kPrefetchAhead + b, _MM_HINT_T0);
    _mm512_storeu_ps(y + k, L::load(row, k));
    _mm512_storeu_ps(y + k + 16, L::load(row, k + 16));
  }
  for (; k + 16 <= n; k += 16) _mm512_storeu_ps(y + k, L::load(row, k));
  if (k < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(y + k, m, L::load_mask(row, k, m));
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
    const __m128i* q = reinterpret_cast<const __m128i*>(b[i].qs);
    _mm512_storeu_ps(y + 32 * i, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q)))));
    _mm512_storeu_ps(y + 32 * i + 16,
                     _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q + 1)))));
  }
}

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  const __m512i eight = _mm512_set1_epi32(8);
  for (int64_t i = 0; i < nb; ++i) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
    const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs)));
    const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(15)), eight);
    const __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
    _mm512_storeu_ps(y + 32 * i, _mm512_mul_ps(d, _mm512_cvtepi32_ps(lo)));
    _mm512_storeu_ps(y + 32 * i + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(hi)));
  }
}

void dequant_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  const __m512i low4 = _mm512_set1_epi32(15);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = _cvtsh_ss(x[b].d), dmin = _cvtsh_ss(x[b].dmin);
    const uint8_t* s = x[b].scales;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      q4_k_scale_min(s, j, &sc, &m);
      const __m512 ds = _mm512_set1_ps(d * sc), dm = _mm512_set1_ps(dmin * m);
      const uint8_t* qq = x[b].qs + (j / 2) * 32;
      const int shift = (j % 2) * 4;
      for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_and_si512(
            _mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qq + 16 * h))),
                              shift),
            low4);
        _mm512_storeu_ps(y + b * kQK_K + j * 32 + 16 * h, _mm512_fmsub_ps(ds, _mm512_cvtepi32_ps(q), dm));
      }
    }
  }
}

void dequant_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  const __m512i low4 = _mm512_set1_epi32(15), low2 = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(32);
  auto six = [&](__m512i lo4, __m512i hi2) {
    return _mm512_cvtepi32_ps(
        _mm512_sub_epi32(_mm512_or_si512(lo4, _mm512_slli_epi32(_mm512_and_si512(hi2, low2), 4)), bias));
  };
  for (int64_t b = 0; b < nb; ++b) {
    const float d = _cvtsh_ss(x[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + h * 64;
      const uint8_t* qh = x[b].qh + h * 32;
      const int8_t* sc = x[b].scales + h * 8;
      float* yy = y + b * kQK_K + h * 128;
      for (int l = 0; l < 32; l += 16) {
        const int is = l / 16;
        const __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l)));
        const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l + 32)));
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + l)));
        _mm512_storeu_ps(yy + l, _mm512_mul_ps(_mm512_set1_ps(d * sc[is]), six(_mm512_and_si512(a, low4), q)));
        _mm512_storeu_ps(yy + l + 32, _mm512_mul_ps(_mm512_set1_ps(d * sc[is + 2]),
                                                    six(_mm512_and_si512(c, low4), _mm512_srli_epi32(q, 2))));
        _mm512_storeu_ps(yy + l + 64, _mm512_mul_ps(_mm512_set1_ps(d * sc[is + 4]),
                                                    six(_mm512_srli_epi32(a, 4), _mm512_srli_epi32(q, 4))));
        _mm512_storeu_ps(yy + l + 96, _mm512_mul_ps(_mm512_set1_ps(d * sc[is + 6]),
                                                    six(_mm512_srli_epi32(c, 4), _mm512_srli_epi32(q, 6))));
      }
    }
  }
}

}  // namespace

void dequant_row(DType t, const char* row, float* y, int64_t n) {
  switch (t) {
    case DType::kF32:
      widen_row<LoadF32>(row, y, n);
      return;
    case DType::kF16:
      widen_row<LoadF16>(row, y, n);
      return;
    case DType::kBF16:
      widen_row<LoadBF16>(row, y, n);
      return;
    case DType::kQ8_0:
      dequant_q8_0(reinterpret_cast<const BlockQ8_0*>(row), y, n / kQK8_0);
      return;
    case DType::kQ4_0:
      dequant_q4_0(reinterpret_cast<const BlockQ4_0*>(row), y, n / kQK4_0);
      return;
    case DType::kQ4_K:
      dequant_q4_k(reinterpret_cast<const BlockQ4_K*>(row), y, n / kQK_K);
      return;
    case DType::kQ6_K:
      dequant_q6_k(reinterpret_cast<const BlockQ6_K*>(row), y, n / kQK_K);
      return;
    default:  // the other block types: the scalar reference (quant.h)
      dequantize_row(t, row, y, n);
      return;
  }
}

namespace {

// ------------------------------------------------------------ token blocks
struct TokenBlock {
  int64_t t0;      // first token
  int width;       // 64, 48 or 32 (x^T row stride in floats)
  int vecs;        // vectors of 16 tokens holding real tokens (the rest is zero)
  int64_t offset;  // of the block in xt, floats
};

// Cuts n_tokens into 64-token blocks while 64 are left, then a 48-token
// block if exactly 48 are left, else 32-token blocks (128 = 64 + 64,
// 100 = 64 + 32 + 32, 48 = 48, 40 = 32 + 32).
std::vector<TokenBlock> token_blocks(int64_t n_tokens, int64_t n_in) {
  std::vector<TokenBlock> blocks;
  int64_t t0 = 0, offset = 0;
  while (t0 < n_tokens) {
    const int64_t rest = n_tokens - t0;
    const int width = rest >= 64 ? 64 : rest == 48 ? 48 : 32;
    const int64_t real = std::min<int64_t>(rest, width);
    blocks.push_back({t0, width, static_cast<int>((real + 15) / 16), offset});
    t0 += real;
    offset += width * n_in;
  }
  return blocks;
}

// ------------------------------------------------------------ x^T packing
// xt[b.offset + k*b.width + j] = x[(b.t0 + j)*n_in + k], zero past n_tokens,
// for the 16-token pieces that start in [t_begin, t_end) (t_begin a multiple
// of 16), and every piece past n_tokens when t_end == n_tokens.
void pack_xt(const float* x, int64_t n_tokens, int64_t n_in, const std::vector<TokenBlock>& blocks, float* xt,
             int64_t t_begin, int64_t t_end) {
  for (const TokenBlock& b : blocks) {
    float* dst = xt + b.offset;
    for (int sub = 0; sub < b.width; sub += 16) {
      const int64_t t0 = b.t0 + sub;
      const bool mine = (t0 >= t_begin && t0 < t_end) || (t_end == n_tokens && t0 >= n_tokens);
      if (!mine) continue;
      const int64_t nt = std::clamp<int64_t>(n_tokens - t0, 0, 16);
      int64_t k = 0;
      if (nt == 16) {
        for (; k + 16 <= n_in; k += 16) transpose16(x + t0 * n_in + k, n_in, dst + k * b.width + sub, b.width);
      }
      for (; k < n_in; ++k) {
        for (int64_t j = 0; j < 16; ++j) dst[k * b.width + sub + j] = j < nt ? x[(t0 + j) * n_in + k] : 0.0f;
      }
    }
  }
}

// ------------------------------------------------------------ micro-kernel
// c[r*ldc + 16v + j] (+)= sum_k w[r*ldw + k] * xt[k*W + 16v + j]
// for r < R, v < V, k < kc.
template <int W, int R, int V>
void micro_kernel(const float* w, int64_t ldw, const float* xt, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m512 xv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_ps(xt + k * W + 16 * v);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 wb = _mm512_set1_ps(w[r * ldw + k]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(wb, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
  }
}

using KernelFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, bool);

// [rows - 1][vectors - 1] of one block width.
template <int W, int... Rs, int... Vs>
constexpr auto kernel_table(std::integer_sequence<int, Rs...>, std::integer_sequence<int, Vs...>) {
  auto row = []<int R>(std::integral_constant<int, R>) {
    return std::array<KernelFn, sizeof...(Vs)>{&micro_kernel<W, R + 1, Vs + 1>...};
  };
  return std::array<std::array<KernelFn, sizeof...(Vs)>, sizeof...(Rs)>{row(std::integral_constant<int, Rs>{})...};
}
constexpr auto kBroadKernels = kernel_table<16 * kBroadVecs>(std::make_integer_sequence<int, kBroadRows>(),
                                                             std::make_integer_sequence<int, kBroadVecs>());
constexpr auto kWideKernels = kernel_table<16 * kWideVecs>(std::make_integer_sequence<int, kWideRows>(),
                                                           std::make_integer_sequence<int, kWideVecs>());
constexpr auto kNarrowKernels = kernel_table<16 * kNarrowVecs>(std::make_integer_sequence<int, kNarrowRows>(),
                                                               std::make_integer_sequence<int, kNarrowVecs>());

// The micro-kernel for `rows` rows of a block `width` tokens wide holding
// `vecs` vectors of real tokens.
KernelFn kernel_for(int width, int rows, int vecs) {
  if (width == 64) return kBroadKernels[rows - 1][vecs - 1];
  if (width == 48) return kWideKernels[rows - 1][vecs - 1];
  return kNarrowKernels[rows - 1][vecs - 1];
}

// The cache lines of n_items runs of `bytes` bytes, run i at base + i*stride,
// requested a few at a time, spread over the `steps` micro-kernel calls of a
// panel so that the misses overlap the arithmetic instead of stalling in a
// burst.
template <_mm_hint kHint>
class SpreadPrefetch {
 public:
  SpreadPrefetch(const char* base, int64_t stride, int64_t bytes, int64_t n_items, int64_t steps)
      : base_(base), stride_(stride), lines_per_item_((bytes + 63) / 64), total_(lines_per_item_ * n_items) {
    per_step_ = steps > 0 ? (total_ + steps - 1) / steps : total_;
  }
  void step() {
    for (int64_t i = 0; i < per_step_ && next_ < total_; ++i, ++next_) {
      const int64_t item = next_ / lines_per_item_, line = next_ % lines_per_item_;
      _mm_prefetch(base_ + item * stride_ + 64 * line, kHint);
    }
  }

 private:
  const char* base_;
  int64_t stride_, lines_per_item_, total_, per_step_ = 0, next_ = 0;
};

}  // namespace

size_t gemm_xt_floats(int64_t n_tokens, int64_t n_in) {
  const std::vector<TokenBlock> blocks = token_blocks(n_tokens, n_in);
  return static_cast<size_t>(blocks.back().offset + blocks.back().width * n_in);
}

void gemm_pack_xt(const float* x, float* xt, int64_t n_tokens, int64_t n_in, int64_t t_begin, int64_t t_end) {
  pack_xt(x, n_tokens, n_in, token_blocks(n_tokens, n_in), xt, t_begin, t_end);
}

void gemm_rows(const RowsTask& a) {
  const int64_t n_in = a.n_in;
  const std::vector<TokenBlock> blocks = token_blocks(a.n_tokens, n_in);
  const int64_t xt_floats = blocks.back().offset + blocks.back().width * n_in;
  // Every block but the last is full, so block b's columns start at b.t0.
  const int64_t ldc = blocks.back().t0 + blocks.back().width;
  // NOTE: rows padded by 16 floats so that rows 2^k floats long do not all
  // map to the same L1 sets.
  const int64_t ldw = ((n_in + 15) / 16) * 16 + 16;
  // Grow-only scratch on huge pages (util/huge_pages.h: the TLB bounded
  // this GEMM).
  thread_local HugeVector<float> own_xt, panel, cbuf;
  grown(panel, kPanelRows * ldw);
  grown(cbuf, kPanelRows * ldc);
  // x^T as matmul_multi prepared it for all threads and matrices, or packed here.
  const float* xt = a.xt;
  if (xt == nullptr) {
    grown(own_xt, xt_floats);
    pack_xt(a.x, a.n_tokens, n_in, blocks, own_xt.data(), 0, a.n_tokens);
    xt = own_xt.data();
  }

  for (int64_t p0 = a.o_begin; p0 < a.o_end; p0 += kPanelRows) {
    const int64_t np = std::min(a.o_end - p0, kPanelRows);
    for (int64_t r = 0; r < np; ++r) dequant_row(a.wtype, a.w + (p0 + r) * a.w_stride, panel.data() + r * ldw, n_in);
    // This panel's output lines are fetched to L1 while it computes:
    // store_transposed below otherwise stalled on their misses (8% of the
    // GEMM in the kernel lab's prefill128/f16, rdtsc per phase; 3% with).
    // NOTE: PREFETCHW (for writing, -mprfchw) instead measured the same.
    // NOTE: also fetching the next panel's weight rows to L2 this way cut
    // their widening from 10% to 6% of the GEMM but slowed 32-token batches
    // (10 of 40 alternating runs faster than without it), so it is not done;
    // nor widening the next panel a few rows per micro-kernel call into a
    // second buffer (3 of 40 faster at 128 tokens, 2 of 40 at 32 and 64).
    // Once the scratch was on huge pages: the same L2 fetch, 1-3 lines every
    // 8 k steps from inside the micro-kernel, was +5% at 32 tokens in the lab
    // (weights from L3) but slowed bench-model's 128-token prefill 5-15%
    // (weights from DRAM; L2 already holds x^T and the panel), and fetching
    // the next x^T block to L1 during a block's last tiles was 15-20% slower.
    int64_t steps = 0;
    for (const TokenBlock& b : blocks) {
      const int rows = tile_rows(b.width);
      steps += (np + rows - 1) / rows;
    }
    steps *= (n_in + kKc - 1) / kKc;
    SpreadPrefetch<_MM_HINT_T0> out_lines(reinterpret_cast<const char*>(a.out + p0), a.out_stride * 4, np * 4,
                                          a.n_tokens, steps);
    for (int64_t k0 = 0; k0 < n_in; k0 += kKc) {
      const int64_t kc = std::min(kKc, n_in - k0);
      for (const TokenBlock& b : blocks) {
        const float* xb = xt + b.offset + k0 * b.width;
        const int rows = tile_rows(b.width);
        for (int64_t r0 = 0; r0 < np; r0 += rows) {
          const int nr = static_cast<int>(std::min<int64_t>(rows, np - r0));
          out_lines.step();
          const KernelFn fn = kernel_for(b.width, nr, b.vecs);
          fn(panel.data() + r0 * ldw + k0, ldw, xb, kc, cbuf.data() + r0 * ldc + b.t0, ldc, k0 > 0);
        }
      }
    }
    store_transposed(cbuf.data(), ldc, np, a.n_tokens, a.out + p0, a.out_stride);
  }
}

}  // namespace parallm::cpu::avx512
