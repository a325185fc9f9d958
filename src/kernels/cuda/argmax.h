// Greedy pick per logits row on a CUDA device (per-lane math and tie / NaN
// rules: math/argmax.h). One block of kRowThreads threads per row.
#pragma once
#include <cstdint>

#include "device/stream_handle.h"

namespace parallm::cuda {

// out: [n_rows]; x: [n_rows, n_vocab].
void argmax_rows(int32_t* out, const float* x, int64_t n_rows, int64_t n_vocab, StreamHandle stream);

}  // namespace parallm::cuda
