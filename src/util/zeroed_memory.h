// ZeroedMemory: a large zero-filled buffer taken straight from the kernel
// (anonymous mmap), for pools of gigabytes such as the KV cache.
//
// NOTE: a std::vector of 4.5 GiB was zeroed twice at startup, by the kernel
// on each 4 KiB page fault and again by the vector's memset: 23 s before the
// server was ready for a 110M model on this VM. Here the kernel's zero pages
// are all there is, and transparent huge pages are requested so one fault maps
// 2 MiB (1.8 s for 4.5 GiB; scattered KV blocks also cost fewer TLB misses).
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

  // Touches every page now, so that the memory is really there (an
  // overcommitted host fails here, at startup, not mid-request) and no page
  // fault lands in a later hot loop (left lazy, zeroing fresh KV pages was 6%
  // of a serving benchmark).
  void prefault();

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace parallm
