// Quantized Hugging Face checkpoints (see quantized_checkpoint.h).
#include "loader/quantized_checkpoint.h"

#include <array>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// One e4m3 byte (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no
// infinities, S.1111.111 is NaN) as a float.
float fp8_e4m3_to_float(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
  if (exp == 0xf && man == 7) return std::nanf("");
  const float v = exp == 0 ? std::ldexp(static_cast<float>(man) / 8.0f, -6)
                           : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return sign ? -v : v;
}

// Element i of a float tensor stored as F32, F16 or BF16.
float float_at(const SafetensorsTensor& t, int64_t i) {
  if (t.st_dtype == "F32") {
    float v;
    std::memcpy(&v, t.data + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, t.data + 2 * i, 2);
  return t.st_dtype == "F16" ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

uint32_t word_at(const SafetensorsTensor& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

int64_t elements(const SafetensorsTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

// Dequantizes one module; one row of W at a time, so that a large layer
// never needs an f32 copy of itself.
class ModuleReader {
 public:
  ModuleReader(const QuantScheme& s, const QuantParts& parts, const std::string& name) : s_(s), name_(name) {
    auto get = [&](const char* suffix, bool required) -> const SafetensorsTensor* {
      auto it = parts.find(suffix);
      if (it == parts.end()) {
        if (required) fail(std::string("lacks its ") + suffix + " tensor");
        return nullptr;
      }
      return it->second;
    };
    switch (s.method) {
      case QuantMethod::kFp8:
        q_ = get("weight", true);
        scale_ = get("weight_scale", false);
        scale_inv_ = get("weight_scale_inv", false);
        if ((scale_ == nullptr) == (scale_inv_ == nullptr)) fail("needs exactly one of weight_scale, weight_scale_inv");
        setup_fp8();
        break;
      case QuantMethod::kGptq:
      case QuantMethod::kAwq:
        q_ = get("qweight", true);
        zeros_ = get("qzeros", true);
        scale_ = get("scales", true);
        g_idx_ = get("g_idx", false);
        setup_int4_packed();
        break;
      case QuantMethod::kCompressedInt4:
        q_ = get("weight_packed", true);
        scale_ = get("weight_scale", true);
        setup_compressed();
        break;
      case QuantMethod::kNone:
        fail("is not quantized");
    }
  }

  int64_t out() const { return out_; }
  int64_t in() const { return in_; }
  bool symmetric() const { return s_.method == QuantMethod::kCompressedInt4 || !s_.has_zeros; }

  // Row o of W [in].
  void row(int64_t o, float* w) const {
    for (int64_t i = 0; i < in_; ++i) w[i] = value(o, i);
  }

  // int4 layouts: the quant, group, zero point and scale behind W[o][i].
  int q(int64_t o, int64_t i) const {
    switch (s_.method) {
      case QuantMethod::kGptq:
        return static_cast<int>((word_at(*q_, (i / 8) * out_ + o) >> (4 * (i % 8))) & 15);
      case QuantMethod::kAwq:
        return static_cast<int>((word_at(*q_, i * (out_ / 8) + o / 8) >> (4 * kAwqNibble[o % 8])) & 15);
      default:  // compressed-tensors: stored as value + 8
        return static_cast<int>((word_at(*q_, o * (in_ / 8) + i / 8) >> (4 * (i % 8))) & 15);
    }
  }
  // Whether every 32 consecutive inputs share one group (no desc_act scatter).
  bool groups_whole_in_32s() const {
    for (int64_t i = 0; i + 32 <= in_; i += 32) {
      for (int64_t j = i + 1; j < i + 32; ++j) {
        if (group(j) != group(i)) return false;
      }
    }
    return true;
  }
  int64_t group(int64_t i) const {
    if (g_idx_ != nullptr) return static_cast<int32_t>(word_at(*g_idx_, i));
    return i / group_size_;
  }
  float zero(int64_t o, int64_t g) const {
    if (s_.method == QuantMethod::kCompressedInt4 || zeros_ == nullptr) return 8.0f;
    const int nibble = s_.method == QuantMethod::kAwq ? kAwqNibble[o % 8] : static_cast<int>(o % 8);
    const int z = static_cast<int>((word_at(*zeros_, g * (out_ / 8) + o / 8) >> (4 * nibble)) & 15);
    return static_cast<float>(z + (s_.method == QuantMethod::kGptq && s_.gptq_zero_plus_one ? 1 : 0));
  }
  float scale(int64_t o, int64_t g) const {
    return s_.method == QuantMethod::kCompressedInt4 ? float_at(*scale_, o * n_groups_ + g)
                                                     : float_at(*scale_, g * out_ + o);
  }

 private:
  // AWQ packs outputs 0, 2, 4, 6, 1, 3, 5, 7 into nibbles 0..7: output j's nibble.
  static constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(s_.name + " module '" + name_ + "' " + what);
  }
  void need_dtype(const SafetensorsTensor* t, std::initializer_list<const char*> ok, const char* what) const {
    for (const char* d : ok) {
      if (t->st_dtype == d) return;
    }
    fail(std::string("has ") + what + " of dtype " + t->st_dtype);
  }
  void need_shape(const SafetensorsTensor* t, const std::vector<int64_t>& want, const char* what) const {
    if (t->shape != want)
      fail(std::string("has ") + what + " of shape " + shape_text(t->shape) + ", expected " + shape_text(want));
  }

  void need_nonempty() const {
    if (out_ <= 0 || in_ <= 0) fail("is empty (" + std::to_string(out_) + " x " + std::to_string(in_) + ")");
  }

  float value(int64_t o, int64_t i) const {
    if (s_.method == QuantMethod::kFp8) {
      const float qv = fp8_e4m3_to_float(q_->data[o * in_ + i]);
      if (scale_inv_ != nullptr) return qv * float_at(*scale_inv_, (o / block_[0]) * scale_cols_ + i / block_[1]);
      return qv * float_at(*scale_, per_channel_ ? o : 0);
    }
    const int64_t g = group(i);
    return (static_cast<float>(q(o, i)) - zero(o, g)) * scale(o, g);
  }

  void setup_fp8() {
    need_dtype(q_, {"F8_E4M3"}, "weight");
    if (q_->shape.size() != 2) fail("has a weight of shape " + shape_text(q_->shape) + ", not a matrix");
    out_ = q_->shape[0];
    in_ = q_->shape[1];
    need_nonempty();
    if (scale_ != nullptr) {
      need_dtype(scale_, {"F32", "F16", "BF16"}, "weight_scale");
      const int64_t n = elements(*scale_);
      if (n == out_ && out_ != 1) {
        per_channel_ = true;
      } else if (n != 1) {
        fail("has weight_scale of shape " + shape_text(scale_->shape) + ": neither one scale nor one per output row");
      }
      return;
    }
    need_dtype(scale_inv_, {"F32", "F16", "BF16"}, "weight_scale_inv");
    block_ = s_.fp8_block;
    if (block_[0] <= 0 || block_[1] <= 0) fail("has weight_scale_inv but the config gives no weight_block_size");
    scale_cols_ = (in_ + block_[1] - 1) / block_[1];
    need_shape(scale_inv_, {(out_ + block_[0] - 1) / block_[0], scale_cols_}, "weight_scale_inv");
  }

  void setup_int4_packed() {
    need_dtype(q_, {"I32"}, "qweight");
    need_dtype(zeros_, {"I32"}, "qzeros");
    need_dtype(scale_, {"F16", "BF16", "F32"}, "scales");
    if (q_->shape.size() != 2 || scale_->shape.size() != 2) fail("has qweight or scales that are not matrices");
    const bool gptq = s_.method == QuantMethod::kGptq;
    in_ = gptq ? q_->shape[0] * 8 : q_->shape[0];
    out_ = gptq ? q_->shape[1] : q_->shape[1] * 8;
    n_groups_ = scale_->shape[0];
    need_nonempty();
    group_size_ = s_.group_size > 0 ? s_.group_size : in_;
    if (out_ % 8 != 0) fail("has " + std::to_string(out_) + " outputs, not a multiple of 8");
    need_shape(scale_, {n_groups_, out_}, "scales");
    need_shape(zeros_, {n_groups_, out_ / 8}, "qzeros");
    if (g_idx_ != nullptr) {
      need_dtype(g_idx_, {"I32"}, "g_idx");
      need_shape(g_idx_, {in_}, "g_idx");
      for (int64_t i = 0; i < in_; ++i) {
        const int32_t g = static_cast<int32_t>(word_at(*g_idx_, i));
        if (g < 0 || g >= n_groups_)
          fail("has g_idx " + std::to_string(g) + " outside its " + std::to_string(n_groups_) + " groups");
      }
    } else if (n_groups_ != (in_ + group_size_ - 1) / group_size_) {
      fail("has " + std::to_string(n_groups_) + " scale groups for " + std::to_string(in_) + " inputs in groups of " +
           std::to_string(group_size_));
    }
  }

  void setup_compressed() {
    need_dtype(q_, {"I32"}, "weight_packed");
    need_dtype(scale_, {"F16", "BF16", "F32"}, "weight_scale");
    if (q_->shape.size() != 2 || scale_->shape.size() != 2)
      fail("has weight_packed or weight_scale that are not matrices");
    out_ = q_->shape[0];
    in_ = q_->shape[1] * 8;
    n_groups_ = scale_->shape[1];
    need_nonempty();
    group_size_ = s_.group_size > 0 ? s_.group_size : in_;
    need_shape(scale_, {out_, (in_ + group_size_ - 1) / group_size_}, "weight_scale");
  }

  const QuantScheme& s_;
  const std::string& name_;
  const SafetensorsTensor *q_ = nullptr, *scale_ = nullptr, *scale_inv_ = nullptr, *zeros_ = nullptr, *g_idx_ = nullptr;
  int64_t out_ = 0, in_ = 0, n_groups_ = 1, group_size_ = 1, scale_cols_ = 0;
  std::array<int64_t, 2> block_ = {0, 0};
  bool per_channel_ = false;
};

// Block [b * 32, b * 32 + 32) of row o written straight from its int4 quants:
// q4_0 when the zero point is 8, else q4_1 (d = s, m = -z s). False when the
// block's inputs span two groups, or the layout calls for q4_0 and a zero
// point is not 8.
bool pack_int4_block(const ModuleReader& r, int64_t o, int64_t b, DType target, uint8_t* dst) {
  const int64_t i0 = b * 32, g = r.group(i0);
  for (int64_t i = i0 + 1; i < i0 + 32; ++i) {
    if (r.group(i) != g) return false;
  }
  const float z = r.zero(o, g), s = r.scale(o, g);
  if (!(std::fabs(s) * 16.0f <= 65504.0f)) return false;  // the f32 path names the module
  uint8_t qs[16];
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(r.q(o, i0 + j) | (r.q(o, i0 + j + 16) << 4));
  if (target == DType::kQ4_0) {
    if (z != 8.0f) return false;
    BlockQ4_0 blk;
    blk.d = fp32_to_fp16(s);
    std::memcpy(blk.qs, qs, 16);
    std::memcpy(dst, &blk, sizeof(blk));
    return true;
  }
  BlockQ4_1 blk;
  blk.d = fp32_to_fp16(s);
  blk.m = fp32_to_fp16(-z * s);
  std::memcpy(blk.qs, qs, 16);
  std::memcpy(dst, &blk, sizeof(blk));
  return true;
}

}  // namespace

WeightTensor dequantize_module(const QuantScheme& scheme, const QuantParts& parts, const std::string& name,
                               std::optional<DType> target, ModelFile* model) {
  const ModuleReader r(scheme, parts, name);
  // A NaN or infinite scale (or an fp8 NaN code) has no value to store, and
  // the block types keep their scales and minimums in f16: weights past
  // f16's range (no real checkpoint has them) are refused rather than stored wrong.
  auto need_finite = [&](const float* v, int64_t n, int64_t o) {
    for (int64_t i = 0; i < n; ++i) {
      if (!(std::fabs(v[i]) <= 65504.0f)) {
        throw InputError(strfmt("%s module '%s': row %lld holds a weight of %g (NaN, infinite or past f16's range)",
                                scheme.name.c_str(), name.c_str(), (long long)o, static_cast<double>(v[i])));
      }
    }
  };
  const int64_t out = r.out(), in = r.in();
  // NOTE: int4 groups scattered by desc_act would mix in a 4-bit block;
  // 8 bits keep them (measured: a logit error of 0.32 re-quantized to q4_1).
  DType t = DType::kQ8_0;
  if (target) {
    t = *target;
  } else if (scheme.method != QuantMethod::kFp8 && r.groups_whole_in_32s()) {
    t = r.symmetric() ? DType::kQ4_0 : DType::kQ4_1;
  }
  if (in % dtype_block_elems(t) != 0) {
    if (target) {
      throw InputError(strfmt("%s module '%s': rows of %lld inputs cannot be stored as %s (blocks of %d)",
                              scheme.name.c_str(), name.c_str(), (long long)in, dtype_name(t), dtype_block_elems(t)));
    }
    t = DType::kF16;  // the int4 / q8_0 blocks need whole 32s
  }
  const size_t row_bytes = dtype_row_bytes(t, in);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(out));
  std::vector<float> row(static_cast<size_t>(in));
  const bool direct = scheme.method != QuantMethod::kFp8 && (t == DType::kQ4_0 || t == DType::kQ4_1);
  int64_t requantized = 0;
  for (int64_t o = 0; o < out; ++o) {
    uint8_t* dst = bytes.data() + static_cast<size_t>(o) * row_bytes;
    if (direct) {
      const size_t bb = dtype_row_bytes(t, 32);
      for (int64_t b = 0; b < in / 32; ++b) {
        if (pack_int4_block(r, o, b, t, dst + b * bb)) continue;
        for (int64_t j = 0; j < 32; ++j) {
          const int64_t i = b * 32 + j, g = r.group(i);
          row[static_cast<size_t>(j)] = (static_cast<float>(r.q(o, i)) - r.zero(o, g)) * r.scale(o, g);
        }
        need_finite(row.data(), 32, o);
        cpu::quantize_row(t, row.data(), dst + b * bb, 32);
        ++requantized;
      }
      continue;
    }
    r.row(o, row.data());
    need_finite(row.data(), in, o);
    cpu::quantize_row(t, row.data(), dst, in);
  }
  if (requantized > 0) {
    log_debug(strfmt("%s: %lld blocks of 32 span two groups (desc_act) and were re-quantized to %s", name.c_str(),
                     (long long)requantized, dtype_name(t)));
  }
  WeightTensor w;
  w.name = name;
  w.dtype = t;
  w.shape = {out, in};
  w.nbytes = bytes.size();
  w.data = model->own_buffer(std::move(bytes));
  return w;
}

}  // namespace parallm
