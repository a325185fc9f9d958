// The `nccl` backend (see nccl_comm.h).
#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string_view>
#include <thread>
#include <type_traits>

#include "comm/stream_collectives.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

using Clock = std::chrono::steady_clock;

// StreamCollectives names the stream without the CUDA headers; the handle must be the
// runtime's own type so that it passes to NCCL unchanged.
static_assert(std::is_same_v<cudaStream_t, cuda::StreamHandle>, "cuda::StreamHandle must be cudaStream_t");

namespace {

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void cuda_or_throw(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw CommError(std::string("nccl backend: ") + what + ": " + cudaGetErrorString(err));
}

// Polls a non-blocking communicator until its pending work (init, split, enqueue)
// has left ncclInProgress. Returns the final state, or ncclInProgress on timeout.
ncclResult_t poll_async(ncclComm_t comm, Clock::time_point deadline) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

class NcclCommunicator final : public Communicator, public StreamCollectives {
 public:
  NcclCommunicator(ncclComm_t comm, int device, int rank, int size, double timeout_s)
      : comm_(comm), device_(device), rank_(rank), size_(size) {
    set_timeout_s(timeout_s);
    cuda_or_throw(cudaSetDevice(device_), "cudaSetDevice");
    cuda_or_throw(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_or_throw(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
  }

  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) {
      ncclResult_t r = broken_.empty() ? ncclCommFinalize(comm_) : ncclInternalError;
      bool clean =
          (r == ncclSuccess || r == ncclInProgress) && poll_async(comm_, deadline_after(timeout_s())) == ncclSuccess;
      if (clean) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "nccl"; }

  void all_reduce_sum(float* data, size_t count) override {
    Op op(*this, CommOp::kAllReduce);
    issue(op, ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_));
    finish(op, ring_all_reduce_bytes(count, sizeof(float), size_, rank_));
  }

  // Stats: the same bytes and call count as all_reduce_sum, but the time is the enqueue
  // only: the transfer itself overlaps the caller's kernels and ends at some later
  // wait_stream(), which cannot tell the collectives' share of the stream apart.
  void all_reduce_sum_on_stream(float* data, size_t count, cuda::StreamHandle stream) override {
    Op op(*this, CommOp::kAllReduce);
    issue(op, ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream));
    // Non-blocking comms may return ncclInProgress from the enqueue; the collective is
    // only queued once the async state leaves it (a peer cannot delay this, so it is
    // quick, but it is bounded by the deadline all the same).
    wait_enqueued(op);
    record(op.op, ring_all_reduce_bytes(count, sizeof(float), size_, rank_), op.start);
  }

  // Records no stats: the collectives were counted when they were queued.
  void wait_stream(cuda::StreamHandle stream) override {
    Op op(*this, CommOp::kAllReduce);
    wait_for_stream(op, stream, "wait_stream: ");
  }

  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override {
    Op op(*this, CommOp::kAllGather);
    issue(op, ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm_, stream_));
    finish(op, ring_all_gather_bytes(bytes_per_rank, size_));
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t count_per_rank) override {
    Op op(*this, CommOp::kReduceScatter);
    issue(op, ncclReduceScatter(send, recv, count_per_rank, ncclFloat32, ncclSum, comm_, stream_));
    finish(op, ring_reduce_scatter_bytes(count_per_rank * sizeof(float), size_));
  }

  void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                    const size_t* recv_bytes, const size_t* recv_offsets) override {
    Op op(*this, CommOp::kAllToAll);
    const auto* in = static_cast<const uint8_t*>(send);
    auto* out = static_cast<uint8_t*>(recv);
    const size_t me = static_cast<size_t>(rank_);
    if (send_bytes[me] != recv_bytes[me]) fail(op, "send_bytes[rank] != recv_bytes[rank] for the self block");
    if (send_bytes[me] > 0) {
      cuda_call(op, cudaMemcpyAsync(out + recv_offsets[me], in + send_offsets[me], send_bytes[me],
                                    cudaMemcpyDeviceToDevice, stream_));
    }
    uint64_t sent = 0;
    issue(op, ncclGroupStart());
    for (int p = 0; p < size_; ++p) {
      const size_t pp = static_cast<size_t>(p);
      if (p == rank_) continue;
      if (send_bytes[pp] > 0) issue(op, ncclSend(in + send_offsets[pp], send_bytes[pp], ncclUint8, p, comm_, stream_));
      if (recv_bytes[pp] > 0) issue(op, ncclRecv(out + recv_offsets[pp], recv_bytes[pp], ncclUint8, p, comm_, stream_));
      sent += send_bytes[pp];
    }
    issue(op, ncclGroupEnd());
    finish(op, sent);
  }

  void send(const void* data, size_t bytes, int peer) override {
    Op op(*this, CommOp::kSend);
    check_peer(op, peer);
    issue(op, ncclSend(data, bytes, ncclUint8, peer, comm_, stream_));
    finish(op, bytes);
  }

  void recv(void* data, size_t bytes, int peer) override {
    Op op(*this, CommOp::kRecv);
    check_peer(op, peer);
    issue(op, ncclRecv(data, bytes, ncclUint8, peer, comm_, stream_));
    finish(op, 0);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    Op op(*this, CommOp::kBroadcast);
    check_peer(op, root);
    issue(op, ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
    finish(op, chain_broadcast_bytes(bytes, size_, rank_, root));
  }

  void barrier() override {
    Op op(*this, CommOp::kBarrier);
    issue(op, ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
    finish(op, 0);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    Op op(*this, CommOp::kBarrier);
    ncclConfig_t config = nonblocking_config();
    ncclComm_t child = nullptr;
    ncclResult_t r = ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
    if (r != ncclSuccess && r != ncclInProgress) fail(op, std::string("ncclCommSplit: ") + ncclGetErrorString(r));
    wait_enqueued(op);
    if (child == nullptr) return nullptr;
    ncclResult_t state = poll_async(child, op.deadline);
    if (state != ncclSuccess) {
      ncclCommAbort(child);
      fail(op, state == ncclInProgress ? timeout_message() : std::string("split: ") + ncclGetErrorString(state));
    }
    int child_rank = 0;
    int child_size = 0;
    ncclCommUserRank(child, &child_rank);
    ncclCommCount(child, &child_size);
    return std::make_unique<NcclCommunicator>(child, device_, child_rank, child_size, timeout_s());
  }

  void abort() override {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    broken_ = "this rank was aborted";
  }

 private:
  struct Op {
    Op(NcclCommunicator& c, CommOp kind)
        : comm(c), op(kind), start(Clock::now()), deadline(deadline_after(c.timeout_s())) {
      if (!c.broken_.empty()) {
        throw CommError(c.describe(kind) + ": communicator unusable after an earlier failure: " + c.broken_);
      }
      cuda_or_throw(cudaSetDevice(c.device_), "cudaSetDevice");
    }
    NcclCommunicator& comm;
    CommOp op;
    Clock::time_point start;
    Clock::time_point deadline;
  };

  std::string timeout_message() const {
    return strfmt(
        "no progress within %.1f s: a peer rank died or stalled (NCCL does not say which); "
        "communicator aborted",
        timeout_s());
  }

  void check_peer(const Op& op, int peer) {
    if (peer < 0 || peer >= size_) fail(op, strfmt("peer/root %d out of range", peer));
  }

  void cuda_call(const Op& op, cudaError_t err) {
    if (err != cudaSuccess) fail(op, cudaGetErrorString(err));
  }

  // A non-blocking NCCL call returns ncclInProgress while it is being enqueued.
  void issue(const Op& op, ncclResult_t r) {
    if (r != ncclSuccess && r != ncclInProgress) fail(op, describe_nccl_error(r));
  }

  void wait_enqueued(const Op& op) {
    ncclResult_t state = poll_async(comm_, op.deadline);
    if (state == ncclInProgress) fail(op, timeout_message());
    if (state != ncclSuccess) fail(op, describe_nccl_error(state));
  }

  // Waits for the communicator's own stream, then records stats.
  void finish(const Op& op, uint64_t bytes_sent) {
    wait_enqueued(op);
    wait_for_stream(op, stream_, "");
    record(op.op, bytes_sent, op.start);
  }

  // Waits until `stream` is idle, watching NCCL's async error and the deadline: a
  // collective whose peer is gone never finishes, so the stream alone would hang.
  // Any failure aborts the communicator (freeing the stuck kernel) and throws
  // CommError; `context` (may be "") goes before the reason.
  void wait_for_stream(const Op& op, cudaStream_t stream, const char* context) {
    while (true) {
      cudaError_t err = cudaStreamQuery(stream);
      if (err == cudaSuccess) return;
      if (err != cudaErrorNotReady) fail(op, context + std::string(cudaGetErrorString(err)));
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) fail(op, context + describe_nccl_error(state));
      if (Clock::now() >= op.deadline) fail(op, context + timeout_message());
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  std::string describe_nccl_error(ncclResult_t r) const {
    std::string text = ncclGetErrorString(r);
    if (r == ncclRemoteError) text += " (a peer rank failed or exited)";
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    if (last != nullptr && *last != '\0') text += std::string(": ") + last;
    return text;
  }

  // Aborts the communicator (so the stuck kernel exits) and throws.
  [[noreturn]] void fail(const Op& op, const std::string& why) {
    std::string message = describe(op.op) + ": " + why;
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    broken_ = message;
    throw CommError(message);
  }

  ncclComm_t comm_;
  int device_;
  int rank_;
  int size_;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;  // [1] device memory for barrier()
  std::string broken_;
};

void check_device(int cuda_device) {
  int count = cuda_device_count();
  if (cuda_device < 0 || cuda_device >= count) {
    throw InputError(strfmt("--comm nccl: cuda:%d requested but %d CUDA device(s) found", cuda_device, count));
  }
}

// What each rank of a bootstrap tells the others before NCCL starts. Fixed size and
// trivially copyable: it travels as bytes over a host communicator.
struct RankGpu {
  int32_t device;        // the cuda:N this rank asked for
  int32_t device_count;  // CUDA devices this rank's process sees
  int32_t query_error;   // cudaError_t of the UUID query (0: uuid is valid)
  unsigned char uuid[16];
};

// Refuses, on every rank alike, a device that does not exist and two ranks on one
// GPU (NCCL rejects that in init with a less helpful message). Collective: a rank
// that threw on its own would leave its peers waiting in the bootstrap until the
// timeout, so each rank checks every rank's record and all reach the same verdict.
// The UUID, not the index, identifies the GPU: processes may see different
// CUDA_VISIBLE_DEVICES, and cuda:0 on two hosts are different GPUs.
void check_one_gpu_per_rank(Communicator& bootstrap, int cuda_device) {
  RankGpu mine{};
  mine.device = cuda_device;
  mine.device_count = cuda_device_count();
  if (cuda_device >= 0 && cuda_device < mine.device_count) {
    cudaDeviceProp prop{};
    cudaError_t err = cudaGetDeviceProperties(&prop, cuda_device);
    mine.query_error = static_cast<int32_t>(err);
    if (err == cudaSuccess) {
      std::memcpy(mine.uuid, prop.uuid.bytes, sizeof(mine.uuid));
    } else {
      cudaGetLastError();  // clear it: the verdict below reports it on every rank
    }
  }
  const int n = bootstrap.size();
  std::vector<RankGpu> all(static_cast<size_t>(n));
  bootstrap.all_gather(&mine, all.data(), sizeof(RankGpu));
  auto who = [n](int r) { return n > 1 ? strfmt("rank %d: ", r) : std::string(); };
  for (int r = 0; r < n; ++r) {
    const RankGpu& g = all[static_cast<size_t>(r)];
    if (g.device < 0 || g.device >= g.device_count) {
      throw InputError(strfmt("--comm nccl: %scuda:%d requested but %d CUDA device(s) found", who(r).c_str(), g.device,
                              g.device_count));
    }
    if (g.query_error != 0) {
      throw CommError(strfmt("nccl backend: %scudaGetDeviceProperties(cuda:%d): %s", who(r).c_str(), g.device,
                             cudaGetErrorString(static_cast<cudaError_t>(g.query_error))));
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const RankGpu& ga = all[static_cast<size_t>(a)];
      const RankGpu& gb = all[static_cast<size_t>(b)];
      if (std::memcmp(ga.uuid, gb.uuid, sizeof(ga.uuid)) != 0) continue;
      std::string where = ga.device == gb.device ? strfmt("are both on cuda:%d", ga.device)
                                                 : strfmt("are on the same GPU (cuda:%d and cuda:%d as each sees it)",
                                                          ga.device, gb.device);
      throw InputError(
          strfmt("--comm nccl needs one GPU per rank; ranks %d and %d %s (use --comm local to share a GPU through "
                 "host-staged collectives)",
                 a, b, where.c_str()));
    }
  }
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device, double timeout_s) {
  // The bootstrap moves host memory (the unique id, the GPU records); an nccl one
  // would need device pointers.
  if (std::string_view(bootstrap.backend_name()) == "nccl") {
    throw InputError("make_nccl_communicator: the bootstrap must be a host communicator (local or mpi), not nccl");
  }
  check_one_gpu_per_rank(bootstrap, cuda_device);
  cuda_or_throw(cudaSetDevice(cuda_device), "cudaSetDevice");
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) throw CommError(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  }
  bootstrap.broadcast(&id, sizeof(id), 0);
  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, bootstrap.size(), id, bootstrap.rank(), &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    throw CommError(std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r));
  }
  ncclResult_t state = poll_async(comm, deadline_after(timeout_s));
  if (state != ncclSuccess) {
    ncclCommAbort(comm);
    throw CommError(
        strfmt("nccl init on rank %d of %d: %s", bootstrap.rank(), bootstrap.size(),
               state == ncclInProgress ? "a peer did not join within the timeout" : ncclGetErrorString(state)));
  }
  return std::make_unique<NcclCommunicator>(comm, cuda_device, bootstrap.rank(), bootstrap.size(), timeout_s);
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators_in_process(int n_ranks, double timeout_s) {
  check_device(n_ranks - 1);
  ncclUniqueId id{};
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) throw CommError(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  std::vector<ncclComm_t> raw(static_cast<size_t>(n_ranks), nullptr);
  ncclConfig_t config = nonblocking_config();
  // One thread initializing several ranks must group the calls (NCCL docs, "Creating
  // a communicator with multiple devices per thread").
  ncclGroupStart();
  for (int i = 0; i < n_ranks; ++i) {
    cuda_or_throw(cudaSetDevice(i), "cudaSetDevice");
    r = ncclCommInitRankConfig(&raw[static_cast<size_t>(i)], n_ranks, id, i, &config);
    if (r != ncclSuccess && r != ncclInProgress) break;
  }
  ncclResult_t end = ncclGroupEnd();
  if ((r != ncclSuccess && r != ncclInProgress) || (end != ncclSuccess && end != ncclInProgress)) {
    for (ncclComm_t c : raw) {
      if (c != nullptr) ncclCommAbort(c);
    }
    throw CommError(std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r != ncclSuccess ? r : end));
  }
  Clock::time_point deadline = deadline_after(timeout_s);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int i = 0; i < n_ranks; ++i) {
    ncclResult_t state = poll_async(raw[static_cast<size_t>(i)], deadline);
    if (state != ncclSuccess) {
      for (ncclComm_t c : raw) ncclCommAbort(c);
      throw CommError(strfmt("nccl init of %d in-process ranks failed: %s", n_ranks,
                             state == ncclInProgress ? "timed out" : ncclGetErrorString(state)));
    }
  }
  for (int i = 0; i < n_ranks; ++i) {
    comms.push_back(std::make_unique<NcclCommunicator>(raw[static_cast<size_t>(i)], i, i, n_ranks, timeout_s));
  }
  return comms;
}

}  // namespace parallm
