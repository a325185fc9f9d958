#include "util/huge_pages.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>

namespace parallm {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

std::atomic<size_t> g_mapped{0}, g_peak{0};

void count_mapped(size_t size) {
  const size_t now = g_mapped.fetch_add(size) + size;
  size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

void* huge_page_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kHugePage) throw std::bad_alloc();  // the rounding would wrap
  const size_t size = round_up(bytes);
  // Over-map by one huge page, then trim both ends to the aligned range (THP
  // maps only 2 MiB-aligned ranges wholly inside a mapping).
  void* p = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  if (aligned > base) munmap(p, aligned - base);
  const uintptr_t end = base + size + kHugePage;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  // Advice only: without transparent huge pages the buffer still works.
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  count_mapped(size);
  return reinterpret_cast<void*>(aligned);
}

void huge_page_free(void* p, size_t bytes) {
  if (p == nullptr) return;
  munmap(p, round_up(bytes));
  g_mapped.fetch_sub(round_up(bytes));
}

size_t huge_page_bytes_mapped() { return g_mapped.load(); }
size_t huge_page_bytes_peak() { return g_peak.load(); }
void huge_page_reset_peak() { g_peak.store(g_mapped.load()); }

}  // namespace parallm
