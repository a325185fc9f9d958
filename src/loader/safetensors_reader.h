// SafetensorsFile: one `.safetensors` file, memory-mapped, tensors used in place.
//
// Layout (huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of JSON {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]},
// ..., "__metadata__": {"key": "value"}}, then the data section; offsets are
// relative to the start of the data section.
//
// Everything in the header is checked against the file before any tensor is
// exposed: header length, JSON shape, offsets inside the data section, no two
// tensors overlapping, and end - begin == product(shape) * element size. Any
// violation is an InputError naming the file and the tensor (fuzzed by
// tests/fuzz/fuzz_safetensors.cpp). Every dtype of the format is read;
// `dtype` says which of parallm's float types a tensor is, and tensors of
// other dtypes (quantized checkpoints' I32 / F8_E4M3 parts) are left to the
// loader, which refuses them by name unless a quantization scheme uses them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "util/mapped_file.h"

namespace parallm {

struct SafetensorsTensor {
  std::string name;
  std::string st_dtype;   // the file's dtype string ("BF16", "I32", "F8_E4M3", ...)
  bool is_float = false;  // F32, F16 or BF16: then `dtype` is set
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first (as in the file)
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

class SafetensorsFile {
 public:
  // Maps and parses `path`; throws InputError on any malformation.
  explicit SafetensorsFile(const std::string& path);
  // Parses a buffer the caller keeps alive (fuzzer, tests).
  SafetensorsFile(const uint8_t* data, size_t size, std::string name = "<memory>");

  const std::string& path() const { return name_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Hands the mapping to a longer-lived owner (ModelFile::keep_mapping); the
  // tensors' data pointers stay valid as long as that owner keeps it.
  std::unique_ptr<MappedFile> take_mapping() { return std::move(file_); }

  // The header is at most this long (the same bound the reference reader uses).
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

 private:
  void parse();

  std::unique_ptr<MappedFile> file_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Element size of a safetensors dtype string ("F32" -> 4), 0 when unknown.
size_t safetensors_dtype_bytes(const std::string& dtype);

}  // namespace parallm
