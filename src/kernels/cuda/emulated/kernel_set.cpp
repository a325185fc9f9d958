#include "kernels/cuda/kernel_set.h"

#include "kernels/cuda/emulated/launchers.h"

namespace parallm::cuda {

const KernelSet& emulated_kernel_set() {
  static const KernelSet set{"emulated",
                             &emulated::embedding_rows,
                             &emulated::rmsnorm,
                             &emulated::rope_apply,
                             &emulated::swiglu,
                             &emulated::argmax_rows,
                             &emulated::kv_write,
                             &emulated::paged_attention,
                             &emulated::linear,
                             &emulated::dequantize_rows_f16,
                             &emulated::moe_topk,
                             &emulated::gather_rows,
                             &emulated::scatter_add_rows};
  return set;
}

}  // namespace parallm::cuda
