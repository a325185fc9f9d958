// The `local` backend (see local_comm.h for the algorithm and failure model).
#include "comm/local_comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

using Clock = std::chrono::steady_clock;

// Liveness of every thread-rank of one LocalWorld, shared by all groups split from it.
struct LocalWorldState {
  explicit LocalWorldState(int n) : aborted(static_cast<size_t>(n), false) {}
  std::mutex mutex;
  std::vector<bool> aborted;  // [world rank]
};

namespace {

// NOTE: waiters re-check liveness at this interval, so that abort() (which may come
// from any group) needs no registry of groups to notify. Collectives themselves are
// woken by notify_all, not by this poll.
constexpr auto kPollInterval = std::chrono::milliseconds(20);

// What a rank posts for the others to read between the two barriers of a collective.
struct Slot {
  const void* send = nullptr;
  void* recv = nullptr;
  const size_t* send_bytes = nullptr;    // all_to_all_v
  const size_t* send_offsets = nullptr;  // all_to_all_v
  size_t count = 0;                      // elements or bytes, op-dependent
  int root = 0;
  int color = 0;
  int key = 0;
  CommOp op = CommOp::kBarrier;
};

}  // namespace

// One group's shared state: every member's posted slot, barrier counts and mailboxes.
struct LocalGroup {
  LocalGroup(std::shared_ptr<LocalWorldState> w, std::vector<int> ranks)
      : world(std::move(w)),
        world_ranks(std::move(ranks)),
        n(static_cast<int>(world_ranks.size())),
        arrivals(static_cast<size_t>(n), 0),
        left(static_cast<size_t>(n), false),
        failed(static_cast<size_t>(n)),
        slots(static_cast<size_t>(n)),
        mailboxes(static_cast<size_t>(n) * static_cast<size_t>(n)),
        split_out(static_cast<size_t>(n)) {}

  std::shared_ptr<LocalWorldState> world;
  const std::vector<int> world_ranks;  // [group rank] -> world rank
  const int n;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<uint64_t> arrivals;                           // [rank] barriers reached so far
  std::vector<bool> left;                                   // [rank] communicator destroyed
  std::vector<std::string> failed;                          // [rank] non-empty: that rank threw this CommError
  std::vector<Slot> slots;                                  // [rank]
  std::vector<std::deque<std::vector<uint8_t>>> mailboxes;  // [sender * n + receiver]
  std::vector<std::shared_ptr<LocalGroup>> split_out;       // [leader rank] new group
};

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank, double timeout_s)
      : group_(std::move(group)), rank_(rank) {
    set_timeout_s(timeout_s);
  }

  ~LocalCommunicator() override {
    std::lock_guard<std::mutex> lock(group_->mutex);
    group_->left[static_cast<size_t>(rank_)] = true;
    group_->cv.notify_all();
  }

  int rank() const override { return rank_; }
  int size() const override { return group_->n; }
  const char* backend_name() const override { return "local"; }

  void all_reduce_sum(float* data, size_t count) override {
    Op op(*this, CommOp::kAllReduce);
    Slot& mine = post(op.op);
    mine.recv = data;
    mine.count = count;
    wait_all(op);
    check_counts(op);
    const size_t n = static_cast<size_t>(group_->n);
    const size_t r = static_cast<size_t>(rank_);
    size_t begin = r * (count / n) + std::min(r, count % n);
    size_t len = count / n + (r < count % n ? 1 : 0);
    // Chunk r of every rank's buffer belongs to this rank alone until the next barrier.
    thread_local std::vector<float> sum;  // [len]
    sum.assign(len, 0.0f);
    const float* first = static_cast<const float*>(group_->slots[0].recv) + begin;
    std::copy(first, first + len, sum.begin());
    for (size_t k = 1; k < n; ++k) {
      const float* peer = static_cast<const float*>(group_->slots[k].recv) + begin;
      for (size_t i = 0; i < len; ++i) sum[i] += peer[i];
    }
    for (size_t k = 0; k < n; ++k) {
      if (len > 0) std::memcpy(static_cast<float*>(group_->slots[k].recv) + begin, sum.data(), len * sizeof(float));
    }
    wait_all(op);
    op.done(ring_all_reduce_bytes(count, sizeof(float), group_->n, rank_));
  }

  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override {
    Op op(*this, CommOp::kAllGather);
    Slot& mine = post(op.op);
    mine.send = send;
    mine.count = bytes_per_rank;
    wait_all(op);
    check_counts(op);
    for (int k = 0; k < group_->n; ++k) {
      uint8_t* dst = static_cast<uint8_t*>(recv) + static_cast<size_t>(k) * bytes_per_rank;
      const void* src = group_->slots[static_cast<size_t>(k)].send;
      if (dst != src && bytes_per_rank > 0) std::memcpy(dst, src, bytes_per_rank);
    }
    wait_all(op);
    op.done(ring_all_gather_bytes(bytes_per_rank, group_->n));
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t count_per_rank) override {
    Op op(*this, CommOp::kReduceScatter);
    Slot& mine = post(op.op);
    mine.send = send;
    mine.count = count_per_rank;
    wait_all(op);
    check_counts(op);
    const size_t offset = static_cast<size_t>(rank_) * count_per_rank;
    for (int k = 0; k < group_->n; ++k) {
      const float* peer = static_cast<const float*>(group_->slots[static_cast<size_t>(k)].send) + offset;
      if (k == 0) {
        std::copy(peer, peer + count_per_rank, recv);
      } else {
        for (size_t i = 0; i < count_per_rank; ++i) recv[i] += peer[i];
      }
    }
    wait_all(op);
    op.done(ring_reduce_scatter_bytes(count_per_rank * sizeof(float), group_->n));
  }

  void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                    const size_t* recv_bytes, const size_t* recv_offsets) override {
    Op op(*this, CommOp::kAllToAll);
    Slot& mine = post(op.op);
    mine.send = send;
    mine.send_bytes = send_bytes;
    mine.send_offsets = send_offsets;
    wait_all(op);
    const size_t r = static_cast<size_t>(rank_);
    for (size_t p = 0; p < static_cast<size_t>(group_->n); ++p) {
      const Slot& peer = group_->slots[p];
      if (peer.op != op.op)
        fail(op, name(static_cast<int>(p)) + " called " + comm_op_name(peer.op) + " at the same time");
      if (peer.send_bytes[r] != recv_bytes[p]) {
        fail(op, strfmt("rank %zu sends %zu bytes to rank %d, which expects %zu", p, peer.send_bytes[r], rank_,
                        recv_bytes[p]));
      }
      if (recv_bytes[p] > 0) {
        std::memcpy(static_cast<uint8_t*>(recv) + recv_offsets[p],
                    static_cast<const uint8_t*>(peer.send) + peer.send_offsets[r], recv_bytes[p]);
      }
    }
    wait_all(op);
    uint64_t sent = 0;
    for (size_t p = 0; p < static_cast<size_t>(group_->n); ++p) sent += p == r ? 0 : send_bytes[p];
    op.done(sent);
  }

  void send(const void* data, size_t bytes, int peer) override {
    Op op(*this, CommOp::kSend);
    check_peer(op, peer);
    std::unique_lock<std::mutex> lock(group_->mutex);
    if (auto why = peer_gone_locked(peer)) {
      lock.unlock();
      fail(op, *why);
    }
    const uint8_t* bytes_in = static_cast<const uint8_t*>(data);
    group_->mailboxes[mailbox(rank_, peer)].emplace_back(bytes_in, bytes_in + bytes);
    group_->cv.notify_all();
    lock.unlock();
    op.done(bytes);
  }

  void recv(void* data, size_t bytes, int peer) override {
    Op op(*this, CommOp::kRecv);
    check_peer(op, peer);
    std::unique_lock<std::mutex> lock(group_->mutex);
    auto& box = group_->mailboxes[mailbox(peer, rank_)];
    std::optional<std::string> why;
    while (box.empty()) {
      why = peer_gone_locked(peer);
      if (why) break;
      Clock::time_point now = Clock::now();
      if (now >= op.deadline) {
        why = strfmt("%s did not send within %.1f s (stalled?)", name(peer).c_str(), timeout_s());
        break;
      }
      group_->cv.wait_until(lock, std::min(op.deadline, now + kPollInterval));
    }
    if (why) {
      lock.unlock();
      fail(op, *why);
    }
    std::vector<uint8_t> message = std::move(box.front());
    box.pop_front();
    lock.unlock();
    if (message.size() != bytes) {
      fail(op, strfmt("%s sent %zu bytes, expected %zu", name(peer).c_str(), message.size(), bytes));
    }
    if (bytes > 0) std::memcpy(data, message.data(), bytes);
    op.done(0);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    Op op(*this, CommOp::kBroadcast);
    check_peer(op, root);
    Slot& mine = post(op.op);
    mine.recv = data;
    mine.count = bytes;
    mine.root = root;
    wait_all(op);
    check_counts(op);
    const void* src = group_->slots[static_cast<size_t>(root)].recv;
    if (rank_ != root && bytes > 0) std::memcpy(data, src, bytes);
    wait_all(op);
    op.done(chain_broadcast_bytes(bytes, group_->n, rank_, root));
  }

  void barrier() override {
    Op op(*this, CommOp::kBarrier);
    wait_all(op);
    op.done(0);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    Op op(*this, CommOp::kBarrier);
    Slot& mine = post(op.op);
    mine.color = color;
    mine.key = key;
    wait_all(op);
    std::vector<int> members;  // my group, in new-rank order
    if (color >= 0) {
      for (int k = 0; k < group_->n; ++k) {
        if (group_->slots[static_cast<size_t>(k)].color == color) members.push_back(k);
      }
      std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
        return group_->slots[static_cast<size_t>(a)].key < group_->slots[static_cast<size_t>(b)].key;
      });
    }
    const bool leader = !members.empty() && members[0] == rank_;
    if (leader) {
      std::vector<int> world_ranks;
      for (int k : members) world_ranks.push_back(group_->world_ranks[static_cast<size_t>(k)]);
      auto created = std::make_shared<LocalGroup>(group_->world, std::move(world_ranks));
      std::lock_guard<std::mutex> lock(group_->mutex);
      group_->split_out[static_cast<size_t>(rank_)] = std::move(created);
    }
    wait_all(op);
    if (members.empty()) return nullptr;
    std::shared_ptr<LocalGroup> created;
    {
      std::lock_guard<std::mutex> lock(group_->mutex);
      created = group_->split_out[static_cast<size_t>(members[0])];
    }
    int new_rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    auto comm = std::make_unique<LocalCommunicator>(std::move(created), new_rank, timeout_s());
    // NOTE: split is not counted in stats (it is setup, not traffic).
    return comm;
  }

  void abort() override {
    {
      std::lock_guard<std::mutex> lock(group_->world->mutex);
      group_->world->aborted[static_cast<size_t>(world_rank(rank_))] = true;
    }
    broken_ = "this rank was aborted";
    std::lock_guard<std::mutex> lock(group_->mutex);
    group_->cv.notify_all();
  }

 private:
  // One call in flight: its deadline and start time.
  struct Op {
    Op(LocalCommunicator& c, CommOp kind) : comm(c), op(kind), start(Clock::now()) {
      deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.timeout_s()));
      if (!c.broken_.empty()) {
        throw CommError(c.describe(kind) + ": communicator unusable after an earlier failure: " + c.broken_);
      }
    }
    void done(uint64_t bytes_sent) { comm.record(op, bytes_sent, start); }
    LocalCommunicator& comm;
    CommOp op;
    Clock::time_point start;
    Clock::time_point deadline;
  };

  static size_t mailbox(int sender, int receiver, int n) {
    return static_cast<size_t>(sender) * static_cast<size_t>(n) + static_cast<size_t>(receiver);
  }
  size_t mailbox(int sender, int receiver) const { return mailbox(sender, receiver, group_->n); }
  int world_rank(int rank) const { return group_->world_ranks[static_cast<size_t>(rank)]; }

  // "rank 2" or, in a split group, "rank 1 (world rank 3)".
  std::string name(int rank) const {
    int w = world_rank(rank);
    return w == rank ? strfmt("rank %d", rank) : strfmt("rank %d (world rank %d)", rank, w);
  }

  Slot& post(CommOp op) {
    std::lock_guard<std::mutex> lock(group_->mutex);
    Slot& slot = group_->slots[static_cast<size_t>(rank_)];
    slot = Slot{};
    slot.op = op;
    return slot;
  }

  bool aborted_locked(int peer) const {
    std::lock_guard<std::mutex> lock(group_->world->mutex);
    return group_->world->aborted[static_cast<size_t>(world_rank(peer))];
  }

  // Why `peer` can no longer take part (caller holds group_->mutex), or nullopt.
  std::optional<std::string> peer_gone_locked(int peer) const {
    const size_t p = static_cast<size_t>(peer);
    if (!group_->failed[p].empty()) return name(peer) + " failed: " + group_->failed[p];
    if (aborted_locked(peer)) return name(peer) + " is gone (aborted)";
    if (group_->left[p]) return name(peer) + " is gone (its communicator was destroyed)";
    return std::nullopt;
  }

  // Barrier with a deadline: returns when every rank has arrived, throws CommError
  // when a rank that has not arrived is gone, any rank failed, or the deadline passes.
  void wait_all(const Op& op) {
    std::unique_lock<std::mutex> lock(group_->mutex);
    const uint64_t target = ++arrivals_;
    group_->arrivals[static_cast<size_t>(rank_)] = target;
    group_->cv.notify_all();
    std::string why;
    while (true) {
      std::vector<int> late;
      for (int k = 0; k < group_->n; ++k) {
        if (k == rank_) continue;
        const size_t kk = static_cast<size_t>(k);
        bool arrived = group_->arrivals[kk] >= target;
        // A rank that failed inside a call poisons the group even if it arrived (it has
        // left the call, so its buffers may be gone); a rank that left or aborted between
        // calls only matters if it has not arrived.
        auto gone = peer_gone_locked(k);
        if (gone && (!arrived || !group_->failed[kk].empty())) {
          why = *gone;
          break;
        }
        if (!arrived) late.push_back(k);
      }
      if (!why.empty()) break;
      if (late.empty()) return;
      Clock::time_point now = Clock::now();
      if (now >= op.deadline) {
        std::string names;
        for (int k : late) names += (names.empty() ? "" : ", ") + name(k);
        why = strfmt("%s did not arrive within %.1f s (stalled?)", names.c_str(), timeout_s());
        break;
      }
      group_->cv.wait_until(lock, std::min(op.deadline, now + kPollInterval));
    }
    lock.unlock();
    fail(op, why);
  }

  // All ranks must pass the same count/root; a mismatch is a bug in the caller.
  void check_counts(const Op& op) {
    const Slot& mine = group_->slots[static_cast<size_t>(rank_)];
    for (int k = 0; k < group_->n; ++k) {
      const Slot& peer = group_->slots[static_cast<size_t>(k)];
      if (peer.op != mine.op) {
        fail(op, name(k) + " called " + comm_op_name(peer.op) + " at the same time");
      }
      if (peer.count != mine.count || peer.root != mine.root) {
        fail(op, strfmt("mismatched arguments: %s passed count %zu root %d, this rank %zu root %d", name(k).c_str(),
                        peer.count, peer.root, mine.count, mine.root));
      }
    }
  }

  void check_peer(const Op& op, int peer) {
    if (peer < 0 || peer >= group_->n) fail(op, strfmt("peer/root %d out of range", peer));
  }

  // Marks this rank failed (peers fail fast, naming it) and throws.
  [[noreturn]] void fail(const Op& op, const std::string& why) {
    std::string message = describe(op.op) + ": " + why;
    broken_ = message;
    {
      std::lock_guard<std::mutex> lock(group_->mutex);
      group_->failed[static_cast<size_t>(rank_)] = message;
      group_->cv.notify_all();
    }
    throw CommError(message);
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
  uint64_t arrivals_ = 0;
  std::string broken_;  // non-empty once a call failed or abort() was called
};

}  // namespace

LocalWorld::LocalWorld(int n_ranks, double timeout_s)
    : n_ranks_(n_ranks), timeout_s_(timeout_s), taken_(static_cast<size_t>(std::max(n_ranks, 0)), false) {
  if (n_ranks < 1) throw InputError(strfmt("a local world needs at least 1 rank, got %d", n_ranks));
  if (!(timeout_s > 0)) throw InputError(strfmt("--comm-timeout must be > 0 seconds, got %g", timeout_s));
  state_ = std::make_shared<LocalWorldState>(n_ranks);
}

LocalWorld::~LocalWorld() = default;

std::unique_ptr<Communicator> LocalWorld::rank(int i) {
  PARALLM_CHECK_MSG(i >= 0 && i < n_ranks_, strfmt("local rank %d of %d", i, n_ranks_));
  PARALLM_CHECK_MSG(!taken_[static_cast<size_t>(i)], strfmt("local rank %d taken twice", i));
  taken_[static_cast<size_t>(i)] = true;
  if (!world_group_) {
    std::vector<int> ranks(static_cast<size_t>(n_ranks_));
    for (int k = 0; k < n_ranks_; ++k) ranks[static_cast<size_t>(k)] = k;
    world_group_ = std::make_shared<LocalGroup>(state_, std::move(ranks));
  }
  return std::make_unique<LocalCommunicator>(world_group_, i, timeout_s_);
}

std::vector<std::unique_ptr<Communicator>> LocalWorld::take_all() {
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int i = 0; i < n_ranks_; ++i) {
    if (!taken_[static_cast<size_t>(i)]) comms.push_back(rank(i));
  }
  return comms;
}

std::vector<std::exception_ptr> run_ranks(const std::vector<std::unique_ptr<Communicator>>& comms,
                                          const std::function<void(Communicator&)>& fn) {
  std::vector<std::exception_ptr> errors(comms.size());
  auto body = [&](size_t i) {
    try {
      fn(*comms[i]);
    } catch (...) {
      errors[i] = std::current_exception();
      comms[i]->abort();
    }
  };
  if (comms.size() == 1) {
    body(0);
    return errors;
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i) threads.emplace_back(body, i);
  for (std::thread& t : threads) t.join();
  return errors;
}

void run_ranks_or_throw(const std::vector<std::unique_ptr<Communicator>>& comms,
                        const std::function<void(Communicator&)>& fn) {
  std::vector<std::exception_ptr> errors = run_ranks(comms, fn);
  // The root cause is the first error that is not a CommError (those follow from it).
  std::exception_ptr first;
  for (const std::exception_ptr& e : errors) {
    if (!e) continue;
    if (!first) first = e;
    try {
      std::rethrow_exception(e);
    } catch (const CommError&) {
    } catch (...) {
      std::rethrow_exception(e);
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace parallm
