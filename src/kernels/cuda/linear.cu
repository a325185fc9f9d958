// Linear layers (kernels/cuda/linear.h) and the upload-time dequantization
// to f16.
//   Mat-vec (n_tokens <= kMatVecMaxTokens; q8_0 at any batch size): one warp
//   per output row, kLinearRowsPerBlock rows per block. Each lane decodes its
//   chunks of the row once and accumulates them into one register per token
//   (math/linear.h); the lanes meet by __shfl_down_sync halving, lane 0 adds
//   the bias and writes. A q8_0 batch larger than kMatVecMaxTokens runs the
//   same warp over token chunks of kMatVecMaxTokens one after the other, so
//   the row it re-reads is still in L1 / L2 (no cuBLAS for q8_0).
//   GEMM (f32 / f16 / bf16, more tokens): cuBLAS. f32: SGEMM with
//   CUBLAS_DEFAULT_MATH, which never uses TF32 (that takes
//   CUBLAS_TF32_TENSOR_OP_MATH), so products and sums are full f32.
//   f16 / bf16: x rounded to the weight dtype into a scratch buffer, then
//   cublasGemmEx with CUBLAS_COMPUTE_32F (f32 accumulation, f32 out). The
//   bias is a small kernel after the GEMM (out += bias, as the CPU's
//   add_bias).
// Row-major out [n_tokens, n_out] = x [n_tokens, n_in] W^T is, column-major,
// out^T (n_out x n_tokens, ld n_out) = op_T(W: n_in x n_out, ld n_in) *
// x^T (n_in x n_tokens, ld n_in).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/linear_checks.h"
#include "kernels/cuda/math/linear.h"

namespace parallm::cuda {

namespace {

constexpr int kMatVecThreads = kLinearLanes * kLinearRowsPerBlock;
static_assert(kLinearLanes == 32, "one warp per row: the shuffles assume it");

// out [n_tokens, n_out]; w: n_out rows of row_bytes; bias [n_out] or null;
// x [n_tokens, n_in].
template <DType T>
__global__ void __launch_bounds__(kMatVecThreads)
    linear_matvec_kernel(float* out, const unsigned char* w, int64_t row_bytes, const float* bias, const float* x,
                         int64_t n_tokens, int64_t n_out, int64_t n_in) {
  const int lane = static_cast<int>(threadIdx.x) % kLinearLanes;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kLinearRowsPerBlock + threadIdx.x / kLinearLanes;
  if (o >= n_out) return;  // a whole warp: the shuffles below see full warps only
  const unsigned char* row = w + o * row_bytes;
  const float b = bias != nullptr ? bias[o] : 0.0f;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMatVecMaxTokens) {
    const int n_tok = static_cast<int>(n_tokens - t0 < kMatVecMaxTokens ? n_tokens - t0 : kMatVecMaxTokens);
    float acc[kMatVecMaxTokens];
    linear_lane_dots(acc, T, row, x + t0 * n_in, n_in, n_tok, lane, kLinearLanes);
#pragma unroll
    for (int tk = 0; tk < static_cast<int>(kMatVecMaxTokens); ++tk) {
      if (tk >= n_tok) break;  // n_tok is the same in the whole warp
      float v = acc[tk];
      // linear_tree_sum's order: step s adds lane j + s into lane j.
#pragma unroll
      for (int s = kLinearLanes / 2; s > 0; s /= 2) v += __shfl_down_sync(0xffffffffu, v, s);
      if (lane == 0) out[(t0 + tk) * n_out + o] = bias != nullptr ? v + b : v;
    }
  }
}

// out [n_tokens, n_out] += bias [n_out] per row.
__global__ void add_bias_kernel(float* out, const float* bias, int64_t n_tokens, int64_t n_out) {
  const int64_t n = n_tokens * n_out;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] += bias[i % n_out];
  }
}

// dst [n] = x [n] rounded to f16 (to_bf16: bfloat16) nearest-even, as bits.
__global__ void round_x_kernel(uint16_t* dst, const float* x, int64_t n, bool to_bf16) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = to_bf16 ? f32_to_bf16_bits(x[i]) : f32_to_f16_bits(x[i]);
  }
}

// out [n_rows, n_cols] f16 bits; src: n_rows rows of row_bytes in T.
template <DType T>
__global__ void dequantize_f16_kernel(uint16_t* out, const unsigned char* src, int64_t row_bytes, int64_t n_rows,
                                      int64_t n_cols) {
  const int64_t n = n_rows * n_cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n_cols;
    out[i] = dequant_f16_element(T, src + r * row_bytes, i - r * n_cols);
  }
}

// The calling thread's cuBLAS handle and x scratch on one device, created at
// its first GEMM and kept for the thread's life (a handle costs milliseconds
// and device memory to create; per call would dominate a prefill step).
// The scratch holds x rounded to f16 / bf16: n_tokens * n_in * 2 bytes, a few
// MiB for a prefill batch (512 tokens of 4096: 4 MiB), grown to the largest
// batch seen. NOTE: it is cudaMalloc'd outside the device's MemoryLedger
// (this layer is not given the Device); it is the size of one activation
// tensor, small beside the ledger's activation headroom.
// One handle serves every stream the thread uses: each call sets the stream,
// and `done` (recorded after each GEMM) makes a call on another stream than
// the last wait for it, so neither the scratch nor cuBLAS's default workspace
// is used by two streams at once.
struct BlasContext {
  int device = -1;
  cublasHandle_t handle = nullptr;
  cudaEvent_t done = nullptr;
  cudaStream_t last_stream = nullptr;
  bool used = false;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;

  BlasContext(const BlasContext&) = delete;
  BlasContext& operator=(const BlasContext&) = delete;
  explicit BlasContext(int dev) : device(dev) {
    PARALLM_CUBLAS_CHECK(cublasCreate(&handle));
    // The default, stated: no TF32 for the f32 GEMM.
    PARALLM_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
    PARALLM_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  }
  // At thread exit (the main thread's before the runtime's own teardown);
  // statuses are ignored: a destructor cannot throw, and a lost device
  // already failed a call that reported it.
  ~BlasContext() {
    int current = -1;
    const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device;
    if (switched) (void)cudaSetDevice(device);
    if (scratch != nullptr) (void)cudaFree(scratch);
    if (done != nullptr) (void)cudaEventDestroy(done);
    if (handle != nullptr) (void)cublasDestroy(handle);
    if (switched) (void)cudaSetDevice(current);
  }

  // Orders this call's GEMM after the previous one when it ran on another
  // stream, and points the handle at `stream`.
  void begin(cudaStream_t stream) {
    if (used && stream != last_stream) PARALLM_CUDA_CHECK(cudaStreamWaitEvent(stream, done, 0));
    PARALLM_CUBLAS_CHECK(cublasSetStream(handle, stream));
  }
  void end(cudaStream_t stream) {
    PARALLM_CUDA_CHECK(cudaEventRecord(done, stream));
    last_stream = stream;
    used = true;
  }
  // Scratch of at least `bytes` (after begin: a smaller old buffer is freed
  // only once the GEMM that read it finished).
  void* scratch_for(size_t bytes) {
    if (bytes > scratch_bytes) {
      if (scratch != nullptr) {
        if (used) PARALLM_CUDA_CHECK(cudaEventSynchronize(done));
        PARALLM_CUDA_CHECK(cudaFree(scratch));
        scratch = nullptr;
        scratch_bytes = 0;
      }
      const size_t rounded = (bytes + (size_t{1} << 20) - 1) >> 20 << 20;  // whole MiB: fewer regrowths
      PARALLM_CUDA_CHECK(cudaMalloc(&scratch, rounded));
      scratch_bytes = rounded;
    }
    return scratch;
  }
};

BlasContext& blas_context() {
  int device = 0;
  PARALLM_CUDA_CHECK(cudaGetDevice(&device));
  thread_local std::vector<std::unique_ptr<BlasContext>> contexts;  // by device index
  if (static_cast<size_t>(device) >= contexts.size()) contexts.resize(static_cast<size_t>(device) + 1);
  auto& c = contexts[static_cast<size_t>(device)];
  if (!c) c = std::make_unique<BlasContext>(device);
  return *c;
}

// Shapes as linear(): out [n_tokens, n_out], w [n_out] rows of n_in in t,
// bias [n_out] or null, x [n_tokens, n_in].
void launch_matvec(float* out, const void* w, DType t, const float* bias, const float* x, int64_t n_tokens,
                   int64_t n_out, int64_t n_in, cudaStream_t stream) {
  const auto* wb = static_cast<const unsigned char*>(w);
  const int64_t row_bytes = embedding_row_bytes(t, n_in);
  const auto blocks = static_cast<unsigned>((n_out + kLinearRowsPerBlock - 1) / kLinearRowsPerBlock);
  switch (t) {
    case DType::kF32:
      linear_matvec_kernel<DType::kF32>
          <<<blocks, kMatVecThreads, 0, stream>>>(out, wb, row_bytes, bias, x, n_tokens, n_out, n_in);
      break;
    case DType::kF16:
      linear_matvec_kernel<DType::kF16>
          <<<blocks, kMatVecThreads, 0, stream>>>(out, wb, row_bytes, bias, x, n_tokens, n_out, n_in);
      break;
    case DType::kBF16:
      linear_matvec_kernel<DType::kBF16>
          <<<blocks, kMatVecThreads, 0, stream>>>(out, wb, row_bytes, bias, x, n_tokens, n_out, n_in);
      break;
    default:
      linear_matvec_kernel<DType::kQ8_0>
          <<<blocks, kMatVecThreads, 0, stream>>>(out, wb, row_bytes, bias, x, n_tokens, n_out, n_in);
      break;
  }
  check_launch("linear_matvec_kernel");
}

// Shapes as launch_matvec; t is f32, f16 or bf16.
void launch_gemm(float* out, const void* w, DType t, const float* bias, const float* x, int64_t n_tokens, int64_t n_out,
                 int64_t n_in, cudaStream_t stream) {
  BlasContext& ctx = blas_context();
  ctx.begin(stream);
  const int m = static_cast<int>(n_out), n = static_cast<int>(n_tokens), k = static_cast<int>(n_in);
  const float alpha = 1.0f, beta = 0.0f;
  if (t == DType::kF32) {
    PARALLM_CUBLAS_CHECK(cublasSgemm(ctx.handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha,
                                     static_cast<const float*>(w), k, x, k, &beta, out, m));
  } else {
    const bool bf16 = t == DType::kBF16;
    const int64_t n_x = n_tokens * n_in;
    auto* xr = static_cast<uint16_t*>(ctx.scratch_for(static_cast<size_t>(n_x) * 2));
    round_x_kernel<<<blocks_for(n_x), kItemThreads, 0, stream>>>(xr, x, n_x, bf16);
    check_launch("round_x_kernel");
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    PARALLM_CUBLAS_CHECK(cublasGemmEx(ctx.handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w, type, k, xr, type, k,
                                      &beta, out, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  ctx.end(stream);
  if (bias != nullptr) {
    add_bias_kernel<<<blocks_for(n_tokens * n_out), kItemThreads, 0, stream>>>(out, bias, n_tokens, n_out);
    check_launch("add_bias_kernel");
  }
}

}  // namespace

void linear(float* out, const void* w, DType w_dtype, const float* bias, const float* x, int64_t n_tokens,
            int64_t n_out, int64_t n_in, StreamHandle stream) {
  check_linear_args(w_dtype, n_tokens, n_out, n_in);
  if (n_tokens == 0 || n_out == 0) return;
  if (n_tokens <= kMatVecMaxTokens || w_dtype == DType::kQ8_0) {
    launch_matvec(out, w, w_dtype, bias, x, n_tokens, n_out, n_in, stream);
  } else {
    launch_gemm(out, w, w_dtype, bias, x, n_tokens, n_out, n_in, stream);
  }
}

void dequantize_rows_f16(uint16_t* out, const void* src, DType src_dtype, int64_t n_rows, int64_t n_cols,
                         StreamHandle stream) {
  check_dequantize_args(src_dtype, n_rows, n_cols);
  const int64_t n = n_rows * n_cols;
  if (n == 0) return;
  const auto* s = static_cast<const unsigned char*>(src);
  const auto row_bytes = static_cast<int64_t>(dtype_row_bytes(src_dtype, n_cols));
  const unsigned blocks = blocks_for(n);
  switch (src_dtype) {
    case DType::kF32:
      dequantize_f16_kernel<DType::kF32><<<blocks, kItemThreads, 0, stream>>>(out, s, row_bytes, n_rows, n_cols);
      break;
    case DType::kF16:
      dequantize_f16_kernel<DType::kF16><<<blocks, kItemThreads, 0, stream>>>(out, s, row_bytes, n_rows, n_cols);
      break;
    case DType::kBF16:
      dequantize_f16_kernel<DType::kBF16><<<blocks, kItemThreads, 0, stream>>>(out, s, row_bytes, n_rows, n_cols);
      break;
    case DType::kQ8_0:
      dequantize_f16_kernel<DType::kQ8_0><<<blocks, kItemThreads, 0, stream>>>(out, s, row_bytes, n_rows, n_cols);
      break;
    case DType::kQ4_0:
      dequantize_f16_kernel<DType::kQ4_0><<<blocks, kItemThreads, 0, stream>>>(out, s, row_bytes, n_rows, n_cols);
      break;
    case DType::kQ4_K:
      dequantize_f16_kernel<DType::kQ4_K><<<blocks, kItemThreads, 0, stream>>>(out, s, row_bytes, n_rows, n_cols);
      break;
    default:
      dequantize_f16_kernel<DType::kQ6_K><<<blocks, kItemThreads, 0, stream>>>(out, s, row_bytes, n_rows, n_cols);
      break;
  }
  check_launch("dequantize_f16_kernel");
}

}  // namespace parallm::cuda
