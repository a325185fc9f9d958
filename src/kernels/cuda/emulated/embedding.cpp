// Emulated embedding rows: the kernel's grid (a block per token, threads over
// the row) as two loops over math/embedding.h's per-element function.
#include "kernels/cuda/embedding.h"

#include <type_traits>

#include "kernels/cuda/emulated/launchers.h"
#include "kernels/cuda/launch_checks.h"
#include "kernels/cuda/math/embedding.h"

namespace parallm::cuda::emulated {

static_assert(std::is_same_v<decltype(&embedding_rows), decltype(&cuda::embedding_rows)>);

void embedding_rows(float* out, const void* table, DType table_dtype, const int32_t* tokens, int64_t n_tokens,
                    int64_t n_embd, int64_t n_vocab, StreamHandle /*stream*/) {
  check_embedding_args(table_dtype, n_tokens, n_embd, n_vocab);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < n_embd; ++i) {
      out[t * n_embd + i] = embedding_element(table_dtype, table, tokens[t], n_embd, n_vocab, i);
    }
  }
}

}  // namespace parallm::cuda::emulated
