// The `nccl` backend (built with -DPARALLM_CUDA=ON): ranks are GPUs, data pointers
// are device memory on the rank's GPU, collectives run on a per-communicator CUDA
// stream and are synchronous (the call returns when the stream is done).
//
// Every communicator made here is also a StreamCollectives (stream_collectives.h):
// dynamic_cast<StreamCollectives*>(comm.get()) gives all_reduce_sum_on_stream(),
// queued on the caller's stream with no wait, and wait_stream(), which waits for that
// stream under the same deadline and abort rules as the synchronous calls. Its stats
// go to the same counters as all_reduce_sum (the time: the enqueue only).
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
// on cuda:`cuda_device` (this rank's own choice; the ranks may pass different ones).
// `bootstrap` is a host communicator (local or mpi; InputError for nccl): it carries
// the unique id from its rank 0 and nothing else afterwards, so it may be any group,
// e.g. the tp or ep group of one rank, split() from the host world: each such group
// gets its own NCCL communicator over exactly its ranks, in its rank order. Called by
// one thread per rank (for local bootstraps, each rank's thread calls it).
//
// One GPU per rank: NCCL refuses two ranks of one communicator on the same GPU. The
// ranks first all-gather their device's UUID over `bootstrap` and every rank throws
// the same InputError for a duplicate ("--comm nccl needs one GPU per rank; ranks 0
// and 1 are both on cuda:0 (use --comm local ...)"), or for a cuda:N that does not
// exist on some rank, before NCCL is called; ranks that share a GPU use host-staged
// collectives over `bootstrap` itself instead (DeviceBackend::all_reduce_sum).
// A peer that never arrives: the bootstrap's CommError, or CommError after
// `timeout_s` in NCCL's init.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device, double timeout_s);
// n_ranks ranks driven by this process, rank i on cuda:i (each to be used by one thread).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators_in_process(int n_ranks, double timeout_s);

}  // namespace parallm
