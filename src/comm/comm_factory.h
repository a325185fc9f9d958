// Choosing a communicator backend (`--comm local|mpi|nccl`) and building the
// communicators this process hosts. The one place that knows which backends were
// compiled in (STYLE.md principle 7: dispatch in one place per axis).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace parallm {

enum class CommBackend { kLocal, kMpi, kNccl };

const char* comm_backend_name(CommBackend backend);  // "local", "mpi", "nccl"
bool comm_backend_compiled(CommBackend backend);
// "local" | "mpi" | "nccl". Throws InputError for an unknown name or a backend this
// binary was built without (naming the CMake option that enables it).
CommBackend parse_comm_backend(std::string_view text);
// The host transport that goes with `backend`: itself for local and mpi;
// for nccl (device memory only), MPI under mpirun, else this process's
// threads (the engine's steps and commands travel on it).
CommBackend host_backend(CommBackend backend);

struct CommOptions {
  double timeout_s = kDefaultCommTimeoutS;  // --comm-timeout
};

// The communicators this process hosts, one per rank it runs, in rank order:
//  - local: n_ranks communicators; run each on its own thread (run_ranks()).
//  - mpi:   one, this process's rank. init_mpi() must have run and n_ranks must
//           equal the number of processes mpirun started (InputError otherwise).
//  - nccl:  under mpirun (MPI initialized, world size == n_ranks): one, on
//           cuda:(rank among the processes of this host); otherwise n_ranks ranks in
//           this process on cuda:0 .. cuda:n_ranks-1 (one thread each).
// Ranks of this job (MPI processes on this host) whose process exited, named
// ("rank 1 (pid 4242)"), or "" when none or not under MPI. Any thread.
std::string lost_peer_processes();

std::vector<std::unique_ptr<Communicator>> make_communicators(CommBackend backend, int n_ranks,
                                                              const CommOptions& options = {});

}  // namespace parallm
