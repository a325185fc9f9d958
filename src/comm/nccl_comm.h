// The `nccl` backend (built with -DPARALLM_CUDA=ON): ranks are GPUs, data pointers
// are device memory on the rank's GPU, collectives run on a per-communicator CUDA
// stream and are synchronous (the call returns when the stream is done).
//
// Timeouts: communicators are created non-blocking (ncclConfig_t.blocking = 0).
// Each call polls ncclCommGetAsyncError and cudaStreamQuery against the deadline;
// on expiry it calls ncclCommAbort (which also frees the stuck kernel) and throws
// CommError. NCCL does not say which peer is missing, so the message says a peer
// died or stalled; under mpirun, the mpi watchdog and mpirun name the lost process.
//
// The unique id is created by rank 0 and broadcast over a host communicator (the
// mpi world under mpirun, or a local world for one process driving several GPUs).
#pragma once
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace parallm {

// Number of CUDA devices; 0 when there is no driver or no GPU.
int cuda_device_count();

// Collective over `bootstrap`'s ranks: rank r of the result is rank r of `bootstrap`,
// on cuda:`cuda_device`.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device, double timeout_s);
// n_ranks ranks driven by this process, rank i on cuda:i (each to be used by one thread).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators_in_process(int n_ranks, double timeout_s);

}  // namespace parallm
