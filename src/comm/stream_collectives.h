// Collectives queued on the caller's CUDA stream: the device rank model's tp / ep
// all-reduce runs between its own kernels, with no host round trip and no wait per
// call. Implemented by the nccl backend (nccl_comm.h); get it from a Communicator
// with dynamic_cast<StreamCollectives*> (null for local / mpi, whose buffers are
// host memory and which therefore stage through the host instead).
//
// No CUDA or NCCL types here, so that g++-only code (model code, the emulated
// device) can hold the interface in every build.
//
// Rules, on top of communicator.h's:
//  - Every rank queues the same stream collectives in the same order, like the
//    synchronous ones. Do not interleave them with the synchronous calls of the
//    same communicator while stream work is still outstanding: call wait_stream()
//    first (NCCL gives no progress guarantee between two streams' operations on one
//    communicator, so mixing could deadlock).
//  - A failure inside a queued collective (a peer died, a transport broke) cannot be
//    seen at queueing time; it surfaces in the next wait_stream() (or the next
//    synchronous call), as a CommError, and the communicator is broken from then on.
#pragma once
#include <cstddef>

#include "device/stream_handle.h"

namespace parallm {

// A communicator whose collectives can be queued on the caller's CUDA stream
// (device pointers), ordered with the caller's kernels, without waiting.
class StreamCollectives {
 public:
  virtual ~StreamCollectives() = default;
  // Queues sum-all-reduce of `count` floats at device pointer `data` on `stream` and returns
  // without waiting. Errors of the queueing throw CommError / CudaError.
  virtual void all_reduce_sum_on_stream(float* data, size_t count, cuda::StreamHandle stream) = 0;
  // Waits, within the communicator's timeout, until `stream` has finished everything queued so far
  // (the collectives included), polling the stream and NCCL's async error; on expiry aborts the
  // communicator and throws CommError ("a peer died or stalled") — a dead rank is an error, not a hang.
  // NOTE: the deadline covers the caller's kernels queued before the collectives too, so
  // the timeout must exceed one step's compute (it does by far at the 60 s default).
  virtual void wait_stream(cuda::StreamHandle stream) = 0;
};

}  // namespace parallm
