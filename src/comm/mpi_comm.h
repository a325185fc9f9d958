// The `mpi` backend: ranks are processes launched by `mpirun` (OpenMPI), on one
// host or many. Every call is posted as a non-blocking MPI operation (Iallreduce,
// Isend, ...) and polled with MPI_Test against the communicator's deadline, so a
// lost or stalled peer turns into a CommError instead of a hang.
//
// Naming the lost rank (the watchdog): init_mpi() gathers every rank's host name
// and pid. When a call times out, the ranks of the group that live on this host
// are probed (kill(pid, 0) and /proc/<pid>/stat: gone or zombie = lost), and the
// CommError names the lost ones. Otherwise the timed-out rank asks every peer, over
// a duplicate "diagnosis" communicator, whether it is inside a call: ranks that are
// waiting answer from their polling loop, and the ones silent for a short grace
// period (min(1 s, timeout/4)) are named as stalled (or lost on another host).
// Under OpenMPI, a rank that
// dies abnormally usually makes mpirun terminate the whole job at once; init_mpi()
// therefore also installs a SIGTERM handler that prints, before dying, which peers
// on this host are gone ("rank 0: terminated by mpirun; lost peer: rank 1 (pid N)").
//
// Usage: init_mpi(&argc, &argv) first thing in main (or an MpiSession), then
// make_mpi_world(timeout_s); finalize_mpi() at the end. After a CommError,
// finalize_mpi() skips MPI_Finalize (it would wait for the lost peer forever), so the
// process just exits with the caller's non-zero status.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace parallm {

// Initializes MPI once (MPI_THREAD_SERIALIZED) and the watchdog's peer table. Idempotent.
void init_mpi(int* argc, char*** argv);
// MPI_Finalize unless a communicator failed or MPI was never initialized. Idempotent.
void finalize_mpi();
bool mpi_initialized();
// World size announced by the launcher's environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE),
// readable before init_mpi(); 0 when not started by mpirun.
int mpi_launched_world_size();
int mpi_world_rank();
int mpi_world_size();
// This process's rank among the ranks on its host (for picking cuda:N).
int mpi_local_rank();
// The ranks of this job on this host whose process has exited, e.g.
// "rank 1 (pid 4242)"; "" when none (or before init_mpi). Cheap (a kill(0)
// and a /proc read per peer) and safe from any thread: a server polls it to
// notice a lost rank while it is idle, before any collective times out.
std::string mpi_lost_local_peers();

// A communicator over all processes (a duplicate of MPI_COMM_WORLD). Needs init_mpi().
std::unique_ptr<Communicator> make_mpi_world(double timeout_s = kDefaultCommTimeoutS);

// RAII init_mpi / finalize_mpi.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) { init_mpi(argc, argv); }
  ~MpiSession() { finalize_mpi(); }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

}  // namespace parallm
