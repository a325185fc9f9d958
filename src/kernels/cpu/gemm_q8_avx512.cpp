// AVX-512 VNNI GEMM for q8_0 / q4_0 weights over batches (prefill, batched
// decode): out = x W^T for the rows [o_begin, o_end) of one matrix, with x
// quantized to 8 bits per 32-element block as the mat-vec path does
// (isa_avx512.cpp), so every multiply is an integer VPDPBUSD.
//
// Layout:
//   - x is quantized once per call into xq[token block][k/4][32 tokens][4]
//     (unsigned: q + 128, so it can be VPDPBUSD's unsigned operand) with its
//     scales xd[token block][k/32][32 tokens];
//   - weight rows are repacked one panel at a time into plain int8 rows
//     (q4_0 nibbles become nibble - 8), their scales as f32, and per block
//     128 * sum(w), which takes the +128 of x back out;
//   - the micro-kernel keeps R rows x 32 tokens in int32 for one 32-wide k
//     block (8 VPDPBUSD steps, each broadcasting 4 weight bytes), then folds
//     them into f32 accumulators with the two scales.
// NOTE: the f32 GEMM (gemm_avx512.cpp) widened each q8_0 panel to f32 and ran
// 16 FMAs per instruction; here one instruction does 64 multiply-adds, and the
// panel the kernel reads is 4x smaller.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/quant.h"
#include "util/check.h"
#include "util/huge_pages.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int kTokenBlock = 32;  // tokens per x block (2 vectors of 16)
constexpr int kTileRows = 6;     // rows per micro-kernel tile: 12 int32 + 12 f32 accumulators
constexpr int64_t kPanelRows = 48;
constexpr int64_t kKcBlocks = 16;  // k blocks of 32 per pass: x block 16 KB, in L1

// ------------------------------------------------------------ x packing
// Tokens past n_tokens pack as zeros (q = 128, d = 0).
void pack_x(const float* x, int64_t n_tokens, int64_t n_in, uint8_t* xq, float* xd) {
  const int64_t nb = n_in / 32, ng = n_in / 4;
  const int64_t n_tb = (n_tokens + kTokenBlock - 1) / kTokenBlock;
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t tb = 0; tb < n_tb; ++tb) {
    uint8_t* q = xq + tb * ng * kTokenBlock * 4;
    float* d = xd + tb * nb * kTokenBlock;
    for (int64_t j = 0; j < kTokenBlock; ++j) {
      const int64_t t = tb * kTokenBlock + j;
      for (int64_t b = 0; b < nb; ++b) {
        alignas(16) uint8_t bytes[32];
        float db = 0.f;
        if (t < n_tokens) {
          const float* xb = x + t * n_in + b * 32;
          const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
          const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
          db = amax / 127.0f;
          const __m512 id = _mm512_set1_ps(db != 0.0f ? 1.0f / db : 0.0f);
          const __m128i lo = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id)));
          const __m128i hi = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id)));
          _mm_store_si128(reinterpret_cast<__m128i*>(bytes), _mm_xor_si128(lo, bias));
          _mm_store_si128(reinterpret_cast<__m128i*>(bytes + 16), _mm_xor_si128(hi, bias));
        } else {
          std::memset(bytes, 0x80, sizeof(bytes));
        }
        d[b * kTokenBlock + j] = db;
        for (int g = 0; g < 8; ++g) std::memcpy(q + ((b * 8 + g) * kTokenBlock + j) * 4, bytes + 4 * g, 4);
      }
    }
  }
}

// ------------------------------------------------------------ panel repack
// q [n_in] int8, d [nb] f32, c [nb] = 128 * sum of the block's q.
inline int32_t block_sum_128(__m256i w) {
  // sum of (w + 128) over 32 bytes with VPSADBW, minus 32 * 128
  const __m256i s =
      _mm256_sad_epu8(_mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), _mm256_setzero_si256());
  const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  const int64_t sum = _mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1) - 32 * 128;
  return static_cast<int32_t>(128 * sum);
}

void repack_q8_0(const BlockQ8_0* blocks, int8_t* q, float* d, int32_t* c, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), w);
    d[b] = _cvtsh_ss(blocks[b].d);
    c[b] = block_sum_128(w);
  }
}

void repack_q4_0(const BlockQ4_0* blocks, int8_t* q, float* d, int32_t* c, int64_t nb) {
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < nb; ++b) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, low4), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), low4), eight);
    const __m256i w = _mm256_set_m128i(hi, lo);  // elements 0-15 low nibbles, 16-31 high
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), w);
    d[b] = _cvtsh_ss(blocks[b].d);
    c[b] = block_sum_128(w);
  }
}

void repack_row(DType t, const char* row, int8_t* q, float* d, int32_t* c, int64_t nb) {
  if (t == DType::kQ8_0) {
    repack_q8_0(reinterpret_cast<const BlockQ8_0*>(row), q, d, c, nb);
  } else {
    repack_q4_0(reinterpret_cast<const BlockQ4_0*>(row), q, d, c, nb);
  }
}

// ------------------------------------------------------------ micro-kernel
// c[r*ldc + 16v + j] (+)= sum over blocks b < nbk of
//   wd[r,b] * xd[b,16v+j] * (sum_k w[r,32b+k] * xq[32b+k, 16v+j] - wc[r,b])
// xq/xd point at this k range of one token block.
template <int R, int V>
void micro_kernel(const int8_t* wq, int64_t ldw, const float* wd, const int32_t* wc, int64_t ldb, const uint8_t* xq,
                  const float* xd, int64_t nbk, float* c, int64_t ldc, bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nbk; ++b) {
    __m512i dot[R][V];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) dot[r][v] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      __m512i xv[V];
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_si512(xq + ((b * 8 + g) * kTokenBlock + 16 * v) * 4);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        int32_t w4;
        std::memcpy(&w4, wq + r * ldw + b * 32 + 4 * g, 4);
        const __m512i wb = _mm512_set1_epi32(w4);
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) dot[r][v] = _mm512_dpbusd_epi32(dot[r][v], xv[v], wb);
      }
    }
    __m512 dx[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) dx[v] = _mm512_loadu_ps(xd + b * kTokenBlock + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 dw = _mm512_set1_ps(wd[r * ldb + b]);
      const __m512i cw = _mm512_set1_epi32(wc[r * ldb + b]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        acc[r][v] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[r][v], cw)), _mm512_mul_ps(dw, dx[v]), acc[r][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
  }
}

using KernelFn = void (*)(const int8_t*, int64_t, const float*, const int32_t*, int64_t, const uint8_t*, const float*,
                          int64_t, float*, int64_t, bool);

template <int... Rs>
constexpr std::array<std::array<KernelFn, 2>, sizeof...(Rs)> kernel_table(std::integer_sequence<int, Rs...>) {
  return {std::array<KernelFn, 2>{&micro_kernel<Rs + 1, 1>, &micro_kernel<Rs + 1, 2>}...};
}
constexpr auto kKernels = kernel_table(std::make_integer_sequence<int, kTileRows>());

}  // namespace

void gemm_q8_rows(const RowsTask& a) {
  PARALLM_CHECK(a.wtype == DType::kQ8_0 || a.wtype == DType::kQ4_0);
  const int64_t n_in = a.n_in, nb = n_in / 32;
  const int64_t n_tb = (a.n_tokens + kTokenBlock - 1) / kTokenBlock;
  const int64_t ldc = n_tb * kTokenBlock;
  // NOTE: rows padded by 64 bytes so that rows 2^k bytes long do not all map
  // to the same L1 sets.
  const int64_t ldw = n_in + 64;
  // Grow-only scratch on huge pages (util/huge_pages.h).
  thread_local HugeVector<uint8_t> xq;
  thread_local HugeVector<float> xd, wd, cbuf;
  thread_local HugeVector<int8_t> wq;
  thread_local HugeVector<int32_t> wc;
  grown(xq, n_tb * n_in * kTokenBlock);
  grown(xd, n_tb * nb * kTokenBlock);
  grown(wq, kPanelRows * ldw);
  grown(wd, kPanelRows * nb);
  grown(wc, kPanelRows * nb);
  grown(cbuf, kPanelRows * ldc);
  pack_x(a.x, a.n_tokens, n_in, xq.data(), xd.data());

  for (int64_t p0 = a.o_begin; p0 < a.o_end; p0 += kPanelRows) {
    const int64_t np = std::min(a.o_end - p0, kPanelRows);
    for (int64_t r = 0; r < np; ++r) {
      repack_row(a.wtype, a.w + (p0 + r) * a.w_stride, wq.data() + r * ldw, wd.data() + r * nb, wc.data() + r * nb, nb);
    }
    // The next panel's rows travel to L2 while this one computes, a slice
    // before each micro-kernel call: with few tokens (batched decode) the
    // compute per panel is short, and the repack would otherwise stall on
    // DRAM. NOTE: one burst of all the prefetches at the start of the panel
    // stalled on full miss buffers (a quarter of this function's samples sat
    // on PREFETCHT1).
    const char* pf_w = a.w + (p0 + np) * a.w_stride;
    const int64_t pf_rows = std::min(a.o_end - (p0 + np), kPanelRows);
    const int64_t pf_lines_per_row = (static_cast<int64_t>(dtype_row_bytes(a.wtype, n_in)) + 63) / 64;
    const int64_t pf_lines = pf_rows * pf_lines_per_row;
    const int64_t calls = ((nb + kKcBlocks - 1) / kKcBlocks) * n_tb * ((np + kTileRows - 1) / kTileRows);
    const int64_t lines_per_call = (pf_lines + calls - 1) / calls;
    int64_t pf_row = 0, pf_line = 0, pf_done = 0;  // counters, no division per prefetch
    auto prefetch_slice = [&] {
      for (int64_t i = 0; i < lines_per_call && pf_done < pf_lines; ++i, ++pf_done) {
        _mm_prefetch(pf_w + pf_row * static_cast<int64_t>(a.w_stride) + pf_line * 64, _MM_HINT_T1);
        if (++pf_line == pf_lines_per_row) pf_line = 0, ++pf_row;
      }
    };
    for (int64_t b0 = 0; b0 < nb; b0 += kKcBlocks) {
      const int64_t nbk = std::min(kKcBlocks, nb - b0);
      for (int64_t tb = 0; tb < n_tb; ++tb) {
        const int v = a.n_tokens - tb * kTokenBlock > 16 ? 2 : 1;
        const uint8_t* xb = xq.data() + (tb * n_in + b0 * 32) * kTokenBlock;
        const float* xdb = xd.data() + (tb * nb + b0) * kTokenBlock;
        for (int64_t r0 = 0; r0 < np; r0 += kTileRows) {
          const int nr = static_cast<int>(std::min<int64_t>(kTileRows, np - r0));
          prefetch_slice();
          kKernels[nr - 1][v - 1](wq.data() + r0 * ldw + b0 * 32, ldw, wd.data() + r0 * nb + b0,
                                  wc.data() + r0 * nb + b0, nb, xb, xdb, nbk, cbuf.data() + r0 * ldc + tb * kTokenBlock,
                                  ldc, b0 > 0);
        }
      }
    }
    store_transposed(cbuf.data(), ldc, np, a.n_tokens, a.out + p0, a.out_stride);
  }
}

}  // namespace parallm::cpu::avx512
