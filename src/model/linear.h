// Linear: one rank's piece of a weight matrix W [n_out, n_in], used in place
// from the mapped file when its dtype is the one we run, else converted once
// at load into a buffer owned by a WeightStore (`--dtype`).
//   column-parallel: this rank holds rows [row_begin, row_end) of W (its outputs)
//   row-parallel:    this rank holds columns [col_begin, col_end) of W (its inputs);
//                    the partial outputs of all ranks are summed by an all-reduce
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/dtype.h"
#include "loader/model_file.h"
#include "util/thread_pool.h"

namespace parallm {

struct Linear {
  const uint8_t* data = nullptr;  // row o at data + o * row_stride_bytes
  DType dtype = DType::kF32;
  size_t row_stride_bytes = 0;
  int64_t n_out = 0;  // rows on this rank
  int64_t n_in = 0;   // columns on this rank
  const float* bias = nullptr;  // [n_out] or null

  size_t bytes() const { return static_cast<size_t>(n_out) * dtype_row_bytes(dtype, n_in); }
};

// Owns converted weights and counts the bytes this rank holds.
class WeightStore {
 public:
  // target: convert 2-D weights to this dtype at load (nullopt: keep as stored).
  explicit WeightStore(std::optional<DType> target) : target_(target) {}

  // A [rows, cols] slice of a 2-D matrix stored as `data` with `row_stride` bytes per full row.
  Linear slice(const uint8_t* data, DType dtype, size_t full_row_bytes, int64_t row_begin, int64_t row_end,
               int64_t col_begin, int64_t col_end, const std::string& what);
  Linear column_parallel(const WeightTensor& w, int64_t row_begin, int64_t row_end, const float* bias = nullptr);
  Linear row_parallel(const WeightTensor& w, int64_t col_begin, int64_t col_end);
  Linear whole(const WeightTensor& w) { return column_parallel(w, 0, w.rows()); }
  // A 1-D f32 tensor (norm weight, bias) or a slice of it.
  const float* vector(const WeightTensor& w, int64_t begin = 0);

  size_t resident_bytes() const { return resident_bytes_; }
  std::optional<DType> target() const { return target_; }

 private:
  std::optional<DType> target_;
  std::vector<std::vector<uint8_t>> buffers_;
  size_t resident_bytes_ = 0;
};

// out [n_tokens, l.n_out] = x [n_tokens, l.n_in] W^T (+ bias).
void linear_forward(float* out, const Linear& l, const float* x, int64_t n_tokens, ThreadPool& pool);
// Several Linears sharing the input x, in one parallel region (fused QKV, gate+up).
void linear_forward_multi(float* const* outs, const Linear* const* ls, int n, const float* x, int64_t n_tokens,
                          ThreadPool& pool);

}  // namespace parallm
