// Shared parts of every communicator: stats, timeouts, ring-volume formulas.
#include "comm/communicator.h"

#include "util/check.h"
#include "util/log.h"

namespace parallm {

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
      return "all_reduce_sum";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kReduceScatter:
      return "reduce_scatter_sum";
    case CommOp::kAllToAll:
      return "all_to_all_v";
    case CommOp::kSend:
      return "send";
    case CommOp::kRecv:
      return "recv";
    case CommOp::kBroadcast:
      return "broadcast";
    case CommOp::kBarrier:
      return "barrier";
  }
  return "?";
}

uint64_t CommStats::bytes_sent() const {
  uint64_t total = 0;
  for (const CommOpStats& s : ops) total += s.bytes_sent;
  return total;
}

uint64_t CommStats::calls() const {
  uint64_t total = 0;
  for (const CommOpStats& s : ops) total += s.calls;
  return total;
}

double CommStats::seconds() const {
  double total = 0;
  for (const CommOpStats& s : ops) total += s.seconds;
  return total;
}

uint64_t ring_all_reduce_bytes(size_t count, size_t elem_bytes, int n_ranks, int rank) {
  PARALLM_CHECK(n_ranks >= 1 && rank >= 0 && rank < n_ranks);
  const uint64_t n = static_cast<uint64_t>(n_ranks);
  auto chunk = [&](uint64_t c) { return count / n + (c < count % n ? 1 : 0); };
  uint64_t skipped = chunk((static_cast<uint64_t>(rank) + 1) % n) + chunk((static_cast<uint64_t>(rank) + 2) % n);
  return (2 * static_cast<uint64_t>(count) - skipped) * elem_bytes;
}

uint64_t ring_all_gather_bytes(size_t bytes_per_rank, int n_ranks) {
  return static_cast<uint64_t>(n_ranks - 1) * bytes_per_rank;
}

uint64_t ring_reduce_scatter_bytes(size_t bytes_per_rank, int n_ranks) {
  return static_cast<uint64_t>(n_ranks - 1) * bytes_per_rank;
}

uint64_t chain_broadcast_bytes(size_t bytes, int n_ranks, int rank, int root) {
  int position = (rank - root + n_ranks) % n_ranks;
  return position < n_ranks - 1 ? bytes : 0;
}

Communicator::~Communicator() = default;

void Communicator::set_timeout_s(double timeout_s) {
  if (!(timeout_s > 0)) throw InputError(strfmt("--comm-timeout must be > 0 seconds, got %g", timeout_s));
  timeout_s_ = timeout_s;
}

void Communicator::record(CommOp op, uint64_t bytes_sent, std::chrono::steady_clock::time_point start) {
  CommOpStats& s = stats_.op(op);
  s.calls += 1;
  s.bytes_sent += bytes_sent;
  s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Communicator::describe(CommOp op) const {
  return strfmt("%s on %s rank %d of %d", comm_op_name(op), backend_name(), rank(), size());
}

}  // namespace parallm
