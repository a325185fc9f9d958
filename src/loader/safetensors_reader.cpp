// Parsing and validation of one safetensors file (format notes in the header).
#include "loader/safetensors_reader.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/check.h"
#include "util/json_parse.h"

namespace parallm {

namespace {

constexpr size_t kMaxDims = 8;
constexpr uint64_t kMaxElems = 1ull << 48;

struct DtypeInfo {
  const char* name;
  size_t bytes;
};
// Every dtype the format defines, so that a valid file with an unsupported
// dtype gets "dtype I64 is not supported" rather than "unknown dtype".
constexpr DtypeInfo kDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},     {"I8", 1},
    {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

}  // namespace

size_t safetensors_dtype_bytes(const std::string& dtype) {
  for (const auto& d : kDtypes) {
    if (dtype == d.name) return d.bytes;
  }
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)), name_(path) {
  data_ = file_->data();
  size_ = file_->size();
  parse();
}

SafetensorsFile::SafetensorsFile(const uint8_t* data, size_t size, std::string name)
    : data_(data), size_(size), name_(std::move(name)) {
  parse();
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse() {
  const std::string where = "safetensors file '" + name_ + "'";
  if (size_ < 8) throw InputError(where + " is truncated (shorter than its 8-byte header length)");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | data_[i];
  if (header_bytes > kMaxHeaderBytes) {
    throw InputError(where + " has an absurd header length " + std::to_string(header_bytes) +
                     " (not a safetensors file, or corrupt)");
  }
  if (header_bytes > size_ - 8) {
    throw InputError(where + " is truncated: its header needs " + std::to_string(header_bytes) + " bytes but only " +
                     std::to_string(size_ - 8) + " follow");
  }
  const char* header = reinterpret_cast<const char*>(data_ + 8);
  JsonError error;
  const std::optional<nlohmann::json> parsed =
      try_parse_json<nlohmann::json>(std::string_view(header, header_bytes), JsonLimits{kFileJsonDepth}, &error);
  if (!parsed || !parsed->is_object()) {
    throw InputError(where + " has a header that is not a JSON object" +
                     (parsed ? std::string() : " (" + error.message + ")"));
  }
  const nlohmann::json& j = *parsed;
  const uint8_t* body = data_ + 8 + header_bytes;
  const uint64_t body_bytes = size_ - 8 - header_bytes;

  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) throw InputError(where + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) throw InputError(where + ": __metadata__ value '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tensor_where = where + ": tensor '" + key + "'";
    if (!v.is_object()) throw InputError(tensor_where + " is not described by an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string() || sh == v.end() || !sh->is_array() || off == v.end() || !off->is_array()) {
      throw InputError(tensor_where + " lacks dtype, shape or data_offsets");
    }
    const std::string dtype = dt->get<std::string>();
    const size_t elem_bytes = safetensors_dtype_bytes(dtype);
    if (elem_bytes == 0) throw InputError(tensor_where + " has unknown dtype '" + dtype + "'");
    SafetensorsTensor t;
    t.name = key;
    t.st_dtype = dtype;
    t.is_float = dtype == "F32" || dtype == "F16" || dtype == "BF16";
    if (dtype == "F16") {
      t.dtype = DType::kF16;
    } else if (dtype == "BF16") {
      t.dtype = DType::kBF16;
    }
    if (sh->size() > kMaxDims) throw InputError(tensor_where + " has too many dimensions");
    uint64_t n_elems = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned())
        throw InputError(tensor_where + " has a shape entry that is not a non-negative integer");
      uint64_t n = d.get<uint64_t>();
      if (n > kMaxElems || (n != 0 && n_elems > kMaxElems / n)) throw InputError(tensor_where + " has an absurd shape");
      n_elems *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    if (off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      throw InputError(tensor_where + ": data_offsets must be two non-negative integers");
    }
    const uint64_t begin = (*off)[0].get<uint64_t>();
    const uint64_t end = (*off)[1].get<uint64_t>();
    if (begin > end || end > body_bytes) {
      throw InputError(tensor_where + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                       "] outside the " + std::to_string(body_bytes) + "-byte data section (truncated file?)");
    }
    if (end - begin != n_elems * elem_bytes) {
      throw InputError(tensor_where + " holds " + std::to_string(end - begin) + " bytes but its shape and dtype " +
                       dtype + " need " + std::to_string(n_elems * elem_bytes));
    }
    t.data = body + begin;
    t.nbytes = static_cast<size_t>(end - begin);
    spans.push_back({begin, end, tensors_.size()});
    index_[key] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t covered_end = 0;  // end of the non-empty spans seen so far
  size_t covered_by = 0;
  for (const Span& cur : spans) {
    if (cur.end == cur.begin) continue;  // empty tensors occupy no bytes
    if (cur.begin < covered_end) {
      throw InputError(where + ": tensors '" + tensors_[covered_by].name + "' and '" + tensors_[cur.index].name +
                       "' overlap");
    }
    covered_end = cur.end;
    covered_by = cur.index;
  }
}

}  // namespace parallm
