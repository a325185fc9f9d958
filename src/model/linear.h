// Linear: one rank's piece of a weight matrix W [n_out, n_in], used in place
// from the mapped file when its dtype is the one we run, else converted once
// at load into a buffer owned by a WeightStore (`--dtype`). q8_0 / q4_0
// pieces are repacked at load into 16-row groups (kernels/cpu/packed.h) when
// the CPU's kernels run that layout faster, and f32 / f16 / bf16 pieces are
// copied as they are onto huge pages when the OS has them (decode streams
// every weight once per token, and each 4 KB page costs a page walk); the
// mapped pages they came from are then handed back to the OS, so the copy
// does not double the memory. PARALLM_PACK=0 keeps every weight in place.
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
#include "model/weight_plan.h"
#include "util/thread_pool.h"
#include "util/zeroed_memory.h"

namespace parallm {

struct Linear {
  const uint8_t* data = nullptr;  // row o at data + o * row_stride_bytes
  DType dtype = DType::kF32;
  size_t row_stride_bytes = 0;  // packed: bytes of one 16-row group
  int64_t n_out = 0;            // rows on this rank
  int64_t n_in = 0;             // columns on this rank
  const float* bias = nullptr;  // [n_out] or null
  bool packed = false;          // data in the layout of kernels/cpu/packed.h

  size_t bytes() const;
};

// Owns converted weights and counts the bytes this rank holds.
class WeightStore {
 public:
  // target: convert 2-D weights to this dtype at load (nullopt: keep as stored).
  // q8_0 / q4_0 results are packed when the active kernels profit
  // (cpu::packing_pays; PARALLM_PACK=0 turns it off).
  explicit WeightStore(std::optional<DType> target) : target_(target) {}

  // A [rows, cols] slice of a 2-D matrix stored as `data` with `row_stride` bytes per full row.
  Linear slice(const uint8_t* data, DType dtype, size_t full_row_bytes, int64_t row_begin, int64_t row_end,
               int64_t col_begin, int64_t col_end, const std::string& what);
  Linear column_parallel(const WeightTensor& w, int64_t row_begin, int64_t row_end, const float* bias = nullptr);
  Linear row_parallel(const WeightTensor& w, int64_t col_begin, int64_t col_end);
  Linear whole(const WeightTensor& w) { return column_parallel(w, 0, w.rows()); }
  // A 1-D f32 tensor (norm weight, bias) or a slice of it.
  const float* vector(const WeightTensor& w, int64_t begin = 0);
  // A piece of the rank's weight plan (model/weight_plan.h); absent pieces
  // give an empty Linear / null.
  Linear materialize(const MatrixPiece& p);
  const float* vector(const VectorPiece& p) { return p.present() ? vector(*p.tensor, p.begin) : nullptr; }

  size_t resident_bytes() const { return resident_bytes_; }
  // Whether rows of type t stream faster from huge pages than from the
  // mapping's 4 KB pages, so the store copies them there (transparent huge
  // pages on, PARALLM_PACK not 0). The planner's probe asks too.
  static bool streams_better_on_huge_pages(DType t);
  std::optional<DType> target() const { return target_; }

 private:
  // The packed copy of l (which slice() just made), replacing l's data.
  void pack(Linear& l, bool owns_source);
  // l's rows copied into the huge-page arena, its source released.
  void move_to_huge_pages(Linear& l, bool owns_source);
  // After l's data was copied elsewhere: frees the conversion buffer it came
  // from (owns_source) or hands the mapped file's pages back to the OS.
  void drop_source(const Linear& l, bool owns_source);
  // n bytes (64-aligned) of the packed weights' arena.
  uint8_t* packed_alloc(size_t n);

  std::optional<DType> target_;
  std::vector<std::vector<uint8_t>> buffers_;
  // Packed weights live in large chunks of huge-page memory, one after the
  // other, not a heap block each (see WeightStore::packed_alloc).
  std::vector<ZeroedMemory> packed_chunks_;
  size_t chunk_used_ = 0;
  size_t resident_bytes_ = 0;
};

// out [n_tokens, l.n_out] = x [n_tokens, l.n_in] W^T (+ bias).
void linear_forward(float* out, const Linear& l, const float* x, int64_t n_tokens, ThreadPool& pool);
// Several Linears sharing the input x, in one parallel region (fused QKV, gate+up).
void linear_forward_multi(float* const* outs, const Linear* const* ls, int n, const float* x, int64_t n_tokens,
                          ThreadPool& pool);

}  // namespace parallm
