// Per-rank communication counters and the ring-volume formulas they follow.
//
// Every backend counts the bytes THIS rank would send if the collective ran as a
// ring (all-reduce, all-gather, reduce-scatter), a chain from the root (broadcast)
// or direct exchanges (all-to-all-v, send), whatever algorithm the backend really
// uses. The counts are therefore identical across backends and equal to what the
// planner predicts, e.g. an all-reduce of B bytes over n ranks sends 2(n-1)/n * B
// per rank (exactly, when the element count divides by n).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace parallm {

enum class CommOp { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSend, kRecv, kBroadcast, kBarrier };
constexpr int kCommOpCount = 8;
const char* comm_op_name(CommOp op);  // "all_reduce_sum", "all_gather", ...

struct CommOpStats {
  uint64_t calls = 0;       // completed calls
  uint64_t bytes_sent = 0;  // bytes this rank sent (ring/chain volume, see above)
  double seconds = 0;       // wall time spent inside the calls
};

struct CommStats {
  std::array<CommOpStats, kCommOpCount> ops{};

  const CommOpStats& op(CommOp o) const { return ops[static_cast<int>(o)]; }
  CommOpStats& op(CommOp o) { return ops[static_cast<int>(o)]; }
  uint64_t bytes_sent() const;
  uint64_t calls() const;
  double seconds() const;
};

// Bytes rank `rank` sends in a ring all-reduce of `count` elements of `elem_bytes`:
// the buffer is cut into n chunks (the first count % n one element longer); in the
// reduce-scatter half rank r sends every chunk but (r+1) % n, in the all-gather half
// every chunk but (r+2) % n. Sum over ranks: 2(n-1) * count * elem_bytes.
uint64_t ring_all_reduce_bytes(size_t count, size_t elem_bytes, int n_ranks, int rank);
// Ring all-gather / reduce-scatter: every rank sends (n-1) blocks of its share.
uint64_t ring_all_gather_bytes(size_t bytes_per_rank, int n_ranks);
uint64_t ring_reduce_scatter_bytes(size_t bytes_per_rank, int n_ranks);
// Chain broadcast from `root`: every rank but the last in the chain forwards `bytes`.
uint64_t chain_broadcast_bytes(size_t bytes, int n_ranks, int rank, int root);

}  // namespace parallm
