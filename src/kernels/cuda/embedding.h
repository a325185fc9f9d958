// Embedding rows on a CUDA device: out row t = table row tokens[t], widened to
// f32 (per-element math: math/embedding.h). No CUDA headers; the emulated
// device (emulated/launchers.h) has the same function on host memory.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "device/stream_handle.h"

namespace parallm::cuda {

// out: [n_tokens, n_embd] f32; table: [n_vocab, n_embd] of table_dtype (f32,
// f16, bf16, q8_0; others are an InputError); tokens: [n_tokens], device
// memory. An id outside [0, n_vocab) gives a NaN row: check ids on the host.
void embedding_rows(float* out, const void* table, DType table_dtype, const int32_t* tokens, int64_t n_tokens,
                    int64_t n_embd, int64_t n_vocab, StreamHandle stream);

}  // namespace parallm::cuda
