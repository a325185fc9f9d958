// AVX-512 GEMM for batches (prefill, batched decode): out = x W^T over the
// rows [o_begin, o_end) of one matrix, any weight dtype.
//
// Layout (BLIS-style, with the roles chosen so that no weight transpose is
// needed):
//   - x is transposed once per call into xt[token block][k][32 tokens]
//     (16x16 in-register transposes, zero-padded), shared by all rows;
//   - weight rows are converted to f32 one panel of kPanelRows rows at a time
//     (row-major, this is where f16/bf16/q8_0/... are widened);
//   - the micro-kernel keeps a 12-row x 32-token tile in 24 zmm accumulators:
//     per k it loads 2 vectors of x^T and broadcasts 12 weights, 24 FMAs;
//     no horizontal sums. K is blocked by kKc so the x^T block and the 12
//     weight rows stay in L1;
//   - results collect in a panel-sized buffer c[row][token] that is
//     transposed into out[token][row] once per panel.
// NOTE: software prefetch of the next panel during this one's compute was
// tried and measured no gain (kept out).
// NOTE: the first version (dot-product tiles of 4 rows x 6 tokens with
// horizontal sums, no x packing) reached 50-74% of the FMA peak per core
// (50% at n_in = 2048, where a tile's rows and x no longer fit L1).
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/quant.h"

namespace parallm::cpu::avx512 {

namespace {

constexpr int kTileRows = 12;     // rows per micro-kernel tile (broadcast operands)
constexpr int kTokenBlock = 32;   // tokens per x^T block (2 vectors)
constexpr int64_t kPanelRows = 48;
constexpr int64_t kKc = 256;      // k block: x^T block 32 KB + 12 rows 12 KB in L1 (128 measured the same)

// ------------------------------------------------------------ widening rows
template <class L>
void widen_row(const char* row, float* y, int64_t n) {
  int64_t k = 0;
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
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_or_si512(lo4, _mm512_slli_epi32(_mm512_and_si512(hi2, low2), 4)), bias));
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
    case DType::kF32: widen_row<LoadF32>(row, y, n); return;
    case DType::kF16: widen_row<LoadF16>(row, y, n); return;
    case DType::kBF16: widen_row<LoadBF16>(row, y, n); return;
    case DType::kQ8_0: dequant_q8_0(reinterpret_cast<const BlockQ8_0*>(row), y, n / kQK8_0); return;
    case DType::kQ4_0: dequant_q4_0(reinterpret_cast<const BlockQ4_0*>(row), y, n / kQK4_0); return;
    case DType::kQ4_K: dequant_q4_k(reinterpret_cast<const BlockQ4_K*>(row), y, n / kQK_K); return;
    case DType::kQ6_K: dequant_q6_k(reinterpret_cast<const BlockQ6_K*>(row), y, n / kQK_K); return;
  }
}

namespace {

// ------------------------------------------------------------ x^T packing
// xt[(tb*n_in + k)*kTokenBlock + j] = x[(tb*kTokenBlock + j)*n_in + k], zero past n_tokens.
void pack_xt(const float* x, int64_t n_tokens, int64_t n_in, float* xt) {
  const int64_t n_tb = (n_tokens + kTokenBlock - 1) / kTokenBlock;
  for (int64_t tb = 0; tb < n_tb; ++tb) {
    float* dst = xt + tb * n_in * kTokenBlock;
    for (int sub = 0; sub < kTokenBlock; sub += 16) {
      const int64_t t0 = tb * kTokenBlock + sub;
      const int64_t nt = std::clamp<int64_t>(n_tokens - t0, 0, 16);
      int64_t k = 0;
      if (nt == 16) {
        for (; k + 16 <= n_in; k += 16) transpose16(x + t0 * n_in + k, n_in, dst + k * kTokenBlock + sub, kTokenBlock);
      }
      for (; k < n_in; ++k) {
        for (int64_t j = 0; j < 16; ++j) dst[k * kTokenBlock + sub + j] = j < nt ? x[(t0 + j) * n_in + k] : 0.0f;
      }
    }
  }
}

// ------------------------------------------------------------ micro-kernel
// c[r*ldc + 16v + j] (+)= sum_k w[r*ldw + k] * xt[k*kTokenBlock + 16v + j]
// for r < R, v < V, k < kc.
template <int R, int V>
void micro_kernel(const float* w, int64_t ldw, const float* xt, int64_t kc, float* c, int64_t ldc,
                  bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m512 xv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_ps(xt + k * kTokenBlock + 16 * v);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 wb = _mm512_set1_ps(w[r * ldw + k]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(wb, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
  }
}

using KernelFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, bool);

template <int... Rs>
constexpr std::array<std::array<KernelFn, 2>, sizeof...(Rs)> kernel_table(std::integer_sequence<int, Rs...>) {
  return {std::array<KernelFn, 2>{&micro_kernel<Rs + 1, 1>, &micro_kernel<Rs + 1, 2>}...};
}
constexpr auto kKernels = kernel_table(std::make_integer_sequence<int, kTileRows>());

}  // namespace

void gemm_rows(const RowsTask& a) {
  const int64_t n_in = a.n_in;
  const int64_t n_tb = (a.n_tokens + kTokenBlock - 1) / kTokenBlock;
  const int64_t ldc = n_tb * kTokenBlock;
  // NOTE: rows padded by 16 floats so that rows 2^k floats long do not all
  // map to the same L1 sets.
  const int64_t ldw = ((n_in + 15) / 16) * 16 + 16;
  // Grow-only scratch: shapes alternate within a layer and a shrink followed
  // by a grow would zero-fill again.
  thread_local std::vector<float> xt, panel, cbuf;
  auto grow = [](std::vector<float>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  };
  grow(xt, n_tb * n_in * kTokenBlock);
  grow(panel, kPanelRows * ldw);
  grow(cbuf, kPanelRows * ldc);
  pack_xt(a.x, a.n_tokens, n_in, xt.data());

  for (int64_t p0 = a.o_begin; p0 < a.o_end; p0 += kPanelRows) {
    const int64_t np = std::min(a.o_end - p0, kPanelRows);
    for (int64_t r = 0; r < np; ++r) dequant_row(a.wtype, a.w + (p0 + r) * a.w_stride, panel.data() + r * ldw, n_in);
    for (int64_t k0 = 0; k0 < n_in; k0 += kKc) {
      const int64_t kc = std::min(kKc, n_in - k0);
      for (int64_t tb = 0; tb < n_tb; ++tb) {
        const int v = a.n_tokens - tb * kTokenBlock > 16 ? 2 : 1;
        const float* xb = xt.data() + (tb * n_in + k0) * kTokenBlock;
        for (int64_t r0 = 0; r0 < np; r0 += kTileRows) {
          const int nr = static_cast<int>(std::min<int64_t>(kTileRows, np - r0));
          kKernels[nr - 1][v - 1](panel.data() + r0 * ldw + k0, ldw, xb, kc,
                                  cbuf.data() + r0 * ldc + tb * kTokenBlock, ldc, k0 > 0);
        }
      }
    }
    store_transposed(cbuf.data(), ldc, np, a.n_tokens, a.out + p0, a.out_stride);
  }
}

}  // namespace parallm::cpu::avx512
