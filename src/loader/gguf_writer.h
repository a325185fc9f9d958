// GgufWriter: builds a GGUF file (v3 by default, v2 on request; the two share
// one layout with 64-bit counts): header, metadata key/values of every GGUF
// type including arrays, tensor infos, then the tensor data, each tensor
// starting at a multiple of the alignment (32 unless set otherwise) and the
// data section padded likewise. Spec: ggml's docs/gguf.md; read back by
// loader/gguf_reader.h.
//
// Used by `parallm make-model`, by tests that generate model files and by the
// fuzz seed generator. Output is a pure function of the calls made, so the
// same calls give byte-identical files. Tensor data is produced on demand by a
// fill callback while writing, so a large model never sits in memory whole.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "loader/gguf_reader.h"

namespace parallm {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3, size_t alignment = 32);

  // Metadata. Keys keep the order of their first set; setting a key again
  // replaces its value in place.
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_f64_array(const std::string& key, const std::vector<double>& v);
  // Integer (or bool) arrays stored with element type `elem`; values must fit it.
  void set_int_array(const std::string& key, GgufType elem, const std::vector<int64_t>& v);
  // Copies `key` from a parsed file, keeping its type (InputError for nested arrays).
  void copy_key(const GgufFile& src, const std::string& key);
  bool has(const std::string& key) const;

  // Fills the tensor's bytes; `dst` has room for exactly the tensor's nbytes.
  using Fill = std::function<void(uint8_t* dst)>;
  // `shape` is row-major, outermost first (model_file.h's order); it is written
  // as GGUF's ne[] (innermost first). nbytes follows from the dtype.
  void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape, Fill fill);
  void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape, std::vector<uint8_t> bytes);
  // Any ggml type id with an explicit byte size (tests of unsupported types).
  void add_tensor_raw(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& shape, size_t nbytes,
                      Fill fill);

  size_t tensor_count() const { return tensors_.size(); }
  size_t data_bytes() const;  // size of the padded data section

  // Writes to `path` through a temporary file renamed into place, so a failed
  // write never leaves a half file under the final name. Throws InputError.
  void write_file(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;
  // The header alone (metadata and tensor table, padded to where the data
  // would start; no fill runs): with data_bytes() more bytes after it, a
  // parseable file (bench-model --synthetic backs those with untouched pages).
  std::vector<uint8_t> header_bytes() const;

 private:
  struct Entry {
    std::string key;
    std::string value;  // encoded: u32 type, then the payload
  };
  struct Tensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<int64_t> shape;
    size_t nbytes;
    uint64_t offset;
    Fill fill;
  };
  using Sink = std::function<void(const void* p, size_t n)>;
  void set_raw(const std::string& key, std::string encoded);
  void emit(const Sink& out, bool with_data = true) const;

  uint32_t version_;
  size_t alignment_;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  uint64_t next_offset_ = 0;
};

}  // namespace parallm
