// The CUDA launchers as a KernelSet (kernel_set.h).
#include "kernels/cuda/kernel_set.h"

namespace parallm::cuda {

const KernelSet& cuda_kernel_set() {
  static const KernelSet set{"cuda",       &embedding_rows, &rmsnorm,         &rope_apply, &swiglu,
                             &argmax_rows, &kv_write,       &paged_attention, &linear,     &dequantize_rows_f16,
                             &moe_topk,    &gather_rows,    &scatter_add_rows};
  return set;
}

}  // namespace parallm::cuda
