// A read-only memory-mapped file (RAII). Model weights are read in place from
// the mapping: loading a model never reads the whole file into a buffer. The
// model layer may move single matrices into memory of its own (packed layout,
// huge pages: model/linear.h), handing each one's file pages back as it goes,
// so two copies of the weights are never resident.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace parallm {

class MappedFile {
 public:
  // Throws InputError when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) file into a string; throws InputError on failure.
std::string read_text_file(const std::string& path);

}  // namespace parallm
