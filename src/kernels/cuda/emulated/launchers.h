// The emulated CUDA device: the launcher API of src/kernels/cuda/*.h on host
// memory, so code written for a CUDA rank runs (slowly, synchronously) on any
// machine, CI included. Each launcher checks its arguments like the CUDA one
// (launch_checks.h), then loops over the grid the CUDA kernel would launch,
// calling the same per-item math (math/*.h) in the same order: a row's lanes
// in lane order, their tree in the kernel's order. The stream is ignored (all
// pointers are host memory; the work is done when the call returns).
// Each emulated/*.cpp static_asserts that its signature is the CUDA one's.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "device/stream_handle.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/math/rope.h"
#include "kernels/cuda/moe.h"

namespace parallm::cuda::emulated {

// Shapes and rules: kernels/cuda/embedding.h.
void embedding_rows(float* out, const void* table, DType table_dtype, const int32_t* tokens, int64_t n_tokens,
                    int64_t n_embd, int64_t n_vocab, StreamHandle stream);
// kernels/cuda/rmsnorm.h.
void rmsnorm(float* out, float* x, const float* delta, const float* w, int64_t n_tokens, int64_t n_embd, float eps,
             StreamHandle stream);
// kernels/cuda/rope.h.
void rope_table(float* cs, const int32_t* positions, int64_t n_tokens, int64_t head_dim, const float* inv_freq,
                StreamHandle stream);
void rope_apply(float* x, const float* cs, int64_t n_tokens, int64_t n_head, int64_t head_dim, RopeStyle style,
                StreamHandle stream);
// kernels/cuda/swiglu.h.
void swiglu(float* out, const float* gate, const float* up, int64_t n, StreamHandle stream);
// kernels/cuda/argmax.h.
void argmax_rows(int32_t* out, const float* x, int64_t n_rows, int64_t n_vocab, StreamHandle stream);
// kernels/cuda/kv_cache.h.
void kv_write(const PagedKv& kv, const float* k, const float* v, const int64_t* slots, int64_t n_tokens,
              StreamHandle stream);
// kernels/cuda/attention.h.
void paged_attention(float* out, const float* q, const PagedKv& kv, const int32_t* positions,
                     const int32_t* seq_of_token, const int32_t* block_tables, int64_t max_blocks_per_seq,
                     int64_t n_tokens, int64_t n_head, float scale, AttendLimits limits, StreamHandle stream);
// kernels/cuda/linear.h.
void linear(float* out, const void* w, DType w_dtype, const float* bias, const float* x, int64_t n_tokens,
            int64_t n_out, int64_t n_in, StreamHandle stream);
void dequantize_rows_f16(uint16_t* out, const void* src, DType src_dtype, int64_t n_rows, int64_t n_cols,
                         StreamHandle stream);
// kernels/cuda/moe.h.
void moe_topk(int32_t* ids, float* weights, const float* logits, const float* bias, int64_t n_tokens, int64_t n_expert,
              int64_t k, TopKRule rule, StreamHandle stream);
void gather_rows(float* out, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_embd, StreamHandle stream);
void scatter_add_rows(float* out, const float* y, const int32_t* rows, const float* weights, int64_t n_rows,
                      int64_t n_embd, StreamHandle stream);

}  // namespace parallm::cuda::emulated
