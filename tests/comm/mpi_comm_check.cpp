// A small program run under `mpirun -np N` by ctest (tests/comm/CMakeLists.txt).
//   mpi_comm_check collectives   every collective vs a reference, split 2x2, byte counts
//   mpi_comm_check exit          rank 1 calls _exit(3) in the middle of a collective
//   mpi_comm_check kill          rank 1 SIGKILLs itself in the middle of a collective
//   mpi_comm_check stall         rank 1 sleeps past the others' timeout
// Failure modes must end with a non-zero exit naming the lost rank within the
// timeout (2 s here); the ctest wrapper (run_expect_failure.sh) checks both.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_factory.h"
#include "comm/mpi_comm.h"
#include "util/check.h"

namespace parallm {
namespace {

int g_failures = 0;
#define EXPECT_MPI(cond)                                                                                 \
  do {                                                                                                   \
    if (!(cond)) {                                                                                       \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s\n", mpi_world_rank(), __LINE__, #cond); \
      ++g_failures;                                                                                      \
    }                                                                                                    \
  } while (0)

float value(int rank, size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i % 997)); }

void check_collectives(Communicator& c) {
  const int n = c.size(), r = c.rank();
  const uint64_t un = static_cast<uint64_t>(n);
  // all-reduce of small integers: exact in float whatever MPI's reduction order.
  const size_t count = 1200;
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = value(r, i);
  c.all_reduce_sum(x.data(), count);
  for (size_t i = 0; i < count; ++i) {
    float s = 0;
    for (int k = 0; k < n; ++k) s += value(k, i);
    if (x[i] != s) {
      EXPECT_MPI(x[i] == s);
      break;
    }
  }
  EXPECT_MPI(c.stats().op(CommOp::kAllReduce).bytes_sent == 2 * (un - 1) * count * 4 / un);
  // all-gather, in place too
  int mine[3] = {r, r * r, -r};
  std::vector<int> all(3 * un);
  c.all_gather(mine, all.data(), sizeof(mine));
  for (int k = 0; k < n; ++k) EXPECT_MPI(all[3 * static_cast<size_t>(k) + 1] == k * k);
  std::vector<int> inplace(3 * un, 0);
  std::memcpy(&inplace[3 * static_cast<size_t>(r)], mine, sizeof(mine));
  c.all_gather(&inplace[3 * static_cast<size_t>(r)], inplace.data(), sizeof(mine));
  EXPECT_MPI(inplace == all);
  // reduce-scatter
  std::vector<float> rs_in(4 * un), rs_out(4);
  for (size_t i = 0; i < rs_in.size(); ++i) rs_in[i] = value(r, i);
  c.reduce_scatter_sum(rs_in.data(), rs_out.data(), 4);
  for (size_t i = 0; i < 4; ++i) {
    float s = 0;
    for (int k = 0; k < n; ++k) s += value(k, static_cast<size_t>(r) * 4 + i);
    EXPECT_MPI(rs_out[i] == s);
  }
  // all-to-all-v, uneven: r sends (r + 2p) % 4 + 1 bytes to p, byte = 16r + p.
  std::vector<size_t> sb(un), so(un), rb(un), ro(un);
  size_t st = 0, rt = 0;
  for (int p = 0; p < n; ++p) {
    sb[static_cast<size_t>(p)] = static_cast<size_t>((r + 2 * p) % 4 + 1);
    so[static_cast<size_t>(p)] = st;
    st += sb[static_cast<size_t>(p)];
    rb[static_cast<size_t>(p)] = static_cast<size_t>((p + 2 * r) % 4 + 1);
    ro[static_cast<size_t>(p)] = rt;
    rt += rb[static_cast<size_t>(p)];
  }
  std::vector<uint8_t> send(st), recv(rt);
  for (int p = 0; p < n; ++p) std::memset(&send[so[static_cast<size_t>(p)]], 16 * r + p, sb[static_cast<size_t>(p)]);
  c.all_to_all_v(send.data(), sb.data(), so.data(), recv.data(), rb.data(), ro.data());
  for (int p = 0; p < n; ++p) {
    for (size_t j = 0; j < rb[static_cast<size_t>(p)]; ++j)
      EXPECT_MPI(recv[ro[static_cast<size_t>(p)] + j] == 16 * p + r);
  }
  // send/recv ring, broadcast, barrier
  int token = r * 10, got = -1;
  c.send(&token, sizeof(token), (r + 1) % n);
  c.recv(&got, sizeof(got), (r + n - 1) % n);
  EXPECT_MPI(got == ((r + n - 1) % n) * 10);
  double b = r == n - 1 ? 3.25 : 0;
  c.broadcast(&b, sizeof(b), n - 1);
  EXPECT_MPI(b == 3.25);
  c.barrier();
  // split into groups of 2 (n even): tp groups within each stage
  if (n % 2 == 0) {
    auto tp = c.split(r / 2, r % 2);
    EXPECT_MPI(tp != nullptr && tp->size() == 2 && tp->rank() == r % 2);
    float v = static_cast<float>(1 << r);
    tp->all_reduce_sum(&v, 1);
    EXPECT_MPI(v == static_cast<float>(3 << (r / 2 * 2)));
    auto none = c.split(r == 0 ? 0 : -1, 0);
    EXPECT_MPI((none != nullptr) == (r == 0));
  }
  EXPECT_MPI(c.stats().op(CommOp::kBarrier).calls >= 1);
}

// Rank 1 misbehaves during its third all-reduce; the others must fail, naming it.
void check_failure(Communicator& c, const std::string& mode) {
  std::vector<float> x(256, 1.0f);
  for (int step = 0; step < 3; ++step) {
    if (c.rank() == 1 && step == 2) {
      if (mode == "exit") _exit(3);
      if (mode == "kill") raise(SIGKILL);
      if (mode == "stall") std::this_thread::sleep_for(std::chrono::seconds(30));
    }
    c.all_reduce_sum(x.data(), x.size());
  }
}

int run(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "collectives";
  CommOptions options;
  options.timeout_s = mode == "collectives" ? 20.0 : 2.0;
  auto comms = make_communicators(CommBackend::kMpi, mpi_world_size(), options);
  Communicator& c = *comms[0];
  if (mode == "collectives") {
    check_collectives(c);
    std::printf("rank %d of %d: %s (%llu bytes sent)\n", c.rank(), c.size(), g_failures ? "FAILED" : "ok",
                static_cast<unsigned long long>(c.stats().bytes_sent()));
    return g_failures ? 1 : 0;
  }
  check_failure(c, mode);
  std::printf("rank %d: no failure detected\n", c.rank());
  return 0;
}

}  // namespace
}  // namespace parallm

int main(int argc, char** argv) {
  parallm::MpiSession session(&argc, &argv);
  try {
    return parallm::run(argc, argv);
  } catch (const parallm::CommError& e) {
    std::fprintf(stderr, "parallm: error: %s\n", e.what());
    return 3;
  }
}
