// Backend selection and construction (see comm_factory.h).
#include "comm/comm_factory.h"

#include <string>

#include "comm/local_comm.h"
#include "util/check.h"
#include "util/log.h"
#ifdef PARALLM_HAVE_MPI
#include "comm/mpi_comm.h"
#endif
#ifdef PARALLM_HAVE_NCCL
#include "comm/nccl_comm.h"
#endif

namespace parallm {

const char* comm_backend_name(CommBackend backend) {
  switch (backend) {
    case CommBackend::kLocal:
      return "local";
    case CommBackend::kMpi:
      return "mpi";
    case CommBackend::kNccl:
      return "nccl";
  }
  return "?";
}

bool comm_backend_compiled(CommBackend backend) {
  switch (backend) {
    case CommBackend::kLocal:
      return true;
#ifdef PARALLM_HAVE_MPI
    case CommBackend::kMpi:
      return true;
#else
    case CommBackend::kMpi:
      return false;
#endif
#ifdef PARALLM_HAVE_NCCL
    case CommBackend::kNccl:
      return true;
#else
    case CommBackend::kNccl:
      return false;
#endif
  }
  return false;
}

CommBackend host_backend(CommBackend backend) {
  if (backend != CommBackend::kNccl) return backend;
#ifdef PARALLM_HAVE_MPI
  if (mpi_initialized() && mpi_world_size() > 1) return CommBackend::kMpi;
#endif
  return CommBackend::kLocal;
}

CommBackend parse_comm_backend(std::string_view text) {
  CommBackend backend;
  if (text == "local") {
    backend = CommBackend::kLocal;
  } else if (text == "mpi") {
    backend = CommBackend::kMpi;
  } else if (text == "nccl") {
    backend = CommBackend::kNccl;
  } else {
    throw InputError("unknown --comm '" + std::string(text) + "': expected local, mpi or nccl");
  }
  if (!comm_backend_compiled(backend)) {
    throw InputError(backend == CommBackend::kMpi
                         ? "--comm mpi: this parallm was built without MPI (rebuild with -DPARALLM_MPI=ON and "
                           "libopenmpi-dev installed)"
                         : "--comm nccl: this parallm was built without CUDA (rebuild with -DPARALLM_CUDA=ON)");
  }
  return backend;
}

std::string lost_peer_processes() {
#ifdef PARALLM_HAVE_MPI
  if (mpi_initialized()) return mpi_lost_local_peers();
#endif
  return "";
}

std::vector<std::unique_ptr<Communicator>> make_communicators(CommBackend backend, int n_ranks,
                                                              const CommOptions& options) {
  if (n_ranks < 1) throw InputError(strfmt("need at least 1 rank, got %d", n_ranks));
  if (!comm_backend_compiled(backend)) parse_comm_backend(comm_backend_name(backend));  // throws
  std::vector<std::unique_ptr<Communicator>> comms;
  switch (backend) {
    case CommBackend::kLocal: {
      LocalWorld world(n_ranks, options.timeout_s);
      comms = world.take_all();
      break;
    }
    case CommBackend::kMpi: {
#ifdef PARALLM_HAVE_MPI
      if (!mpi_initialized()) throw InputError("--comm mpi: run under mpirun (MPI is not initialized)");
      if (mpi_world_size() != n_ranks) {
        throw InputError(strfmt("--comm mpi: %d ranks needed but mpirun started %d processes (use mpirun -np %d)",
                                n_ranks, mpi_world_size(), n_ranks));
      }
      comms.push_back(make_mpi_world(options.timeout_s));
#endif
      break;
    }
    case CommBackend::kNccl: {
#ifdef PARALLM_HAVE_NCCL
      bool under_mpi = false;
#ifdef PARALLM_HAVE_MPI
      under_mpi = mpi_initialized() && mpi_world_size() > 1;
      if (under_mpi) {
        if (mpi_world_size() != n_ranks) {
          throw InputError(
              strfmt("--comm nccl: %d ranks needed but mpirun started %d processes", n_ranks, mpi_world_size()));
        }
        std::unique_ptr<Communicator> bootstrap = make_mpi_world(options.timeout_s);
        comms.push_back(make_nccl_communicator(*bootstrap, mpi_local_rank(), options.timeout_s));
      }
#endif
      if (!under_mpi) comms = make_nccl_communicators_in_process(n_ranks, options.timeout_s);
#endif
      break;
    }
  }
  return comms;
}

}  // namespace parallm
