// Ledger-charged device and pinned buffers (see cuda_buffer.h).
#include "device/cuda_buffer.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "device/cuda_device.h"
#include "device/cuda_error.h"
#include "device/cuda_messages.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::cuda {

namespace {

int cuda_index(const Device& device) {
  PARALLM_CHECK_MSG(device.id().kind == DeviceId::Kind::kCuda, device.name() + " is not a CUDA device");
  return device.id().index;
}

}  // namespace

DeviceBuffer::DeviceBuffer(Device& device, MemoryCategory category, uint64_t bytes, std::string_view what)
    : bytes_(bytes), device_index_(cuda_index(device)) {
  // The ledger first: over the budget is the usual "does not fit", with the
  // breakdown, and nothing reaches the GPU.
  reservation_ = MemoryReservation(device.memory(), category, bytes, what);
  if (bytes == 0) return;
  set_current_device(device_index_);
  const cudaError_t status = cudaMalloc(&data_, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: the context stays usable
    data_ = nullptr;
    size_t free_bytes = 0, total_bytes = 0;
    PARALLM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    reservation_.reset();
    throw CapacityError(out_of_memory_message(device.name(), what, bytes, free_bytes, total_bytes));
  }
  PARALLM_CUDA_CHECK(status);
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_index_(other.device_index_),
      reservation_(std::move(other.reservation_)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_index_ = other.device_index_;
    reservation_ = std::move(other.reservation_);
  }
  return *this;
}

void DeviceBuffer::reset() {
  // NOTE: cudaFree synchronizes the device; buffers are freed at unload, not
  // per step. Its status is ignored: destructors must not throw.
  if (data_ != nullptr) (void)cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
  reservation_.reset();
}

PinnedBuffer::PinnedBuffer(Device& device, MemoryCategory category, uint64_t bytes, std::string_view what)
    : bytes_(bytes) {
  reservation_ = MemoryReservation(device.memory(), category, bytes, what);
  if (bytes == 0) return;
  set_current_device(cuda_index(device));
  const cudaError_t status = cudaMallocHost(&data_, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    data_ = nullptr;
    reservation_.reset();
    throw CapacityError(
        strfmt("%s: %s of pinned host memory for %.*s could not be allocated (the host is short of "
               "page-locked memory: check ulimit -l and what else runs)",
               device.name().c_str(), format_bytes(static_cast<double>(bytes)).c_str(), static_cast<int>(what.size()),
               what.data()));
  }
  PARALLM_CUDA_CHECK(status);
}

PinnedBuffer::~PinnedBuffer() { reset(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      reservation_(std::move(other.reservation_)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    reservation_ = std::move(other.reservation_);
  }
  return *this;
}

void PinnedBuffer::reset() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
  reservation_.reset();
}

void copy_to_device(void* dst, const void* src, uint64_t bytes, StreamHandle stream) {
  if (bytes > 0) PARALLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

void copy_to_host(void* dst, const void* src, uint64_t bytes, StreamHandle stream) {
  if (bytes > 0) PARALLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
}

void copy_on_device(void* dst, const void* src, uint64_t bytes, StreamHandle stream) {
  if (bytes > 0) PARALLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

void fill_bytes(void* dst, uint8_t value, uint64_t bytes, StreamHandle stream) {
  if (bytes > 0) PARALLM_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream));
}

}  // namespace parallm::cuda
