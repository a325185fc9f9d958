// The opaque handle of a CUDA stream, for headers that g++ compiles without the
// CUDA toolkit (kernel launchers, the emulated device, model code).
// NOTE: cudaStream_t is `struct CUstream_st*` in the CUDA runtime's own headers;
// naming the same incomplete struct keeps launchers type-safe (no void*) and lets
// a .cu file pass a cudaStream_t straight through.
#pragma once

struct CUstream_st;

namespace parallm::cuda {

using StreamHandle = CUstream_st*;  // nullptr: the legacy default stream

}  // namespace parallm::cuda
