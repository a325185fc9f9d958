#include "util/zeroed_memory.h"

#include <sys/mman.h>

#include <string>
#include <utility>

#include "util/check.h"

namespace parallm {

ZeroedMemory::ZeroedMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    size_ = 0;
    throw CapacityError("cannot reserve " + std::to_string(bytes >> 20) +
                        " MiB of memory (lower --memory-utilization or --max-model-len)");
  }
  // Advice only: without transparent huge pages the buffer still works.
  madvise(p, bytes, MADV_HUGEPAGE);
  data_ = p;
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
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace parallm
