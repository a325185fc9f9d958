// CUDA events (see cuda_event.h).
#include "device/cuda_event.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "device/cuda_device.h"
#include "device/cuda_error.h"
#include "device/cuda_stream.h"

namespace parallm::cuda {

Event::Event(int device_index, bool timing) : device_index_(device_index) {
  set_current_device(device_index);
  PARALLM_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() { destroy(); }

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_index_(other.device_index_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    destroy();
    event_ = std::exchange(other.event_, nullptr);
    device_index_ = other.device_index_;
  }
  return *this;
}

void Event::record(const Stream& stream) { PARALLM_CUDA_CHECK(cudaEventRecord(event_, stream.handle())); }

void Event::make_wait(const Stream& stream) const {
  PARALLM_CUDA_CHECK(cudaStreamWaitEvent(stream.handle(), event_, 0));
}

void Event::synchronize() const { PARALLM_CUDA_CHECK(cudaEventSynchronize(event_)); }

bool Event::ready() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  PARALLM_CUDA_CHECK(status);
  return true;
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  PARALLM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

void Event::destroy() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
  event_ = nullptr;
}

}  // namespace parallm::cuda
