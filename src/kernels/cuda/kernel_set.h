// KernelSet: the launcher API of src/kernels/cuda/*.h as one table of
// function pointers, so the device rank model (model/device_llama_model.h)
// is written once and runs on a CUDA device (cuda_kernel_set(), CUDA builds)
// or on the emulated device (emulated_kernel_set(), every build). The
// pointers' types are the launchers' own: a signature that drifts on either
// side does not compile.
#pragma once
#include "kernels/cuda/argmax.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"

namespace parallm::cuda {

struct KernelSet {
  const char* name;  // "cuda", "emulated"
  decltype(&cuda::embedding_rows) embedding_rows;
  decltype(&cuda::rmsnorm) rmsnorm;
  decltype(&cuda::rope_apply) rope_apply;
  decltype(&cuda::swiglu) swiglu;
  decltype(&cuda::argmax_rows) argmax_rows;
  decltype(&cuda::kv_write) kv_write;
  decltype(&cuda::paged_attention) paged_attention;
  decltype(&cuda::linear) linear;
  decltype(&cuda::dequantize_rows_f16) dequantize_rows_f16;
  decltype(&cuda::moe_topk) moe_topk;
  decltype(&cuda::gather_rows) gather_rows;
  decltype(&cuda::scatter_add_rows) scatter_add_rows;
};

// The emulated device's launchers (host memory, synchronous).
const KernelSet& emulated_kernel_set();
// The CUDA launchers; only in CUDA builds (parallm_kernels_cuda).
const KernelSet& cuda_kernel_set();

}  // namespace parallm::cuda
