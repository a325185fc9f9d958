// Embedding rows: one block per token, its threads stride over the row
// (per-element math: math/embedding.h).
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/math/embedding.h"

namespace parallm::cuda {

namespace {

__global__ void embedding_rows_kernel(float* out, const void* table, DType table_dtype, const int32_t* tokens,
                                      int64_t n_embd, int64_t n_vocab) {
  const int64_t t = blockIdx.x;
  const int32_t token = tokens[t];
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) {
    out[t * n_embd + i] = embedding_element(table_dtype, table, token, n_embd, n_vocab, i);
  }
}

}  // namespace

void embedding_rows(float* out, const void* table, DType table_dtype, const int32_t* tokens, int64_t n_tokens,
                    int64_t n_embd, int64_t n_vocab, StreamHandle stream) {
  check_embedding_args(table_dtype, n_tokens, n_embd, n_vocab);
  if (n_tokens == 0) return;
  embedding_rows_kernel<<<static_cast<unsigned>(n_tokens), kItemThreads, 0, stream>>>(out, table, table_dtype, tokens,
                                                                                      n_embd, n_vocab);
  check_launch("embedding_rows_kernel");
}

}  // namespace parallm::cuda
