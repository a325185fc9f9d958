// ZeroedMemory: a large zero-filled buffer taken straight from the kernel
// (anonymous mmap), for pools of gigabytes such as the KV cache.
//
// NOTE: a std::vector of 4.5 GiB was zeroed twice at startup, by the kernel
// on each page fault and again by the vector's memset: 23 s before the server
// was ready for a 110M model on this VM. Here pages arrive zeroed on first
// touch, and transparent huge pages are requested so a fault maps 2 MiB (and
// scattered KV blocks cost fewer TLB misses).
#pragma once
#include <cstddef>

namespace parallm {

class ZeroedMemory {
 public:
  ZeroedMemory() = default;
  // Throws CapacityError when the address space cannot be reserved.
  explicit ZeroedMemory(size_t bytes);
  ~ZeroedMemory();
  ZeroedMemory(ZeroedMemory&& other) noexcept;
  ZeroedMemory& operator=(ZeroedMemory&& other) noexcept;
  ZeroedMemory(const ZeroedMemory&) = delete;
  ZeroedMemory& operator=(const ZeroedMemory&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace parallm
