// Device memory and pinned host memory, charged to a device's MemoryLedger
// (core/device.h) before they are allocated, released when freed, so that a
// CUDA rank's weights, KV cache and activations are counted like a CPU rank's.
// RAII, move-only; no CUDA headers.
//
// Two limits apply: the ledger's budget (--device-memory, or what was free at
// start) throws the ledger's CapacityError and allocates nothing; the GPU's
// own free memory (another process took some since) throws CapacityError
// with the needed and free bytes and advice, and leaves nothing charged.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/device.h"
#include "device/stream_handle.h"

namespace parallm::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` on `device` (a cuda:N device), charged to its ledger under
  // `category`; `what` names it in errors ("blk.3.attn_q shard"). The device
  // becomes the calling thread's current one.
  DeviceBuffer(Device& device, MemoryCategory category, uint64_t bytes, std::string_view what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  uint64_t bytes() const { return bytes_; }
  void reset();  // frees now

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
  int device_index_ = 0;
  MemoryReservation reservation_;
};

// Page-locked host memory: the staging side of asynchronous copies (a copy
// from pageable memory is synchronous). Charged to the ledger of the device it
// stages for.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(Device& device, MemoryCategory category, uint64_t bytes, std::string_view what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  uint64_t bytes() const { return bytes_; }
  void reset();

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
  MemoryReservation reservation_;
};

// Copies on `stream`, in its order. Asynchronous for the host only when the
// host side is pinned; either way the stream's later work sees the bytes.
void copy_to_device(void* dst, const void* src, uint64_t bytes, StreamHandle stream);
void copy_to_host(void* dst, const void* src, uint64_t bytes, StreamHandle stream);
void copy_on_device(void* dst, const void* src, uint64_t bytes, StreamHandle stream);
// Sets `bytes` bytes at dst to `value` (0xff fills f32 with NaNs: tests poison
// outputs with it).
void fill_bytes(void* dst, uint8_t value, uint64_t bytes, StreamHandle stream);

}  // namespace parallm::cuda
