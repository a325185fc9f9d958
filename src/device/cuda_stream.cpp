// CUDA streams (see cuda_stream.h).
#include "device/cuda_stream.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "device/cuda_device.h"
#include "device/cuda_error.h"

namespace parallm::cuda {

Stream::Stream(int device_index) : device_index_(device_index) {
  set_current_device(device_index);
  PARALLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() { destroy(); }

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_index_(other.device_index_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    destroy();
    stream_ = std::exchange(other.stream_, nullptr);
    device_index_ = other.device_index_;
  }
  return *this;
}

void Stream::synchronize() const { PARALLM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void Stream::destroy() {
  // NOTE: no check: a destructor must not throw, and a stream of a lost device
  // fails to destroy with the error its last synchronize already reported.
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

}  // namespace parallm::cuda
