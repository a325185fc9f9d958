// DeviceBackend: what the device rank model (device_llama_model.h) needs of
// a device besides its kernels: memory charged to the device's ledger,
// copies to and from the host, a stream, and the tp / ep all-reduce on
// device memory. Two implementations:
//   emulated  (`--devices emu:N`, every build): host memory, the emulated
//             launchers (kernels/cuda/emulated), synchronous. It runs the very
//             code a GPU rank runs, so CI checks the CUDA model against the
//             CPU model without a GPU.
//   cuda      (`--devices cuda:N`, CUDA builds): cudaMalloc'd memory, one
//             non-blocking stream per rank, the CUDA launchers.
// The all-reduce stages through host memory and the rank's communicator
// (local threads or MPI), so several ranks may share one GPU; the emulated
// device hands its (host) pointers to the communicator directly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/stream_collectives.h"
#include "core/device.h"
#include "kernels/cuda/kernel_set.h"

namespace parallm {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  std::string name() const { return device_->name(); }  // "emu:0", "cuda:1"
  const cuda::KernelSet& kernels() const { return *kernels_; }
  cuda::StreamHandle stream() const { return stream_; }
  MemoryLedger& ledger() { return device_->memory(); }
  Device& device() { return *device_; }
  virtual bool host_memory() const = 0;  // device pointers are host pointers (the emulated device)
  // Makes this device the calling thread's current one: a rank is built on
  // one thread and steps on another, and CUDA's current device is per thread.
  virtual void make_current() {}

  // `bytes` of device memory, charged to the ledger under `category` first
  // (CapacityError when over the budget); release() returns both.
  virtual void* allocate(size_t bytes, MemoryCategory category, const std::string& what) = 0;
  virtual void release(void* p, size_t bytes, MemoryCategory category) = 0;
  // Host memory the device copies to and from directly (page-locked on a
  // GPU, charged to the device's ledger as communication buffers: it is the
  // device's staging, not model state).
  virtual void* allocate_host(size_t bytes, const std::string& what) = 0;
  virtual void release_host(void* p, size_t bytes) = 0;
  // Stream-ordered copies. upload() returns once `src` may be reused;
  // download() returns once `dst` holds the data.
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* dst, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // device to device
  virtual void synchronize() = 0;

  // Sums `count` floats at device pointer `data` over `comm`'s ranks: queued
  // on the rank's stream when `comm` can (NCCL: comm/stream_collectives.h),
  // else staged through host memory. download() and synchronize() first
  // wait, within the communicator's timeout, for what was queued.
  void all_reduce_sum(Communicator& comm, float* data, size_t count);

 protected:
  DeviceBackend(DeviceId id, uint64_t budget_bytes, const cuda::KernelSet& kernels)
      : device_(std::make_unique<Device>(id, budget_bytes, 1)), kernels_(&kernels) {}

  std::unique_ptr<Device> device_;
  const cuda::KernelSet* kernels_;
  cuda::StreamHandle stream_ = nullptr;
  // A dead peer is an error, not a hang: queued collectives are waited for
  // with the communicator's deadline before the stream is synchronized.
  void wait_collectives();

  std::vector<float> staging_;            // host side of a staged all-reduce
  StreamCollectives* pending_ = nullptr;  // collectives queued on stream_ since the last wait
};

// emu:`index` with `budget_bytes` of (host) memory.
std::unique_ptr<DeviceBackend> make_emulated_backend(int index, uint64_t budget_bytes);
// cuda:`index`; budget 0 = what is free on the GPU now (cudaMemGetInfo).
// InputError in a build without CUDA, without a driver or a device, or for
// an index past the last.
std::unique_ptr<DeviceBackend> make_cuda_backend(int index, uint64_t budget_bytes);
// The backend of a device id (emu or cuda; cpu ids are not device backends).
std::unique_ptr<DeviceBackend> make_device_backend(const DeviceId& id, uint64_t budget_bytes);

// A typed device array that returns its memory (and the ledger's charge)
// when it goes. Grows on demand for activations (grow()).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(DeviceBackend& b, size_t n, MemoryCategory category, std::string what)
      : backend_(&b), category_(category), what_(std::move(what)) {
    resize(n);
  }
  ~DeviceArray() { free(); }
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      free();
      backend_ = o.backend_;
      data_ = o.data_;
      n_ = o.n_;
      category_ = o.category_;
      what_ = std::move(o.what_);
      o.data_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void bind(DeviceBackend& b, MemoryCategory category, std::string what) {
    backend_ = &b;
    category_ = category;
    what_ = std::move(what);
  }
  // At least n elements (contents not kept when it grows).
  void grow(size_t n) {
    if (n > n_) resize(n);
  }
  T* data() const { return data_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  // Host vector -> this array (grown to fit).
  void assign(const T* src, size_t n) {
    grow(n);
    if (n > 0) backend_->upload(data_, src, n * sizeof(T));
  }

 private:
  void resize(size_t n) {
    free();
    if (n == 0) return;
    data_ = static_cast<T*>(backend_->allocate(n * sizeof(T), category_, what_));
    n_ = n;
  }
  void free() {
    if (data_ != nullptr) backend_->release(data_, n_ * sizeof(T), category_);
    data_ = nullptr;
    n_ = 0;
  }

  DeviceBackend* backend_ = nullptr;
  T* data_ = nullptr;
  size_t n_ = 0;
  MemoryCategory category_ = MemoryCategory::kActivations;
  std::string what_;
};

}  // namespace parallm
