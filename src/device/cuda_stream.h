// A CUDA stream owned by one rank: the queue its kernels, copies and
// (later) NCCL calls run on, in order. RAII, move-only; no CUDA headers.
#pragma once
#include "device/stream_handle.h"

namespace parallm::cuda {

class Stream {
 public:
  // A non-blocking stream on cuda:`device_index` (InputError when it does not
  // exist); that device becomes the calling thread's current one. NOTE: non-blocking, so work on it never waits for the
  // legacy default stream that a library might use behind our back.
  explicit Stream(int device_index);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  StreamHandle handle() const { return stream_; }
  int device_index() const { return device_index_; }

  // Waits until everything queued so far ran. A kernel that faulted earlier on
  // the stream surfaces here as CudaError.
  void synchronize() const;

 private:
  void destroy();

  StreamHandle stream_ = nullptr;
  int device_index_ = 0;
};

}  // namespace parallm::cuda
