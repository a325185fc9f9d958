// The `mpi` backend and its watchdog (see mpi_comm.h).
#include "comm/mpi_comm.h"

#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kHostBytes = 64;
constexpr int kTag = 7;
constexpr int kQueryTag = 1;  // on the diagnosis communicator: "are you in a call?"
constexpr int kReplyTag = 2;  // "yes, in call #seq"

// Every world rank's host and pid, gathered once by init_mpi().
struct PeerTable {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::vector<std::string> hosts;  // [world rank]
  std::vector<pid_t> pids;         // [world rank]
};
PeerTable g_peers;
bool g_initialized_here = false;
bool g_finalized = false;
bool g_failed = false;  // a communicator failed: MPI_Finalize would hang

// For the SIGTERM handler: pids of the other ranks on this host (async-signal-safe data).
constexpr int kMaxLocalPeers = 256;
int g_sig_my_rank = 0;
int g_sig_count = 0;
int g_sig_ranks[kMaxLocalPeers];
pid_t g_sig_pids[kMaxLocalPeers];
struct sigaction g_old_sigterm;

// True while `pid` exists and is not a zombie (async-signal-safe).
bool process_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64] = "/proc/";
  char digits[24];
  int n = 0;
  for (long v = pid; v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  int len = 6;
  while (n > 0) path[len++] = digits[--n];
  std::memcpy(path + len, "/stat", 6);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return false;
  char buf[512];
  ssize_t got = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (got <= 0) return false;
  buf[got] = '\0';
  const char* paren = std::strrchr(buf, ')');  // "pid (comm) S ..."
  if (paren == nullptr || paren[1] == '\0') return true;
  char state = paren[2];
  return state != 'Z' && state != 'X' && state != 'x';
}

void append_int(char* out, size_t* len, long v) {
  char digits[24];
  int n = 0;
  if (v == 0) digits[n++] = '0';
  for (; v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  while (n > 0) out[(*len)++] = digits[--n];
}

void append_str(char* out, size_t* len, const char* s) {
  while (*s) out[(*len)++] = *s++;
}

void on_sigterm(int sig) {
  char msg[4096];
  size_t len = 0;
  append_str(msg, &len, "parallm: error: mpi rank ");
  append_int(msg, &len, g_sig_my_rank);
  append_str(msg, &len, ": terminated by the launcher");
  int lost = 0;
  for (int i = 0; i < g_sig_count && len < sizeof(msg) - 100; ++i) {
    if (process_alive(g_sig_pids[i])) continue;
    append_str(msg, &len, lost == 0 ? "; lost peer: rank " : ", rank ");
    append_int(msg, &len, g_sig_ranks[i]);
    append_str(msg, &len, " (pid ");
    append_int(msg, &len, g_sig_pids[i]);
    append_str(msg, &len, " exited)");
    ++lost;
  }
  append_str(msg, &len, "\n");
  ssize_t ignored = write(STDERR_FILENO, msg, len);
  (void)ignored;
  sigaction(SIGTERM, &g_old_sigterm, nullptr);
  raise(sig);
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

int checked_int(size_t v, const char* what) {
  PARALLM_CHECK_MSG(v <= static_cast<size_t>(INT_MAX), std::string("mpi: ") + what + " exceeds INT_MAX");
  return static_cast<int>(v);
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm`.
  MpiCommunicator(MPI_Comm comm, double timeout_s) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // group rank -> world rank, for error messages and the liveness probe
    MPI_Group group, world;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> ranks(static_cast<size_t>(size_));
    for (int i = 0; i < size_; ++i) ranks[static_cast<size_t>(i)] = i;
    world_ranks_.resize(static_cast<size_t>(size_));
    MPI_Group_translate_ranks(group, size_, ranks.data(), world, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    set_timeout_s(timeout_s);
    MPI_Comm_dup(comm_, &diag_comm_);
    MPI_Comm_set_errhandler(diag_comm_, MPI_ERRORS_RETURN);
    post_query_recv();
  }

  ~MpiCommunicator() override {
    // NOTE: freeing a communicator with requests left by a failed call could block; leak it then.
    if (!broken_.empty() || g_finalized) return;
    MPI_Cancel(&query_req_);
    MPI_Wait(&query_req_, MPI_STATUS_IGNORE);
    MPI_Comm_free(&diag_comm_);
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "mpi"; }

  void all_reduce_sum(float* data, size_t count) override {
    Op op(*this, CommOp::kAllReduce);
    MPI_Request req;
    post(op, MPI_Iallreduce(MPI_IN_PLACE, data, checked_int(count, "count"), MPI_FLOAT, MPI_SUM, comm_, &req));
    wait(op, &req, 1, -1);
    op.done(ring_all_reduce_bytes(count, sizeof(float), size_, rank_));
  }

  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override {
    Op op(*this, CommOp::kAllGather);
    int n = checked_int(bytes_per_rank, "bytes_per_rank");
    const void* in_place = static_cast<const uint8_t*>(recv) + static_cast<size_t>(rank_) * bytes_per_rank;
    MPI_Request req;
    post(op, MPI_Iallgather(send == in_place ? MPI_IN_PLACE : send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_, &req));
    wait(op, &req, 1, -1);
    op.done(ring_all_gather_bytes(bytes_per_rank, size_));
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t count_per_rank) override {
    Op op(*this, CommOp::kReduceScatter);
    MPI_Request req;
    post(op,
         MPI_Ireduce_scatter_block(send, recv, checked_int(count_per_rank, "count"), MPI_FLOAT, MPI_SUM, comm_, &req));
    wait(op, &req, 1, -1);
    op.done(ring_reduce_scatter_bytes(count_per_rank * sizeof(float), size_));
  }

  void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                    const size_t* recv_bytes, const size_t* recv_offsets) override {
    Op op(*this, CommOp::kAllToAll);
    const size_t n = static_cast<size_t>(size_);
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    uint64_t sent = 0;
    for (size_t p = 0; p < n; ++p) {
      sc[p] = checked_int(send_bytes[p], "send_bytes");
      sd[p] = checked_int(send_offsets[p], "send_offsets");
      rc[p] = checked_int(recv_bytes[p], "recv_bytes");
      rd[p] = checked_int(recv_offsets[p], "recv_offsets");
      sent += p == static_cast<size_t>(rank_) ? 0 : send_bytes[p];
    }
    MPI_Request req;
    post(op, MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, comm_, &req));
    wait(op, &req, 1, -1);
    op.done(sent);
  }

  void send(const void* data, size_t bytes, int peer) override {
    Op op(*this, CommOp::kSend);
    check_peer(op, peer);
    MPI_Request req;
    post(op, MPI_Isend(data, checked_int(bytes, "bytes"), MPI_BYTE, peer, kTag, comm_, &req));
    wait(op, &req, 1, peer);
    op.done(bytes);
  }

  void recv(void* data, size_t bytes, int peer) override {
    Op op(*this, CommOp::kRecv);
    check_peer(op, peer);
    MPI_Request req;
    // A longer message than `bytes` fails in MPI_Test (MPI_ERR_TRUNCATE); a shorter one is caught below.
    post(op, MPI_Irecv(data, checked_int(bytes, "bytes"), MPI_BYTE, peer, kTag, comm_, &req));
    MPI_Status status;
    wait(op, &req, 1, peer, &status);
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (static_cast<size_t>(got) != bytes) {
      fail(op, strfmt("%s sent %d bytes, expected %zu", name(peer).c_str(), got, bytes));
    }
    op.done(0);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    Op op(*this, CommOp::kBroadcast);
    check_peer(op, root);
    MPI_Request req;
    post(op, MPI_Ibcast(data, checked_int(bytes, "bytes"), MPI_BYTE, root, comm_, &req));
    wait(op, &req, 1, -1);
    op.done(chain_broadcast_bytes(bytes, size_, rank_, root));
  }

  void barrier() override {
    Op op(*this, CommOp::kBarrier);
    MPI_Request req;
    post(op, MPI_Ibarrier(comm_, &req));
    wait(op, &req, 1, -1);
    op.done(0);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    // NOTE: MPI_Comm_split has no non-blocking form. An all-gather with a deadline
    // first proves every rank is alive and has entered split, so the blocking call
    // that follows only waits for ranks that answered a moment ago.
    Op op(*this, CommOp::kBarrier);
    int mine[2] = {color, key};
    std::vector<int> all(2 * static_cast<size_t>(size_));
    MPI_Request req;
    post(op, MPI_Iallgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm_, &req));
    wait(op, &req, 1, -1);
    MPI_Comm child = MPI_COMM_NULL;
    int rc = MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child);
    if (rc != MPI_SUCCESS) fail(op, "MPI_Comm_split: " + mpi_error_string(rc));
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(child, timeout_s());
  }

  void abort() override {
    // NOTE: MPI cannot mark one rank dead. Exiting without MPI_Finalize (finalize_mpi
    // skips it once g_failed is set) makes mpirun terminate the other ranks.
    broken_ = "this rank was aborted";
    g_failed = true;
  }

 private:
  struct Op {
    Op(MpiCommunicator& c, CommOp kind) : comm(c), op(kind), start(Clock::now()) {
      ++c.call_seq_;
      deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.timeout_s()));
      if (!c.broken_.empty()) {
        throw CommError(c.describe(kind) + ": communicator unusable after an earlier failure: " + c.broken_);
      }
    }
    void done(uint64_t bytes_sent) { comm.record(op, bytes_sent, start); }
    MpiCommunicator& comm;
    CommOp op;
    Clock::time_point start;
    Clock::time_point deadline;
  };

  std::string name(int rank) const {
    int w = world_ranks_[static_cast<size_t>(rank)];
    return w == rank ? strfmt("rank %d", rank) : strfmt("rank %d (world rank %d)", rank, w);
  }

  void check_peer(const Op& op, int peer) {
    if (peer < 0 || peer >= size_) fail(op, strfmt("peer/root %d out of range", peer));
  }

  void post(const Op& op, int rc) {
    if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc));
  }

  // Polls the requests until done; on the deadline, names the lost or late ranks.
  // `peer` >= 0 for point-to-point calls (the only rank that can be late).
  void wait(const Op& op, MPI_Request* reqs, int n, int peer, MPI_Status* status = nullptr) {
    // NOTE: spin briefly (decode-step all-reduces finish in microseconds), then back
    // off to sleeps of up to 1 ms so that waiting ranks leave the cores to the ranks
    // still computing (oversubscribed runs, 2-core CI).
    const Clock::time_point spin_until = op.start + std::chrono::microseconds(200);
    auto sleep = std::chrono::microseconds(20);
    while (true) {
      int flag = 0;
      int rc = status != nullptr ? MPI_Test(reqs, &flag, status) : MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc));
      if (flag) return;
      serve_queries();
      Clock::time_point now = Clock::now();
      if (now >= op.deadline) fail(op, diagnose(peer));
      if (now >= spin_until) {
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
      }
    }
  }

  // Who is to blame for a timeout: lost processes on this host first.
  std::string diagnose(int peer) {
    std::string lost, unknown, alive;
    for (int k = 0; k < size_; ++k) {
      if (k == rank_ || (peer >= 0 && k != peer)) continue;
      int w = world_ranks_[static_cast<size_t>(k)];
      const bool same_host =
          w < static_cast<int>(g_peers.hosts.size()) &&
          g_peers.hosts[static_cast<size_t>(w)] == g_peers.hosts[static_cast<size_t>(g_peers.world_rank)];
      std::string label = name(k);
      if (!same_host) {
        unknown += (unknown.empty() ? "" : ", ") + label;
      } else if (!process_alive(g_peers.pids[static_cast<size_t>(w)])) {
        lost += (lost.empty() ? "" : ", ") + label +
                strfmt(" (pid %d)", static_cast<int>(g_peers.pids[static_cast<size_t>(w)]));
      } else {
        alive += (alive.empty() ? "" : ", ") + label;
      }
    }
    if (!lost.empty()) return "lost " + lost + ": its process exited";
    std::string why = strfmt("no progress within %.1f s: ", timeout_s());
    std::string silent = silent_ranks(peer);
    if (!silent.empty()) return why + silent + " did not respond (stalled outside communication, or lost)";
    if (peer >= 0) return why + name(peer) + " is in another communication call (mismatched send/recv order?)";
    why += "every rank answered from inside a call: mismatched collectives?";
    if (!unknown.empty()) why += " (on other hosts: " + unknown + ")";
    return why;
  }

  // The watchdog's query: asks every rank of the group (or just `peer`) whether it
  // is inside a call on this communicator; ranks that are answer from their polling
  // loop (serve_queries). Returns the ranks that stayed silent for the grace period.
  std::string silent_ranks(int peer) {
    const auto grace = std::chrono::duration<double>(std::min(1.0, 0.25 * timeout_s()));
    const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(grace);
    std::vector<int> asked;
    std::vector<MPI_Request> replies;
    std::vector<std::array<int, 2>> answers(static_cast<size_t>(size_));
    for (int k = 0; k < size_; ++k) {
      if (k == rank_ || (peer >= 0 && k != peer)) continue;
      MPI_Request req;
      if (MPI_Isend(&call_seq_, 1, MPI_INT, k, kQueryTag, diag_comm_, &req) == MPI_SUCCESS) MPI_Request_free(&req);
      replies.emplace_back();
      MPI_Irecv(answers[static_cast<size_t>(k)].data(), 2, MPI_INT, k, kReplyTag, diag_comm_, &replies.back());
      asked.push_back(k);
    }
    std::vector<bool> answered(asked.size(), false);
    size_t n_answered = 0;
    while (n_answered < asked.size() && Clock::now() < until) {
      serve_queries();
      for (size_t i = 0; i < asked.size(); ++i) {
        int flag = 0;
        if (!answered[i] && MPI_Test(&replies[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
          answered[i] = true;
          ++n_answered;
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::string silent;
    for (size_t i = 0; i < asked.size(); ++i) {
      if (!answered[i]) silent += (silent.empty() ? "" : ", ") + name(asked[i]);
    }
    return silent;
  }

  void post_query_recv() { MPI_Irecv(&query_, 1, MPI_INT, MPI_ANY_SOURCE, kQueryTag, diag_comm_, &query_req_); }

  // Answers the watchdog queries of peers that are timing out, while this rank waits.
  void serve_queries() {
    while (true) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Test(&query_req_, &flag, &status) != MPI_SUCCESS || !flag) return;
      reply_[0] = call_seq_;
      reply_[1] = 1;
      MPI_Request req;
      if (MPI_Isend(reply_, 2, MPI_INT, status.MPI_SOURCE, kReplyTag, diag_comm_, &req) == MPI_SUCCESS) {
        MPI_Request_free(&req);
      }
      post_query_recv();
    }
  }

  [[noreturn]] void fail(const Op& op, const std::string& why) {
    std::string message = describe(op.op) + ": " + why;
    broken_ = message;
    g_failed = true;
    throw CommError(message);
  }

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;  // [rank] -> MPI_COMM_WORLD rank
  std::string broken_;
  // Watchdog: a duplicate communicator on which waiting ranks answer "are you in a call?".
  MPI_Comm diag_comm_ = MPI_COMM_NULL;
  MPI_Request query_req_ = MPI_REQUEST_NULL;
  int query_ = 0;
  int reply_[2] = {0, 0};
  int call_seq_ = 0;  // calls started on this communicator
};

}  // namespace

void init_mpi(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) throw CommError("MPI_Init_thread failed: " + mpi_error_string(rc));
    g_initialized_here = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  PeerTable& t = g_peers;
  MPI_Comm_rank(MPI_COMM_WORLD, &t.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &t.world_size);
  char host[kHostBytes] = {};
  gethostname(host, kHostBytes - 1);
  std::vector<char> hosts(static_cast<size_t>(t.world_size) * kHostBytes);
  std::vector<int> pids(static_cast<size_t>(t.world_size));
  int pid = static_cast<int>(getpid());
  MPI_Allgather(host, kHostBytes, MPI_CHAR, hosts.data(), kHostBytes, MPI_CHAR, MPI_COMM_WORLD);
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  t.hosts.clear();
  t.pids.clear();
  t.local_rank = 0;
  g_sig_my_rank = t.world_rank;
  g_sig_count = 0;
  for (int w = 0; w < t.world_size; ++w) {
    t.hosts.emplace_back(&hosts[static_cast<size_t>(w) * kHostBytes]);
    t.pids.push_back(static_cast<pid_t>(pids[static_cast<size_t>(w)]));
    const bool same_host = t.hosts.back() == host;
    if (same_host && w < t.world_rank) ++t.local_rank;
    if (same_host && w != t.world_rank && g_sig_count < kMaxLocalPeers) {
      g_sig_ranks[g_sig_count] = w;
      g_sig_pids[g_sig_count] = t.pids.back();
      ++g_sig_count;
    }
  }
  struct sigaction action = {};
  action.sa_handler = on_sigterm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &g_old_sigterm);
}

void finalize_mpi() {
  if (g_finalized || !mpi_initialized()) return;
  g_finalized = true;
  if (g_failed) return;  // MPI_Finalize would wait for the lost peer
  if (g_initialized_here) MPI_Finalize();
}

bool mpi_initialized() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int mpi_launched_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  }
  return 0;
}

std::string mpi_lost_local_peers() {
  std::string lost;
  for (int i = 0; i < g_sig_count; ++i) {
    if (process_alive(g_sig_pids[i])) continue;
    lost += (lost.empty() ? "" : ", ") + strfmt("rank %d (pid %d)", g_sig_ranks[i], static_cast<int>(g_sig_pids[i]));
  }
  return lost;
}

int mpi_world_rank() { return g_peers.world_rank; }
int mpi_world_size() { return g_peers.world_size; }
int mpi_local_rank() { return g_peers.local_rank; }

std::unique_ptr<Communicator> make_mpi_world(double timeout_s) {
  if (!mpi_initialized()) throw InputError("--comm mpi: MPI is not initialized (call init_mpi first)");
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return std::make_unique<MpiCommunicator>(comm, timeout_s);
}

}  // namespace parallm
