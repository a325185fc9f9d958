#include "util/zeroed_memory.h"

#include <new>
#include <string>
#include <utility>

#include "util/check.h"
#include "util/huge_pages.h"

namespace parallm {

ZeroedMemory::ZeroedMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  // A fresh anonymous mapping (zero pages), 2 MiB-aligned with huge pages
  // requested (util/huge_pages.h).
  try {
    data_ = huge_page_alloc(bytes);
  } catch (const std::bad_alloc&) {
    size_ = 0;
    throw CapacityError("cannot reserve " + std::to_string(bytes >> 20) +
                        " MiB of memory (lower --memory-utilization or --max-model-len)");
  }
}

void ZeroedMemory::prefault() {
  volatile char* p = static_cast<char*>(data_);
  for (size_t i = 0; i < size_; i += 4096) p[i] = 0;
}

ZeroedMemory::~ZeroedMemory() { release(); }

ZeroedMemory::ZeroedMemory(ZeroedMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ZeroedMemory& ZeroedMemory::operator=(ZeroedMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void ZeroedMemory::release() {
  if (data_ != nullptr) huge_page_free(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace parallm
