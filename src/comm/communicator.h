// One rank's view of a group of ranks that exchange data: the interface that
// tensor, pipeline and expert parallel model code calls explicitly (STYLE.md
// principle 8). Backends: local (threads of one process, local_comm.h), mpi
// (processes under mpirun, mpi_comm.h), nccl (GPUs, nccl_comm.h).
//
// Rules every backend keeps:
//  - Collectives are called by every rank of the group in the same order, with
//    matching sizes. They are synchronous: buffers may be reused on return.
//  - Buffers are host memory for local/mpi and device memory for nccl.
//  - Results are identical on every rank (bitwise): sums add rank 0's value first,
//    then rank 1's, ... where the backend controls the order (local does).
//  - A call that cannot complete within timeout_s() (a peer died, left or stalled)
//    throws CommError naming the operation and the lost or late rank(s), never
//    hangs. After a CommError the communicator is broken: every later call throws.
//  - stats() counts this rank's traffic per op kind with the formulas of comm_stats.h.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "comm/comm_error.h"
#include "comm/comm_stats.h"

namespace parallm {

constexpr double kDefaultCommTimeoutS = 60.0;  // --comm-timeout

class Communicator {
 public:
  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend_name() const = 0;  // "local", "mpi", "nccl"

  // In place: data[i] = sum over ranks of data[i].           data: [count]
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  // recv = concatenation of every rank's send, by rank.     recv: [size() * bytes_per_rank]
  // send may alias recv + rank() * bytes_per_rank (in place).
  virtual void all_gather(const void* send, void* recv, size_t bytes_per_rank) = 0;
  // recv = block rank() of the element-wise sum of every rank's send.
  //   send: [size() * count_per_rank], recv: [count_per_rank]
  virtual void reduce_scatter_sum(const float* send, float* recv, size_t count_per_rank) = 0;
  // Rank r sends send[send_offsets[p] .. + send_bytes[p]) to every rank p and receives
  // from rank p into recv[recv_offsets[p] .. + recv_bytes[p]). All arrays have size()
  // entries; send_bytes[p] on rank r must equal recv_bytes[r] on rank p.
  virtual void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                            const size_t* recv_bytes, const size_t* recv_offsets) = 0;
  // Point to point, matched in order per (sender, receiver) pair. send may return
  // before the receiver has called recv (the data is buffered or in flight).
  virtual void send(const void* data, size_t bytes, int peer) = 0;
  virtual void recv(void* data, size_t bytes, int peer) = 0;
  // data on `root` is copied to every other rank's data.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // New communicator over a subset of this group's ranks (e.g. the tp group of one
  // pipeline stage). Every rank of this group calls it collectively with its own
  // `color`; ranks with equal color form a group ordered by (`key`, old rank).
  // A negative color joins no group and returns nullptr. The new communicator
  // inherits timeout_s() and starts with zero stats.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Marks this rank as dead so that peers fail fast (with this rank's id) instead
  // of waiting for the timeout; this communicator is unusable afterwards.
  virtual void abort() = 0;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double timeout_s);

 protected:
  // Adds one completed call to stats(); backends call it at the end of each op.
  void record(CommOp op, uint64_t bytes_sent, std::chrono::steady_clock::time_point start);
  // "all_reduce_sum on mpi rank 1 of 4" (prefix of every CommError message)
  std::string describe(CommOp op) const;

 private:
  CommStats stats_;
  double timeout_s_ = kDefaultCommTimeoutS;
};

}  // namespace parallm
