#include "loader/gguf_reader.h"

#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "util/check.h"

namespace parallm {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
// Bounds that no real file approaches; they keep a corrupt count from making
// us allocate or loop for ever before the size check catches it.
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint64_t kMaxDims = 8;

// A bounds-checked little-endian cursor over the mapped bytes.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; }

  void need(uint64_t n, const char* what) const {
    if (n > size_ || pos_ > size_ - n) {
      throw InputError("GGUF file '" + name_ + "' is truncated or corrupt (reading " + what + " at byte " +
                       std::to_string(pos_) + " of " + std::to_string(size_) + ")");
    }
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringBytes) need(len, what);  // reports as truncation/corruption
    need(len, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}

bool is_integer(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kI8 || t == GgufType::kU16 || t == GgufType::kI16 ||
         t == GgufType::kU32 || t == GgufType::kI32 || t == GgufType::kU64 || t == GgufType::kI64;
}

void read_scalar(Cursor& c, GgufType t, GgufValue* v) {
  switch (t) {
    case GgufType::kU8:
      v->i = c.read<uint8_t>("u8");
      break;
    case GgufType::kI8:
      v->i = c.read<int8_t>("i8");
      break;
    case GgufType::kU16:
      v->i = c.read<uint16_t>("u16");
      break;
    case GgufType::kI16:
      v->i = c.read<int16_t>("i16");
      break;
    case GgufType::kU32:
      v->i = c.read<uint32_t>("u32");
      break;
    case GgufType::kI32:
      v->i = c.read<int32_t>("i32");
      break;
    case GgufType::kU64:
      v->u = c.read<uint64_t>("u64");
      v->i = static_cast<int64_t>(v->u);
      break;
    case GgufType::kI64:
      v->i = c.read<int64_t>("i64");
      break;
    case GgufType::kF32:
      v->f = c.read<float>("f32");
      break;
    case GgufType::kF64:
      v->f = c.read<double>("f64");
      break;
    case GgufType::kBool:
      v->i = c.read<uint8_t>("bool") != 0;
      break;
    default:
      break;
  }
  if (t != GgufType::kU64) v->u = static_cast<uint64_t>(v->i);
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)), name_(path) {
  data_ = file_->data();
  size_ = file_->size();
  parse();
}

GgufFile::GgufFile(const uint8_t* data, size_t size, std::string name)
    : data_(data), size_(size), name_(std::move(name)) {
  parse();
}

void GgufFile::parse() {
  Cursor c(data_, size_, name_);
  if (size_ < 4 || c.read<uint32_t>("magic") != kGgufMagic) {
    throw InputError("'" + name_ + "' is not a GGUF file (wrong magic)");
  }
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    throw InputError("GGUF file '" + name_ + "' has version " + std::to_string(version_) +
                     "; supported versions are 2 and 3");
  }
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each key/value takes at least 12 bytes and each tensor info at least 28.
  if (n_kv > size_ / 12 || n_tensors > size_ / 28) c.need(size_ + 1, "counts");

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("metadata key");
    GgufValue v;
    v.type = static_cast<GgufType>(c.read<uint32_t>("value type"));
    if (v.type == GgufType::kString) {
      v.str = c.read_string("string value");
    } else if (v.type == GgufType::kArray) {
      v.array_type = static_cast<GgufType>(c.read<uint32_t>("array type"));
      v.array_len = c.read<uint64_t>("array length");
      v.array_offset = c.pos();
      if (v.array_type == GgufType::kString) {
        for (uint64_t j = 0; j < v.array_len; ++j) {
          uint64_t len = c.read<uint64_t>("array string length");
          c.skip(len, "array string");
        }
      } else {
        size_t es = scalar_size(v.array_type);
        if (es == 0) {
          throw InputError("GGUF file '" + name_ + "': key '" + key + "' has an unsupported array element type " +
                           std::to_string(static_cast<uint32_t>(v.array_type)));
        }
        if (v.array_len > size_ / es) c.need(size_ + 1, "array");
        c.skip(v.array_len * es, "array");
      }
    } else if (scalar_size(v.type) != 0) {
      read_scalar(c, v.type, &v);
    } else {
      throw InputError("GGUF file '" + name_ + "': key '" + key + "' has unknown value type " +
                       std::to_string(static_cast<uint32_t>(v.type)));
    }
    kv_[key] = std::move(v);
  }

  if (auto a = get_int_opt("general.alignment")) {
    if (*a <= 0 || *a > (1 << 20) || (*a & (*a - 1)) != 0) {
      throw InputError("GGUF file '" + name_ + "': general.alignment " + std::to_string(*a) + " is not a power of two");
    }
    alignment_ = static_cast<size_t>(*a);
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.read_string("tensor name");
    uint32_t n_dims = c.read<uint32_t>("tensor dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
      throw InputError("GGUF file '" + name_ + "': tensor '" + t.name + "' has " + std::to_string(n_dims) +
                       " dimensions");
    }
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = c.read<uint64_t>("tensor shape");
      if (ne == 0 || ne > (1ull << 40) || n_elems > (1ull << 48) / ne) {
        throw InputError("GGUF file '" + name_ + "': tensor '" + t.name + "' has an invalid shape");
      }
      n_elems *= ne;
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    t.ggml_type = c.read<uint32_t>("tensor type");
    t.offset = c.read<uint64_t>("tensor offset");
    // Every type with a known block layout gets its size checked, also the
    // ones parallm cannot run (the model loader names those); ids without
    // one keep nbytes 0.
    int64_t be;
    size_t bb;
    if (ggml_type_block(t.ggml_type, &be, &bb)) {
      if (t.ne[0] % be != 0) {
        throw InputError("GGUF file '" + name_ + "': tensor '" + t.name + "' has type " +
                         ggml_type_gguf_name(t.ggml_type) + " but rows of " + std::to_string(t.ne[0]) +
                         " elements, not a multiple of its block of " + std::to_string(be));
      }
      t.nbytes = static_cast<size_t>(n_elems / static_cast<uint64_t>(be)) * bb;
    }
    if (tensor_index_.count(t.name)) {
      throw InputError("GGUF file '" + name_ + "': duplicate tensor '" + t.name + "'");
    }
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  data_start_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (const auto& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      throw InputError("GGUF file '" + name_ + "': tensor '" + t.name + "' is not aligned");
    }
    if (data_start_ > size_ || t.offset > size_ - data_start_ || t.nbytes > size_ - data_start_ - t.offset) {
      throw InputError("GGUF file '" + name_ + "' is truncated: tensor '" + t.name + "' extends past the end");
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::require(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw InputError("GGUF file '" + name_ + "' lacks the metadata key '" + key + "'");
  return *v;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kString) throw InputError("GGUF key '" + key + "' is not a string");
  return v.str;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = require(key);
  if (!is_integer(v.type) && v.type != GgufType::kBool) throw InputError("GGUF key '" + key + "' is not an integer");
  return v.i;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.type == GgufType::kF32 || v.type == GgufType::kF64) return v.f;
  if (is_integer(v.type)) return static_cast<double>(v.i);
  throw InputError("GGUF key '" + key + "' is not a number");
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kBool && !is_integer(v.type)) throw InputError("GGUF key '" + key + "' is not a bool");
  return v.i != 0;
}

std::optional<int64_t> GgufFile::get_int_opt(const std::string& key) const {
  return has(key) ? std::optional<int64_t>(get_int(key)) : std::nullopt;
}
std::optional<double> GgufFile::get_float_opt(const std::string& key) const {
  return has(key) ? std::optional<double>(get_float(key)) : std::nullopt;
}
std::optional<std::string> GgufFile::get_string_opt(const std::string& key) const {
  return has(key) ? std::optional<std::string>(get_string(key)) : std::nullopt;
}
std::optional<bool> GgufFile::get_bool_opt(const std::string& key) const {
  return has(key) ? std::optional<bool>(get_bool(key)) : std::nullopt;
}

uint64_t GgufFile::array_length(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kArray) throw InputError("GGUF key '" + key + "' is not an array");
  return v.array_len;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kArray || v.array_type != GgufType::kString) {
    throw InputError("GGUF key '" + key + "' is not an array of strings");
  }
  Cursor c(data_, size_, name_);
  c.seek(v.array_offset);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(v.array_len));
  for (uint64_t j = 0; j < v.array_len; ++j) out.push_back(c.read_string("array string"));
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kArray || (v.array_type != GgufType::kF32 && v.array_type != GgufType::kF64)) {
    throw InputError("GGUF key '" + key + "' is not an array of floats");
  }
  Cursor c(data_, size_, name_);
  c.seek(v.array_offset);
  std::vector<float> out(static_cast<size_t>(v.array_len));
  for (auto& x : out)
    x = v.array_type == GgufType::kF32 ? c.read<float>("f32") : static_cast<float>(c.read<double>("f64"));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.type != GgufType::kArray || !is_integer(v.array_type)) {
    throw InputError("GGUF key '" + key + "' is not an array of integers");
  }
  Cursor c(data_, size_, name_);
  c.seek(v.array_offset);
  std::vector<int64_t> out(static_cast<size_t>(v.array_len));
  for (auto& x : out) {
    GgufValue tmp;
    read_scalar(c, v.array_type, &tmp);
    x = tmp.i;
  }
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace parallm
