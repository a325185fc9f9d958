// Packing of the block types into block_pack.h's layout, and its reference
// dequantizer. Each GGUF block is first read into its integer form (one
// reader per type, from the layouts in core/dtype.h), which one generic
// writer lays out.
#include "kernels/cpu/block_pack.h"

#include <cstring>

#include "kernels/cpu/packed.h"
#include "util/check.h"

namespace parallm::cpu {

namespace {

// One super-block of one row: w = (d * sc[s]) * (u[i] - offset) [-/+ dmin * m[s]]
// (iq4: u holds the codebook index, the kernels' table makes it level + 128).
struct IntBlock {
  uint16_t d = 0, dmin = 0;
  int8_t sc[16] = {};
  uint8_t m[16] = {};
  uint8_t u[256] = {};
};

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The 32-weight legacy blocks' 4-bit quant j (low nibbles 0-15, high 16-31)
// and bit 4 (qh, a little-endian uint32).
int legacy_nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4; }
int legacy_high(const uint8_t* qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }
// The K-quants' 2-bit field of weight i (q2_k, q3_k).
int field_2bit(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

void read_block(DType t, const uint8_t* p, IntBlock* b) {
  switch (t) {
    case DType::kQ4_1: {
      const auto* x = reinterpret_cast<const BlockQ4_1*>(p);
      b->d = load_u16(p), b->dmin = load_u16(p + 2);
      for (int j = 0; j < 32; ++j) b->u[j] = static_cast<uint8_t>(legacy_nibble(x->qs, j));
      return;
    }
    case DType::kQ5_0: {
      const auto* x = reinterpret_cast<const BlockQ5_0*>(p);
      b->d = load_u16(p);
      for (int j = 0; j < 32; ++j)
        b->u[j] = static_cast<uint8_t>(legacy_nibble(x->qs, j) | (legacy_high(x->qh, j) << 4));
      return;
    }
    case DType::kQ5_1: {
      const auto* x = reinterpret_cast<const BlockQ5_1*>(p);
      b->d = load_u16(p), b->dmin = load_u16(p + 2);
      for (int j = 0; j < 32; ++j)
        b->u[j] = static_cast<uint8_t>(legacy_nibble(x->qs, j) | (legacy_high(x->qh, j) << 4));
      return;
    }
    case DType::kIQ4_NL: {
      const auto* x = reinterpret_cast<const BlockIQ4_NL*>(p);
      b->d = load_u16(p);
      for (int j = 0; j < 32; ++j) b->u[j] = static_cast<uint8_t>(legacy_nibble(x->qs, j));
      return;
    }
    case DType::kQ2_K: {
      const auto* x = reinterpret_cast<const BlockQ2_K*>(p);
      b->d = x->d, b->dmin = x->dmin;
      for (int s = 0; s < 16; ++s) {
        b->sc[s] = static_cast<int8_t>(x->scales[s] & 0xf);
        b->m[s] = static_cast<uint8_t>(x->scales[s] >> 4);
      }
      for (int i = 0; i < 256; ++i) b->u[i] = static_cast<uint8_t>(field_2bit(x->qs, i));
      return;
    }
    case DType::kQ3_K: {
      const auto* x = reinterpret_cast<const BlockQ3_K*>(p);
      b->d = x->d;
      for (int s = 0; s < 16; ++s) b->sc[s] = static_cast<int8_t>(q3_k_scale(x->scales, s) - 32);
      for (int i = 0; i < 256; ++i) {
        const int hi = (x->hmask[i % 32] >> (i / 32)) & 1;
        b->u[i] = static_cast<uint8_t>(field_2bit(x->qs, i) | (hi << 2));
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const uint8_t* scales =
          five ? reinterpret_cast<const BlockQ5_K*>(p)->scales : reinterpret_cast<const BlockQ4_K*>(p)->scales;
      const uint8_t* qs = five ? reinterpret_cast<const BlockQ5_K*>(p)->qs : reinterpret_cast<const BlockQ4_K*>(p)->qs;
      b->d = load_u16(p), b->dmin = load_u16(p + 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        q4_k_scale_min(scales, j, &sc, &m);
        b->sc[j] = static_cast<int8_t>(sc);
        b->m[j] = static_cast<uint8_t>(m);
        for (int l = 0; l < 32; ++l) {
          int u = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf;
          if (five) u |= ((reinterpret_cast<const BlockQ5_K*>(p)->qh[l] >> j) & 1) << 4;
          b->u[32 * j + l] = static_cast<uint8_t>(u);
        }
      }
      return;
    }
    case DType::kQ6_K: {
      const auto* x = reinterpret_cast<const BlockQ6_K*>(p);
      b->d = x->d;
      for (int s = 0; s < 16; ++s) b->sc[s] = x->scales[s];
      for (int i = 0; i < 256; ++i) {
        const int h = i / 128, g = (i % 128) / 32, l = i % 32;
        const int lo = (x->ql[64 * h + l + 32 * (g % 2)] >> (4 * (g / 2))) & 0xf;
        const int hi = (x->qh[32 * h + l] >> (2 * g)) & 3;
        b->u[i] = static_cast<uint8_t>(lo | (hi << 4));
      }
      return;
    }
    case DType::kIQ4_XS: {
      const auto* x = reinterpret_cast<const BlockIQ4_XS*>(p);
      b->d = x->d;
      for (int j = 0; j < 8; ++j) {
        b->sc[j] = static_cast<int8_t>(iq4_xs_scale(*x, j) - 32);
        for (int l = 0; l < 32; ++l) {
          b->u[32 * j + l] = static_cast<uint8_t>(legacy_nibble(x->qs + 16 * j, l));
        }
      }
      return;
    }
    default:
      PARALLM_CHECK_MSG(false, std::string("block_pack: not a block-packed type: ") + dtype_name(t));
  }
}

// Writes row j's super-block b into its group record.
void write_block(const BlockLayout& L, const IntBlock& b, int j, uint8_t* rec) {
  std::memcpy(rec + 2 * j, &b.d, 2);
  if (L.min != BlockMin::kNone) std::memcpy(rec + L.dmin_offset() + 2 * j, &b.dmin, 2);
  for (int s = 0; L.int_scales && s < L.n_sub(); ++s) {
    rec[L.sc_offset() + 16 * s + j] =
        L.combined ? static_cast<uint8_t>(b.sc[s] | (b.m[s] << 4)) : static_cast<uint8_t>(b.sc[s]);
    if (L.separate_m()) rec[L.m_offset() + 16 * s + j] = b.m[s];
  }
  for (int c = 0; c < L.chunks(); ++c) {
    uint8_t* chunk = rec + L.header_bytes() + c * L.chunk_bytes();
    for (int e = 0; e < 32; ++e) {
      const int k = e / 4, byte = 4 * j + e % 4;
      int u = b.u[32 * c + e], plane_base = 0, low = 0;
      for (int p = 0; p < 2 && L.planes[p] > 0; ++p) {
        const int w = L.planes[p], v = k % w, i = k / w;
        const int field = (u >> low) & ((1 << w) - 1);
        chunk[64 * (plane_base + v) + byte] =
            static_cast<uint8_t>(chunk[64 * (plane_base + v) + byte] | (field << (w * i)));
        plane_base += w, low += w;
      }
    }
  }
}

// Row j's super-block of a group record back in integer form.
void read_packed(const BlockLayout& L, const uint8_t* rec, int j, IntBlock* b) {
  b->d = load_u16(rec + 2 * j);
  if (L.min != BlockMin::kNone) b->dmin = load_u16(rec + L.dmin_offset() + 2 * j);
  for (int s = 0; L.int_scales && s < L.n_sub(); ++s) {
    const uint8_t v = rec[L.sc_offset() + 16 * s + j];
    b->sc[s] = L.combined ? static_cast<int8_t>(v & 0xf) : static_cast<int8_t>(v);
    if (L.combined) b->m[s] = static_cast<uint8_t>(v >> 4);
    if (L.separate_m()) b->m[s] = rec[L.m_offset() + 16 * s + j];
  }
  for (int c = 0; c < L.chunks(); ++c) {
    const uint8_t* chunk = rec + L.header_bytes() + c * L.chunk_bytes();
    for (int e = 0; e < 32; ++e) {
      const int k = e / 4, byte = 4 * j + e % 4;
      int u = 0, plane_base = 0, low = 0;
      for (int p = 0; p < 2 && L.planes[p] > 0; ++p) {
        const int w = L.planes[p], v = k % w, i = k / w;
        u |= ((chunk[64 * (plane_base + v) + byte] >> (w * i)) & ((1 << w) - 1)) << low;
        plane_base += w, low += w;
      }
      b->u[32 * c + e] = static_cast<uint8_t>(u);
    }
  }
}

}  // namespace

size_t block_packed_group_bytes(DType t, int64_t n_in) {
  const BlockLayout L = block_layout(t);
  PARALLM_CHECK(L.super > 0 && n_in % L.super == 0);
  return static_cast<size_t>(n_in / L.super) * static_cast<size_t>(L.record_bytes());
}

void block_pack_rows(DType t, const void* src, size_t src_stride, int64_t n_out, int64_t n_in, void* dst) {
  const BlockLayout L = block_layout(t);
  const size_t group = block_packed_group_bytes(t, n_in), block = dtype_block_bytes(t);
  const int64_t n_super = n_in / L.super;
  auto* out = static_cast<uint8_t*>(dst);
  std::memset(out, 0, static_cast<size_t>((n_out + kPackRows - 1) / kPackRows) * group);
  IntBlock b;
  for (int64_t o = 0; o < n_out; ++o) {
    const auto* row = static_cast<const uint8_t*>(src) + static_cast<size_t>(o) * src_stride;
    uint8_t* g = out + static_cast<size_t>(o / kPackRows) * group;
    for (int64_t s = 0; s < n_super; ++s) {
      read_block(t, row + static_cast<size_t>(s) * block, &b);
      write_block(L, b, static_cast<int>(o % kPackRows), g + static_cast<size_t>(s) * L.record_bytes());
    }
  }
}

void dequantize_block_packed_row(DType t, const void* packed, size_t group_stride, int64_t o, int64_t n_in,
                                 float* dst) {
  const BlockLayout L = block_layout(t);
  const auto* g = static_cast<const uint8_t*>(packed) + static_cast<size_t>(o / kPackRows) * group_stride;
  const int j = static_cast<int>(o % kPackRows);
  IntBlock b;
  for (int64_t s = 0; s < n_in / L.super; ++s, dst += L.super) {
    read_packed(L, g + static_cast<size_t>(s) * L.record_bytes(), j, &b);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int i = 0; i < L.super; ++i) {
      const int sub = i / L.sub, q = L.codebook ? kIq4nlValues[b.u[i]] : b.u[i] - L.offset;
      // The reference dequantizers' order: (d * sc) * q, then the min.
      const float scaled = L.int_scales ? d * b.sc[sub] * q : d * q;
      if (L.min == BlockMin::kSub) {
        dst[i] = scaled - dmin * b.m[sub];
      } else if (L.min == BlockMin::kAdd) {
        dst[i] = scaled + dmin;
      } else {
        dst[i] = scaled;
      }
    }
  }
}

}  // namespace parallm::cpu
