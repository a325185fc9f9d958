// GGUF (v2/v3) reader over a memory-mapped file: metadata key/values, tensor
// infos and tensor data used in place (no copy). Spec: ggml's docs/gguf.md.
//
// Every length, count and offset in the file is validated against the file
// size before use, so a truncated or corrupt file gives an InputError, never
// an out-of-bounds read (fuzzed by tests/fuzz/fuzz_gguf.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/mapped_file.h"

namespace parallm {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

struct GgufValue {
  GgufType type = GgufType::kU8;
  // Scalars (integers and bools in `i`, or `u` for values above INT64_MAX; floats in `f`).
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0.0;
  std::string str;
  // Arrays: element type, length and where the elements start in the file.
  GgufType array_type = GgufType::kU8;
  uint64_t array_len = 0;
  size_t array_offset = 0;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;      // relative to the start of the data section
  size_t nbytes = 0;
};

class GgufFile {
 public:
  // Maps and parses `path`; throws InputError on any malformation.
  explicit GgufFile(const std::string& path);
  // Parses a buffer the caller keeps alive (used by the fuzzer and tests).
  GgufFile(const uint8_t* data, size_t size, std::string name = "<memory>");

  uint32_t version() const { return version_; }
  const std::string& path() const { return name_; }
  size_t alignment() const { return alignment_; }

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }

  // Typed getters: throw InputError naming the key when it is missing or of
  // an incompatible type. Integer getters accept any integer type.
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;  // also accepts integers
  bool get_bool(const std::string& key) const;
  std::optional<int64_t> get_int_opt(const std::string& key) const;
  std::optional<double> get_float_opt(const std::string& key) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;
  std::optional<bool> get_bool_opt(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<float> get_float_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  uint64_t array_length(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& t) const { return data_ + data_start_ + t.offset; }

 private:
  void parse();
  const GgufValue& require(const std::string& key) const;

  std::unique_ptr<MappedFile> file_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_start_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace parallm
