// Internal: the table of per-ISA kernel entry points. Each isa_<level>.cpp
// fills one table, compiled with that level's flags; isa.cpp returns the
// active one. Nothing outside src/kernels/cpu includes this header.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/isa.h"

namespace parallm::cpu {

// How far ahead of a lone token's weight stream the decode kernels prefetch
// (every SIMD level): the hardware prefetchers stop at each 4 KB page and
// restart only after new misses, and a decode loop (several instructions per
// 64 bytes) keeps fewer misses in flight than a bare read does, so a request
// a page ahead keeps the stream going. 2-8 KB measured alike.
constexpr int64_t kPrefetchAhead = 4096;

// One matrix's rows [o_begin, o_end) for all tokens:
//   out[t*out_stride + o] = sum_i W[o,i] * x[t*n_in + i]
// Packed matrices (packed.h): o_begin is a multiple of kPackRows, and w_stride
// is the bytes of one 16-row group.
struct RowsTask {
  float* out;
  int64_t out_stride;  // the matrix's n_out
  const char* w;       // row o at w + o*w_stride (packed: group o/16 at w + (o/16)*w_stride)
  size_t w_stride;
  DType wtype;
  const float* x;  // [n_tokens, n_in]
  const void* xq;  // x in the ISA's 8-bit format (quantize_x), when wants_xq
  int64_t n_tokens;
  int64_t n_in;
  int64_t o_begin;
  int64_t o_end;
  bool packed;
  const float* xt = nullptr;  // x transposed for the GEMM (pack_xt), when wants_xt; else the kernel packs it
};

// One query token against KV heads [h_kv, h_kv + n_heads) of a paged cache,
// for the `group` query heads that share each (attention.cpp builds these).
struct AttendTask {
  float* out;      // [n_heads, group, head_dim]
  const float* q;  // [n_heads, group, head_dim], RoPE applied
  const char* k;   // pool base: [n_blocks, n_kv_head, block_size, head_dim]
  const char* v;
  DType dtype;           // f32, f16, bf16 or q8_0 (attention.h)
  const int32_t* table;  // the sequence's block ids
  int64_t len;           // positions 0..len-1 are attended
  int64_t h_kv, n_kv_head, block_size, head_dim, group;
  float scale;
  float* scores;  // scratch [n_heads, group, len]
  int64_t n_heads;
  // The task this thread runs next (next_table null: none), whose first
  // blocks this one prefetches as it ends; start_fetched: this task's first
  // blocks were prefetched so by the task before it.
  const int32_t* next_table = nullptr;
  int64_t next_len = 0, next_h_kv = 0;
  bool start_fetched = false;
  // A tile of n_queries consecutive tokens of one sequence (a prefill
  // chunk): query i, at q + i * q_stride and written to out + i * out_stride
  // (floats), attends to positions 0..len+i-1. scores then holds
  // [n_heads, group, n_queries, len + n_queries - 1].
  int64_t n_queries = 1;
  int64_t q_stride = 0, out_stride = 0;
};

struct IsaKernels {
  Isa isa;
  // Whether rows() wants x quantized (quantize_x) for this dtype, batch and layout.
  bool (*wants_xq)(DType wtype, int64_t n_tokens, bool packed);
  size_t (*xq_bytes)(int64_t n_tokens, int64_t n_in);
  // Quantizes tokens [t_begin, t_end) of a batch of n_tokens into xq (the
  // layout depends on the whole batch), so threads can share the work.
  void (*quantize_x)(const float* x, void* xq, int64_t n_tokens, int64_t n_in, int64_t t_begin, int64_t t_end);
  void (*rows)(const RowsTask& task);
  // Fast row conversions (KV cache, activations).
  void (*f32_to_f16)(const float* src, uint16_t* dst, int64_t n);
  void (*f16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  void (*f32_to_bf16)(const float* src, uint16_t* dst, int64_t n);
  void (*bf16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  // Row ops (ops.h): vectorized bodies of the public functions.
  void (*rmsnorm_row)(float* out, const float* x, const float* w, int64_t n, float eps);
  void (*softmax)(float* x, int64_t n);
  float (*exp_shifted)(float* x, int64_t n, float scale);
  void (*swiglu)(float* out, const float* gate, const float* up, int64_t n);
  float (*dot)(const float* a, const float* b, int64_t n);
  void (*axpy)(float* y, float a, const float* x, int64_t n);
  // Roofline probes: sum of n floats (streaming read); `iters` rounds of
  // independent FMAs, returning flops done (and a value to keep the work alive).
  // `streams` (1 or 2): the n floats are read as that many equal parts in
  // lockstep (two streams per core read faster on some machines).
  float (*read_sum)(const float* p, int64_t n, int streams);
  double (*fma_burn)(int64_t iters, float* sink);
  // Attention for one AttendTask (any n_queries) with head_dim % 16 == 0;
  // nullptr: the portable loop in attention.cpp serves.
  void (*attend)(const AttendTask& task);
  // f32 -> q8_0 rows of a quantized KV cache (n a multiple of 32); nullptr:
  // quant.h's reference quantize_row serves.
  void (*f32_to_q8_0)(const float* src, void* dst, int64_t n);
  // The GEMM's x transposed into token blocks, prepared once per
  // matmul_multi call and shared by its threads and matrices, like xq:
  // whether rows() takes it for this dtype, batch and layout; its floats; and
  // tokens [t_begin, t_end) of it, t_begin a multiple of kXtTokenGrain (the
  // thread whose range ends at n_tokens also writes the padding). nullptr
  // on levels whose batch kernels read x as it is (AVX2, scalar).
  bool (*wants_xt)(DType wtype, int64_t n_tokens, bool packed);
  size_t (*xt_floats)(int64_t n_tokens, int64_t n_in);
  void (*pack_xt)(const float* x, float* xt, int64_t n_tokens, int64_t n_in, int64_t t_begin, int64_t t_end);
};

constexpr int64_t kXtTokenGrain = 16;

// Packed matrices on ISAs without a packed kernel (packed.cpp): each row is
// unpacked to the GGUF layout, dequantized and dotted in f32.
void packed_rows_portable(const RowsTask& task);

const IsaKernels& scalar_kernels();
const IsaKernels& avx2_kernels();
const IsaKernels& avx512_kernels();
// The table of active_isa().
const IsaKernels& active_kernels();

}  // namespace parallm::cpu
