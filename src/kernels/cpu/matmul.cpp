// Threading and dispatch of matmul (matmul.h): splits the rows of all targets
// into one contiguous range per thread and hands each piece to the active
// ISA's row kernel (isa_table.h). Each thread quantizes x itself when the
// kernel wants 8-bit activations: that is a few microseconds and saves a
// second barrier.
#include "kernels/cpu/matmul.h"

#include <vector>

#include "kernels/cpu/isa_table.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

// Rows per scheduling unit: keeps SIMD row groups and GEMM panels whole.
constexpr int64_t kRowGrain = 16;

void check_target(const MatmulTarget& t, int64_t n_in) {
  PARALLM_CHECK(t.out != nullptr && t.w != nullptr && t.n_out >= 0);
  PARALLM_CHECK_MSG(n_in % dtype_block_elems(t.wtype) == 0,
                    std::string("matmul: n_in not a multiple of the block of ") + dtype_name(t.wtype));
  PARALLM_CHECK(t.w_row_stride_bytes >= dtype_row_bytes(t.wtype, n_in));
}

}  // namespace

void matmul_multi(const MatmulTarget* targets, int n_targets, const float* x, int64_t n_tokens,
                  int64_t n_in, ThreadPool& pool) {
  PARALLM_CHECK(n_tokens >= 0 && n_in > 0 && n_targets >= 0);
  if (n_tokens == 0) return;
  int64_t total_units = 0;
  for (int i = 0; i < n_targets; ++i) {
    check_target(targets[i], n_in);
    total_units += (targets[i].n_out + kRowGrain - 1) / kRowGrain;
  }
  const IsaKernels& k = active_kernels();
  bool need_xq = false;
  for (int i = 0; i < n_targets; ++i) need_xq = need_xq || k.wants_xq(targets[i].wtype, n_tokens);
  const size_t xq_bytes = need_xq ? k.xq_bytes(n_tokens, n_in) : 0;

  pool.run([&](int thread_index, int n_threads) {
    int64_t ub, ue;
    ThreadPool::split(total_units, 1, thread_index, n_threads, &ub, &ue);
    if (ub >= ue) return;
    thread_local std::vector<uint8_t> xq_buf;
    if (xq_bytes > 0) {
      if (xq_buf.size() < xq_bytes) xq_buf.resize(xq_bytes);
      k.quantize_x(x, xq_buf.data(), n_tokens, n_in);
    }
    int64_t unit0 = 0;  // first unit of target i
    for (int i = 0; i < n_targets && unit0 < ue; ++i) {
      const MatmulTarget& t = targets[i];
      const int64_t units = (t.n_out + kRowGrain - 1) / kRowGrain;
      const int64_t b = std::max(ub, unit0) - unit0, e = std::min(ue, unit0 + units) - unit0;
      if (b < e) {
        RowsTask task{t.out, t.n_out, static_cast<const char*>(t.w), t.w_row_stride_bytes, t.wtype,
                      x, xq_bytes > 0 ? xq_buf.data() : nullptr, n_tokens, n_in,
                      b * kRowGrain, std::min(e * kRowGrain, t.n_out)};
        k.rows(task);
      }
      unit0 += units;
    }
  });
}

void matmul(float* out, const void* w, DType wtype, size_t w_row_stride_bytes, const float* x,
            int64_t n_tokens, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  MatmulTarget t{out, w, wtype, w_row_stride_bytes, n_out};
  matmul_multi(&t, 1, x, n_tokens, n_in, pool);
}

}  // namespace parallm::cpu
