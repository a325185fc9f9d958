#include "model/linear.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

size_t Linear::bytes() const {
  return packed ? cpu::packed_bytes(dtype, n_out, n_in) : static_cast<size_t>(n_out) * dtype_row_bytes(dtype, n_in);
}

namespace {

// Hands the whole pages of [p, p + n) back to the OS. The weights' mapping is
// read-only and file-backed, so its pages come back from the file if touched
// again (the token embedding table when tied to the output matrix).
// MADV_PAGEOUT never loses data on any other memory either (tests pass
// vectors): anonymous pages would be swapped, not dropped. Errors (older
// kernels) are ignored: the pages then simply stay.
void release_pages(const uint8_t* p, size_t n) {
#ifdef MADV_PAGEOUT
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)p, (void)n;
#endif
}

}  // namespace

// NOTE: one heap block per matrix (4 KB pages) against 64 MiB chunks of huge
// pages, llama-110m decode in alternating runs: q8_0 380-466 vs 454-492
// tokens/s, q4_0 694-765 vs 763-775. A decode token streams every weight
// once, and on this VM each 4 KB page it crosses is a nested page walk.
uint8_t* WeightStore::packed_alloc(size_t n) {
  constexpr size_t kChunk = size_t{64} << 20, kHuge = size_t{2} << 20;
  n = (n + 63) / 64 * 64;
  if (packed_chunks_.empty() || chunk_used_ + n > packed_chunks_.back().size()) {
    packed_chunks_.emplace_back(std::max(kChunk, (n + kHuge - 1) / kHuge * kHuge));
    chunk_used_ = 0;
  }
  uint8_t* p = static_cast<uint8_t*>(packed_chunks_.back().data()) + chunk_used_;
  chunk_used_ += n;
  return p;
}

// NOTE: F16 llama-110m decode, weights used in place from the file's 4 KB
// pages against the same rows copied onto huge pages, five alternating runs
// each: 232 vs 252 tokens/s (0.87 vs 0.97 of the bandwidth roofline). Only
// the float types the kernels stream row by row; the block types are packed
// (packed.h) where the CPU has a packed kernel.
bool WeightStore::streams_better_on_huge_pages(DType t) {
  static const bool enabled = [] {
    const char* env = std::getenv("PARALLM_PACK");
    if (env != nullptr && std::string(env) == "0") return false;
    // Without transparent huge pages the copy would buy nothing.
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    if (!std::getline(f, modes)) return false;
    return modes.find("[never]") == std::string::npos;
  }();
  return enabled && (t == DType::kF16 || t == DType::kBF16 || t == DType::kF32);
}

void WeightStore::drop_source(const Linear& l, bool owns_source) {
  if (owns_source) {
    buffers_.pop_back();  // the --dtype conversion slice() just made
  } else {
    release_pages(l.data, static_cast<size_t>(l.n_out - 1) * l.row_stride_bytes + dtype_row_bytes(l.dtype, l.n_in));
  }
}

void WeightStore::move_to_huge_pages(Linear& l, bool owns_source) {
  const size_t row = dtype_row_bytes(l.dtype, l.n_in);
  uint8_t* dst = packed_alloc(row * static_cast<size_t>(l.n_out));
  for (int64_t r = 0; r < l.n_out; ++r) {
    std::memcpy(dst + static_cast<size_t>(r) * row, l.data + static_cast<size_t>(r) * l.row_stride_bytes, row);
  }
  drop_source(l, owns_source);
  l.data = dst;
  l.row_stride_bytes = row;
}

void WeightStore::pack(Linear& l, bool owns_source) {
  uint8_t* dst = packed_alloc(cpu::packed_bytes(l.dtype, l.n_out, l.n_in));
  cpu::pack_rows(l.dtype, l.data, l.row_stride_bytes, l.n_out, l.n_in, dst);
  drop_source(l, owns_source);
  l.data = dst;
  l.row_stride_bytes = cpu::packed_group_bytes(l.dtype, l.n_in);
  l.packed = true;
}

Linear WeightStore::slice(const uint8_t* data, DType dtype, size_t full_row_bytes, int64_t row_begin, int64_t row_end,
                          int64_t col_begin, int64_t col_end, const std::string& what) {
  const int64_t block = dtype_block_elems(dtype);
  if (col_begin % block != 0 || (col_end - col_begin) % block != 0) {
    throw InputError(strfmt("cannot split '%s' at column %lld: %s blocks hold %lld values; choose another --tp",
                            what.c_str(), (long long)col_begin, dtype_name(dtype), (long long)block));
  }
  Linear l;
  l.n_out = row_end - row_begin;
  l.n_in = col_end - col_begin;
  const uint8_t* first = data + static_cast<size_t>(row_begin) * full_row_bytes + dtype_row_bytes(dtype, col_begin);
  if (!target_ || *target_ == dtype) {
    l.data = first;
    l.dtype = dtype;
    l.row_stride_bytes = full_row_bytes;
  } else {
    // Convert once: dequantize each row slice to f32, re-encode in the target.
    const DType to = *target_;
    if (l.n_in % dtype_block_elems(to) != 0) {
      throw InputError(strfmt("cannot convert '%s' to %s: rows of %lld values are not whole blocks", what.c_str(),
                              dtype_name(to), (long long)l.n_in));
    }
    const size_t out_row = dtype_row_bytes(to, l.n_in);
    std::vector<uint8_t> buf(out_row * static_cast<size_t>(l.n_out));
    std::vector<float> tmp(static_cast<size_t>(l.n_in));
    for (int64_t r = 0; r < l.n_out; ++r) {
      cpu::dequantize_row(dtype, first + static_cast<size_t>(r) * full_row_bytes, tmp.data(), l.n_in);
      cpu::quantize_row(to, tmp.data(), buf.data() + static_cast<size_t>(r) * out_row, l.n_in);
    }
    buffers_.push_back(std::move(buf));
    l.data = buffers_.back().data();
    l.dtype = to;
    l.row_stride_bytes = out_row;
  }
  const bool owns_source = target_ && *target_ != dtype;
  if (l.n_out > 0 && cpu::packing_pays(l.dtype)) {
    pack(l, owns_source);
  } else if (l.n_out > 0 && streams_better_on_huge_pages(l.dtype)) {
    move_to_huge_pages(l, owns_source);
  }
  resident_bytes_ += l.bytes();
  return l;
}

Linear WeightStore::column_parallel(const WeightTensor& w, int64_t row_begin, int64_t row_end, const float* bias) {
  PARALLM_CHECK(w.shape.size() == 2 && row_begin >= 0 && row_end <= w.shape[0]);
  Linear l = slice(w.data, w.dtype, w.row_bytes(), row_begin, row_end, 0, w.cols(), w.name);
  l.bias = bias;
  return l;
}

Linear WeightStore::row_parallel(const WeightTensor& w, int64_t col_begin, int64_t col_end) {
  PARALLM_CHECK(w.shape.size() == 2 && col_begin >= 0 && col_end <= w.shape[1]);
  return slice(w.data, w.dtype, w.row_bytes(), 0, w.rows(), col_begin, col_end, w.name);
}

Linear WeightStore::materialize(const MatrixPiece& p) {
  if (!p.present()) return Linear{};
  Linear l = slice(p.data, p.dtype, p.full_row_bytes, p.row_begin, p.row_end, p.col_begin, p.col_end, p.what);
  if (p.bias != nullptr) l.bias = vector(*p.bias, p.row_begin);
  return l;
}

const float* WeightStore::vector(const WeightTensor& w, int64_t begin) {
  PARALLM_CHECK(w.dtype == DType::kF32 && w.shape.size() == 1);
  return reinterpret_cast<const float*>(w.data) + begin;
}

namespace {
void add_bias(float* out, const float* bias, int64_t n_tokens, int64_t n_out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* o = out + t * n_out;
    for (int64_t i = 0; i < n_out; ++i) o[i] += bias[i];
  }
}
}  // namespace

void linear_forward(float* out, const Linear& l, const float* x, int64_t n_tokens, ThreadPool& pool) {
  const cpu::MatmulTarget t{out, l.data, l.dtype, l.row_stride_bytes, l.n_out, l.packed};
  cpu::matmul_multi(&t, 1, x, n_tokens, l.n_in, pool);
  if (l.bias) add_bias(out, l.bias, n_tokens, l.n_out);
}

void linear_forward_multi(float* const* outs, const Linear* const* ls, int n, const float* x, int64_t n_tokens,
                          ThreadPool& pool) {
  // Fused groups are small (QKV, gate+up): a stack array, no allocation per call.
  constexpr int kMaxFused = 4;
  PARALLM_CHECK(n > 0 && n <= kMaxFused);
  cpu::MatmulTarget targets[kMaxFused];
  for (int i = 0; i < n; ++i) {
    PARALLM_CHECK(ls[i]->n_in == ls[0]->n_in);
    targets[i] = {outs[i], ls[i]->data, ls[i]->dtype, ls[i]->row_stride_bytes, ls[i]->n_out, ls[i]->packed};
  }
  cpu::matmul_multi(targets, n, x, n_tokens, ls[0]->n_in, pool);
  for (int i = 0; i < n; ++i) {
    if (ls[i]->bias) add_bias(outs[i], ls[i]->bias, n_tokens, ls[i]->n_out);
  }
}

}  // namespace parallm
