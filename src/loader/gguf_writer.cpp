// GGUF serialization (format notes in gguf_writer.h). Values are encoded as
// they are set; tensor data is produced by the fill callbacks while writing.
#include "loader/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "util/check.h"

namespace parallm {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF"

template <typename T>
void put(std::string* s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s->append(b, sizeof(T));
}

void put_string(std::string* s, const std::string& v) {
  put<uint64_t>(s, v.size());
  s->append(v);
}

std::string typed(GgufType t) {
  std::string s;
  put<uint32_t>(&s, static_cast<uint32_t>(t));
  return s;
}

void put_int_as(std::string* s, GgufType t, int64_t v, const std::string& key) {
  auto fits = [&](int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw InputError("GGUF key '" + key + "': value " + std::to_string(v) + " does not fit its type");
  };
  switch (t) {
    case GgufType::kU8:
      fits(0, 255);
      put<uint8_t>(s, static_cast<uint8_t>(v));
      break;
    case GgufType::kI8:
      fits(-128, 127);
      put<int8_t>(s, static_cast<int8_t>(v));
      break;
    case GgufType::kBool:
      fits(0, 1);
      put<uint8_t>(s, static_cast<uint8_t>(v));
      break;
    case GgufType::kU16:
      fits(0, 65535);
      put<uint16_t>(s, static_cast<uint16_t>(v));
      break;
    case GgufType::kI16:
      fits(-32768, 32767);
      put<int16_t>(s, static_cast<int16_t>(v));
      break;
    case GgufType::kU32:
      fits(0, 4294967295ll);
      put<uint32_t>(s, static_cast<uint32_t>(v));
      break;
    case GgufType::kI32:
      fits(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      put<int32_t>(s, static_cast<int32_t>(v));
      break;
    case GgufType::kU64:
      put<uint64_t>(s, static_cast<uint64_t>(v));
      break;
    case GgufType::kI64:
      put<int64_t>(s, v);
      break;
    default:
      throw InputError("GGUF key '" + key + "': element type " + std::to_string(static_cast<uint32_t>(t)) +
                       " is not an integer type");
  }
}

}  // namespace

GgufWriter::GgufWriter(uint32_t version, size_t alignment) : version_(version), alignment_(alignment) {
  PARALLM_CHECK(version == 2 || version == 3);
  PARALLM_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0);
  if (alignment != 32) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::set_raw(const std::string& key, std::string encoded) {
  for (auto& e : entries_) {
    if (e.key == key) {
      e.value = std::move(encoded);
      return;
    }
  }
  entries_.push_back({key, std::move(encoded)});
}

bool GgufWriter::has(const std::string& key) const {
  for (const auto& e : entries_) {
    if (e.key == key) return true;
  }
  return false;
}

void GgufWriter::set_u8(const std::string& k, uint8_t v) {
  auto s = typed(GgufType::kU8);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_i8(const std::string& k, int8_t v) {
  auto s = typed(GgufType::kI8);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_u16(const std::string& k, uint16_t v) {
  auto s = typed(GgufType::kU16);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_i16(const std::string& k, int16_t v) {
  auto s = typed(GgufType::kI16);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_u32(const std::string& k, uint32_t v) {
  auto s = typed(GgufType::kU32);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_i32(const std::string& k, int32_t v) {
  auto s = typed(GgufType::kI32);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_u64(const std::string& k, uint64_t v) {
  auto s = typed(GgufType::kU64);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_i64(const std::string& k, int64_t v) {
  auto s = typed(GgufType::kI64);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_f32(const std::string& k, float v) {
  auto s = typed(GgufType::kF32);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_f64(const std::string& k, double v) {
  auto s = typed(GgufType::kF64);
  put(&s, v);
  set_raw(k, s);
}
void GgufWriter::set_bool(const std::string& k, bool v) {
  auto s = typed(GgufType::kBool);
  put<uint8_t>(&s, v ? 1 : 0);
  set_raw(k, s);
}
void GgufWriter::set_string(const std::string& k, const std::string& v) {
  auto s = typed(GgufType::kString);
  put_string(&s, v);
  set_raw(k, s);
}

void GgufWriter::set_string_array(const std::string& k, const std::vector<std::string>& v) {
  auto s = typed(GgufType::kArray);
  put<uint32_t>(&s, static_cast<uint32_t>(GgufType::kString));
  put<uint64_t>(&s, v.size());
  for (const auto& x : v) put_string(&s, x);
  set_raw(k, s);
}

void GgufWriter::set_f32_array(const std::string& k, const std::vector<float>& v) {
  auto s = typed(GgufType::kArray);
  put<uint32_t>(&s, static_cast<uint32_t>(GgufType::kF32));
  put<uint64_t>(&s, v.size());
  for (float x : v) put(&s, x);
  set_raw(k, s);
}

void GgufWriter::set_f64_array(const std::string& k, const std::vector<double>& v) {
  auto s = typed(GgufType::kArray);
  put<uint32_t>(&s, static_cast<uint32_t>(GgufType::kF64));
  put<uint64_t>(&s, v.size());
  for (double x : v) put(&s, x);
  set_raw(k, s);
}

void GgufWriter::set_int_array(const std::string& k, GgufType elem, const std::vector<int64_t>& v) {
  auto s = typed(GgufType::kArray);
  put<uint32_t>(&s, static_cast<uint32_t>(elem));
  put<uint64_t>(&s, v.size());
  for (int64_t x : v) put_int_as(&s, elem, x, k);
  set_raw(k, s);
}

void GgufWriter::copy_key(const GgufFile& src, const std::string& key) {
  const GgufValue* v = src.find(key);
  if (v == nullptr) throw InputError("GGUF file '" + src.path() + "' lacks the metadata key '" + key + "'");
  switch (v->type) {
    case GgufType::kString:
      set_string(key, v->str);
      return;
    case GgufType::kF32:
      set_f32(key, static_cast<float>(v->f));
      return;
    case GgufType::kF64:
      set_f64(key, v->f);
      return;
    case GgufType::kU64:
      set_u64(key, v->u);
      return;
    case GgufType::kArray:
      switch (v->array_type) {
        case GgufType::kString:
          set_string_array(key, src.get_string_array(key));
          return;
        case GgufType::kF32:
          set_f32_array(key, src.get_float_array(key));
          return;
        case GgufType::kF64: {
          std::vector<float> f = src.get_float_array(key);
          set_f64_array(key, std::vector<double>(f.begin(), f.end()));
          return;
        }
        case GgufType::kArray:
          throw InputError("GGUF key '" + key + "' is a nested array, which parallm cannot copy");
        case GgufType::kBool:
          throw InputError("GGUF key '" + key + "' is an array of bools, which parallm cannot copy");
        default:
          set_int_array(key, v->array_type, src.get_int_array(key));
          return;
      }
    default: {
      auto s = typed(v->type);
      put_int_as(&s, v->type, v->i, key);
      set_raw(key, s);
    }
  }
}

void GgufWriter::add_tensor_raw(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& shape,
                                size_t nbytes, Fill fill) {
  PARALLM_CHECK_MSG(!shape.empty() && shape.size() <= 8, "tensor '" + name + "' needs 1..8 dimensions");
  for (const auto& t : tensors_) PARALLM_CHECK_MSG(t.name != name, "duplicate tensor '" + name + "'");
  tensors_.push_back({name, ggml_type, shape, nbytes, next_offset_, std::move(fill)});
  next_offset_ += (nbytes + alignment_ - 1) / alignment_ * alignment_;
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape, Fill fill) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  PARALLM_CHECK_MSG(!shape.empty() && shape.back() % dtype_block_elems(dtype) == 0,
                    "tensor '" + name + "' rows are not a multiple of the " + dtype_name(dtype) + " block");
  add_tensor_raw(name, dtype_to_ggml(dtype), shape, dtype_row_bytes(dtype, n), std::move(fill));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            std::vector<uint8_t> bytes) {
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  PARALLM_CHECK_MSG(shared->size() == dtype_row_bytes(dtype, n), "tensor '" + name + "' byte size mismatch");
  add_tensor(name, dtype, shape, [shared](uint8_t* dst) { std::memcpy(dst, shared->data(), shared->size()); });
}

size_t GgufWriter::data_bytes() const { return static_cast<size_t>(next_offset_); }

void GgufWriter::emit(const Sink& out, bool with_data) const {
  std::string head;
  put<uint32_t>(&head, kGgufMagic);
  put<uint32_t>(&head, version_);
  put<uint64_t>(&head, tensors_.size());
  put<uint64_t>(&head, entries_.size());
  for (const auto& e : entries_) {
    put_string(&head, e.key);
    head.append(e.value);
  }
  for (const auto& t : tensors_) {
    put_string(&head, t.name);
    put<uint32_t>(&head, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<uint64_t>(&head, static_cast<uint64_t>(*it));
    put<uint32_t>(&head, t.ggml_type);
    put<uint64_t>(&head, t.offset);
  }
  head.append((alignment_ - head.size() % alignment_) % alignment_, '\0');
  out(head.data(), head.size());
  if (!with_data) return;

  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    const size_t padded = (t.nbytes + alignment_ - 1) / alignment_ * alignment_;
    buf.assign(padded, 0);
    if (t.fill) t.fill(buf.data());
    out(buf.data(), padded);
  }
}

void GgufWriter::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw InputError("cannot create '" + tmp + "': " + std::strerror(errno));
  bool ok = true;
  try {
    emit([&](const void* p, size_t n) {
      if (ok && std::fwrite(p, 1, n, f) != n) ok = false;
    });
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) ok = false;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError("cannot write '" + path + "': " + why);
  }
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  std::vector<uint8_t> bytes;
  emit(
      [&](const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), b, b + n);
      },
      false);
  return bytes;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> bytes;
  emit([&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  });
  return bytes;
}

}  // namespace parallm
