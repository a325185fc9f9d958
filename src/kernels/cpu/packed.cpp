#include "kernels/cpu/packed.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/block_pack.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/isa_table.h"
#include "kernels/cpu/quant.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

// Quant bytes per block and row: q4_0 16 (two nibbles a byte), q8_0 32.
int64_t quant_bytes(DType t) { return t == DType::kQ4_0 ? 16 : 32; }
size_t block_bytes(DType t) { return static_cast<size_t>(quant_bytes(t) * kPackRows + 2 * kPackRows); }
// What a stored quant byte is offset by (q8_0 is kept unsigned: q + 128).
uint8_t quant_offset(DType t) { return t == DType::kQ8_0 ? 0x80 : 0x00; }

// GGUF block of row j: its f16 scale, then its quant bytes.
const uint8_t* gguf_block(DType t, const uint8_t* row, int64_t b) {
  return row + static_cast<size_t>(b) * static_cast<size_t>(2 + quant_bytes(t));
}

}  // namespace

bool packable(DType t) { return t == DType::kQ4_0 || t == DType::kQ8_0 || block_packable(t); }

bool packing_pays(DType t) {
  static const bool enabled = [] {
    const char* env = std::getenv("PARALLM_PACK");
    return env == nullptr || std::string(env) != "0";
  }();
  // AVX2 has packed kernels for the block_pack.h types only (its q8_0 / q4_0
  // row dots read the GGUF layout).
  const Isa isa = active_isa();
  return enabled && packable(t) && (isa == Isa::kAvx512 || (isa == Isa::kAvx2 && block_packable(t)));
}

size_t packed_group_bytes(DType t, int64_t n_in) {
  if (block_packable(t)) return block_packed_group_bytes(t, n_in);
  PARALLM_CHECK(packable(t) && n_in % 32 == 0);
  return static_cast<size_t>(n_in / 32) * block_bytes(t);
}

size_t packed_bytes(DType t, int64_t n_out, int64_t n_in) {
  return static_cast<size_t>((n_out + kPackRows - 1) / kPackRows) * packed_group_bytes(t, n_in);
}

void pack_rows(DType t, const void* src, size_t src_stride, int64_t n_out, int64_t n_in, void* dst) {
  if (block_packable(t)) {
    block_pack_rows(t, src, src_stride, n_out, n_in, dst);
    return;
  }
  const int64_t nb = n_in / 32, qb = quant_bytes(t), parts = qb / 4;
  const size_t group = packed_group_bytes(t, n_in), bb = block_bytes(t);
  const uint8_t off = quant_offset(t);
  auto* out = static_cast<uint8_t*>(dst);
  std::memset(out, 0, packed_bytes(t, n_out, n_in));  // padding rows: scale 0
  for (int64_t o = 0; o < n_out; ++o) {
    const auto* row = static_cast<const uint8_t*>(src) + static_cast<size_t>(o) * src_stride;
    const int64_t j = o % kPackRows;
    uint8_t* g = out + static_cast<size_t>(o / kPackRows) * group;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = gguf_block(t, row, b);
      uint8_t* pb = g + static_cast<size_t>(b) * bb;
      for (int64_t k = 0; k < parts; ++k) {
        for (int i = 0; i < 4; ++i) pb[64 * k + 4 * j + i] = static_cast<uint8_t>(blk[2 + 4 * k + i] + off);
      }
      std::memcpy(pb + 64 * parts + 2 * j, blk, 2);
    }
  }
}

void unpack_row(DType t, const void* packed, size_t group_stride, int64_t o, int64_t n_in, void* dst) {
  PARALLM_CHECK(t == DType::kQ4_0 || t == DType::kQ8_0);
  const int64_t nb = n_in / 32, qb = quant_bytes(t), parts = qb / 4;
  const size_t bb = block_bytes(t);
  const uint8_t off = quant_offset(t);
  const auto* g = static_cast<const uint8_t*>(packed) + static_cast<size_t>(o / kPackRows) * group_stride;
  const int64_t j = o % kPackRows;
  auto* row = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = g + static_cast<size_t>(b) * bb;
    uint8_t* blk = row + static_cast<size_t>(b) * static_cast<size_t>(2 + qb);
    std::memcpy(blk, pb + 64 * parts + 2 * j, 2);
    for (int64_t k = 0; k < parts; ++k) {
      for (int i = 0; i < 4; ++i) blk[2 + 4 * k + i] = static_cast<uint8_t>(pb[64 * k + 4 * j + i] - off);
    }
  }
}

void dequantize_packed_row(DType t, const void* packed, size_t group_stride, int64_t o, int64_t n_in, float* dst) {
  if (block_packable(t)) {
    dequantize_block_packed_row(t, packed, group_stride, o, n_in, dst);
    return;
  }
  thread_local std::vector<uint8_t> raw;
  raw.resize(dtype_row_bytes(t, n_in));
  unpack_row(t, packed, group_stride, o, n_in, raw.data());
  dequantize_row(t, raw.data(), dst, n_in);
}

void packed_rows_portable(const RowsTask& a) {
  thread_local std::vector<float> wrow;
  wrow.resize(static_cast<size_t>(a.n_in));
  for (int64_t o = a.o_begin; o < a.o_end; ++o) {
    dequantize_packed_row(a.wtype, a.w, a.w_stride, o, a.n_in, wrow.data());
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* xt = a.x + t * a.n_in;
      float s = 0;
      for (int64_t i = 0; i < a.n_in; ++i) s += wrow[i] * xt[i];
      a.out[t * a.out_stride + o] = s;
    }
  }
}

}  // namespace parallm::cpu
