// The `local` backend: ranks are threads of one process that exchange data through
// shared memory. `LocalWorld world(n, timeout_s)` creates the group; `world.rank(i)`
// hands rank i's communicator to the thread that will use it (each communicator is
// used by one thread at a time).
//
// Algorithm: every rank posts pointers to its buffers, meets the others at a
// barrier, then copies/reduces directly from the peers' buffers and meets them at a
// second barrier (so no buffer is reused while a peer still reads it). An all-reduce
// is a reduce-scatter + all-gather done in place: rank r alone owns element chunk r
// of every rank's buffer, sums it over ranks 0..n-1 in order and writes the sum back
// to all buffers, so results are bitwise identical on every rank. send() copies into
// a per-(sender, receiver) mailbox and returns; recv() waits for the message.
//
// Failure: every wait has a deadline (timeout_s). A rank is "gone" when its
// communicator was destroyed (a thread that exits, normally or by exception),
// abort()ed, or failed an earlier call; peers waiting for a gone rank throw
// CommError naming it at once (within ~20 ms), and a rank that merely stalls is
// named when the deadline passes.
#pragma once
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace parallm {

struct LocalWorldState;
struct LocalGroup;

class LocalWorld {
 public:
  explicit LocalWorld(int n_ranks, double timeout_s = kDefaultCommTimeoutS);
  ~LocalWorld();
  LocalWorld(const LocalWorld&) = delete;
  LocalWorld& operator=(const LocalWorld&) = delete;

  int size() const { return n_ranks_; }
  // Rank i's communicator; may be taken once per i. It may outlive the LocalWorld.
  std::unique_ptr<Communicator> rank(int i);
  // All ranks' communicators, in rank order (the ones not yet taken).
  std::vector<std::unique_ptr<Communicator>> take_all();

 private:
  int n_ranks_;
  double timeout_s_;
  std::shared_ptr<LocalWorldState> state_;
  std::shared_ptr<LocalGroup> world_group_;
  std::vector<bool> taken_;
};

// Runs fn(*comms[i]) on its own thread for every i (inline when there is one) and
// waits for all. A rank whose fn throws is abort()ed so that its peers fail fast.
// Returns each rank's exception (null where fn returned normally).
std::vector<std::exception_ptr> run_ranks(const std::vector<std::unique_ptr<Communicator>>& comms,
                                          const std::function<void(Communicator&)>& fn);
// Same, then rethrows the exception of the lowest failing rank, if any.
void run_ranks_or_throw(const std::vector<std::unique_ptr<Communicator>>& comms,
                        const std::function<void(Communicator&)>& fn);

}  // namespace parallm
