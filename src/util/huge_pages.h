// Large scratch buffers of the hot loops (activations, the GEMM's panels and
// transposed inputs) on transparent huge pages.
//
// NOTE: the f32 GEMM touches, per 128-wide k block of a 48-row panel, the
// panel's rows (~36 different 4 KiB pages), three blocks of x^T and its
// output tile: more pages than the core's 64-entry L1 DTLB holds. Alone on a
// few pages its micro-kernel ran at 0.95 of the FMA peak, inside the GEMM at
// 0.6. With these buffers on 2 MiB pages, llama-110m's f16 GEMM in one process,
// alternating with 4 KiB pages: faster in 34-35 of 40 pairs, median +11%.
// The host's THP mode is usually `madvise`, so the pages are asked for here;
// where THP is off this is plain, 2 MiB-aligned memory and works the same.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace parallm {

// Buffers from this size on get their own 2 MiB-aligned mapping, rounded up
// to whole 2 MiB pages; smaller ones come from operator new.
constexpr size_t kHugePageMinBytes = size_t{64} << 10;

// Throws std::bad_alloc when the address space cannot be had.
void* huge_page_alloc(size_t bytes);
void huge_page_free(void* p, size_t bytes);

// Bytes this process holds mapped through huge_page_alloc now, and the most
// it held since the last reset (a growing vector holds its old and new
// buffers at once): how `serve` profiles a step's activations.
size_t huge_page_bytes_mapped();
size_t huge_page_bytes_peak();
void huge_page_reset_peak();  // peak = what is mapped now

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageMinBytes) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(huge_page_alloc(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageMinBytes) {
      ::operator delete(p);
    } else {
      huge_page_free(p, bytes);
    }
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

// v's data, grown to at least n elements (grow-only scratch: shapes
// alternate within a layer, and a shrink followed by a grow would
// zero-fill again).
template <class T>
T* grown(HugeVector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace parallm
