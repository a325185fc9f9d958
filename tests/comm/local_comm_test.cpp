// Every collective of the `local` backend against a reference computed on one
// thread, for n in {1, 2, 3, 4}; the byte counts against the ring formulas; split
// groups; and failures: stalled, aborted and departed ranks must turn into a
// CommError naming them, never a hang.
#include "comm/local_comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include "comm/comm_factory.h"
#include "util/check.h"

namespace parallm {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::unique_ptr<Communicator>> make_world(int n, double timeout_s = 10.0) {
  LocalWorld world(n, timeout_s);
  return world.take_all();
}

// Deterministic, not integer-valued, so that the summation order matters bitwise.
float value(int rank, size_t i) { return std::sin(static_cast<float>(rank * 7919 + static_cast<int>(i))) * 1.37f; }

class LocalCommN : public ::testing::TestWithParam<int> {};

TEST_P(LocalCommN, AllReduceSumMatchesReferenceBitwise) {
  const int n = GetParam();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    std::vector<float> reference(count);
    for (size_t i = 0; i < count; ++i) {
      float s = value(0, i);
      for (int r = 1; r < n; ++r) s += value(r, i);
      reference[i] = s;
    }
    auto comms = make_world(n);
    run_ranks_or_throw(comms, [&](Communicator& c) {
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = value(c.rank(), i);
      c.all_reduce_sum(data.data(), count);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], reference[i]) << "rank " << c.rank() << " i " << i;
    });
  }
}

TEST_P(LocalCommN, AllGatherConcatenatesByRank) {
  const int n = GetParam();
  const size_t b = 13;
  auto comms = make_world(n);
  run_ranks_or_throw(comms, [&](Communicator& c) {
    std::vector<uint8_t> send(b), recv(b * static_cast<size_t>(n), 0xff);
    for (size_t j = 0; j < b; ++j) send[j] = static_cast<uint8_t>(c.rank() * 31 + static_cast<int>(j));
    c.all_gather(send.data(), recv.data(), b);
    for (int r = 0; r < n; ++r) {
      for (size_t j = 0; j < b; ++j)
        ASSERT_EQ(recv[static_cast<size_t>(r) * b + j], static_cast<uint8_t>(r * 31 + static_cast<int>(j)));
    }
    // In place: the rank's block already sits in recv.
    std::vector<uint8_t> inplace(b * static_cast<size_t>(n), 0);
    std::memcpy(inplace.data() + static_cast<size_t>(c.rank()) * b, send.data(), b);
    c.all_gather(inplace.data() + static_cast<size_t>(c.rank()) * b, inplace.data(), b);
    ASSERT_EQ(inplace, recv);
  });
}

TEST_P(LocalCommN, ReduceScatterSumGivesEachRankItsBlock) {
  const int n = GetParam();
  const size_t c_per = 5;
  auto comms = make_world(n);
  run_ranks_or_throw(comms, [&](Communicator& c) {
    std::vector<float> send(c_per * static_cast<size_t>(n)), recv(c_per);
    for (size_t i = 0; i < send.size(); ++i) send[i] = value(c.rank(), i);
    c.reduce_scatter_sum(send.data(), recv.data(), c_per);
    for (size_t i = 0; i < c_per; ++i) {
      size_t global = static_cast<size_t>(c.rank()) * c_per + i;
      float s = value(0, global);
      for (int r = 1; r < n; ++r) s += value(r, global);
      ASSERT_EQ(recv[i], s);
    }
  });
}

// Rank r sends (r + 2p) % 4 * 3 bytes to rank p (some blocks empty), byte j = 16r + p + j.
size_t a2a_bytes(int from, int to) { return static_cast<size_t>((from + 2 * to) % 4) * 3; }

TEST_P(LocalCommN, AllToAllVWithUnevenSizes) {
  const int n = GetParam();
  auto comms = make_world(n);
  run_ranks_or_throw(comms, [&](Communicator& c) {
    const int r = c.rank();
    std::vector<size_t> sb(static_cast<size_t>(n)), so(static_cast<size_t>(n)), rb(static_cast<size_t>(n)),
        ro(static_cast<size_t>(n));
    size_t send_total = 0, recv_total = 0;
    for (int p = 0; p < n; ++p) {
      // Send blocks in reverse peer order, receive blocks with a 1-byte gap: offsets are honoured.
      sb[static_cast<size_t>(p)] = a2a_bytes(r, p);
      rb[static_cast<size_t>(p)] = a2a_bytes(p, r);
      ro[static_cast<size_t>(p)] = recv_total;
      recv_total += rb[static_cast<size_t>(p)] + 1;
    }
    for (int p = n - 1; p >= 0; --p) {
      so[static_cast<size_t>(p)] = send_total;
      send_total += sb[static_cast<size_t>(p)];
    }
    std::vector<uint8_t> send(send_total), recv(recv_total, 0xee);
    for (int p = 0; p < n; ++p) {
      for (size_t j = 0; j < sb[static_cast<size_t>(p)]; ++j)
        send[so[static_cast<size_t>(p)] + j] = static_cast<uint8_t>(16 * r + p + static_cast<int>(j));
    }
    c.all_to_all_v(send.data(), sb.data(), so.data(), recv.data(), rb.data(), ro.data());
    for (int p = 0; p < n; ++p) {
      for (size_t j = 0; j < rb[static_cast<size_t>(p)]; ++j) {
        ASSERT_EQ(recv[ro[static_cast<size_t>(p)] + j], static_cast<uint8_t>(16 * p + r + static_cast<int>(j)));
      }
      ASSERT_EQ(recv[ro[static_cast<size_t>(p)] + rb[static_cast<size_t>(p)]], 0xee);  // gap untouched
    }
    uint64_t expected = 0;
    for (int p = 0; p < n; ++p) expected += p == r ? 0 : a2a_bytes(r, p);
    EXPECT_EQ(c.stats().op(CommOp::kAllToAll).bytes_sent, expected);
  });
}

TEST_P(LocalCommN, BroadcastFromEveryRoot) {
  const int n = GetParam();
  auto comms = make_world(n);
  run_ranks_or_throw(comms, [&](Communicator& c) {
    for (int root = 0; root < n; ++root) {
      std::vector<int> data(9, c.rank() == root ? 100 + root : -1);
      c.broadcast(data.data(), data.size() * sizeof(int), root);
      for (int v : data) ASSERT_EQ(v, 100 + root);
    }
    EXPECT_EQ(c.stats().op(CommOp::kBroadcast).calls, static_cast<uint64_t>(n));
  });
}

TEST_P(LocalCommN, SendRecvRingKeepsOrder) {
  const int n = GetParam();
  auto comms = make_world(n);
  run_ranks_or_throw(comms, [&](Communicator& c) {
    const int next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
    for (int m = 0; m < 3; ++m) {
      int out[2] = {c.rank(), m};
      c.send(out, sizeof(out), next);  // buffered: cannot deadlock in a ring
    }
    for (int m = 0; m < 3; ++m) {
      int in[2] = {-1, -1};
      c.recv(in, sizeof(in), prev);
      ASSERT_EQ(in[0], prev);
      ASSERT_EQ(in[1], m);
    }
    c.barrier();
    EXPECT_EQ(c.stats().op(CommOp::kSend).bytes_sent, 3 * sizeof(int) * 2);
    EXPECT_EQ(c.stats().op(CommOp::kRecv).bytes_sent, 0u);
    EXPECT_EQ(c.stats().op(CommOp::kRecv).calls, 3u);
  });
}

TEST_P(LocalCommN, ByteCountsFollowTheRingFormulas) {
  const int n = GetParam();
  const uint64_t un = static_cast<uint64_t>(n);
  const size_t count = 1200;  // divisible by 1..4
  const uint64_t bytes = count * sizeof(float);
  auto comms = make_world(n);
  std::vector<uint64_t> uneven(static_cast<size_t>(n));
  run_ranks_or_throw(comms, [&](Communicator& c) {
    std::vector<float> x(count, 1.0f);
    c.all_reduce_sum(x.data(), count);
    c.all_reduce_sum(x.data(), count);
    // The planner's formula: 2(n-1)/n * B per all-reduce.
    EXPECT_EQ(c.stats().op(CommOp::kAllReduce).bytes_sent, 2 * (2 * (un - 1) * bytes / un));
    EXPECT_EQ(c.stats().op(CommOp::kAllReduce).calls, 2u);
    c.reset_stats();
    EXPECT_EQ(c.stats().bytes_sent(), 0u);
    c.all_reduce_sum(x.data(), 7);  // uneven chunks: per-rank counts differ, the total does not
    uneven[static_cast<size_t>(c.rank())] = c.stats().bytes_sent();
    std::vector<float> g(count * un);
    c.all_gather(x.data(), g.data(), bytes);
    EXPECT_EQ(c.stats().op(CommOp::kAllGather).bytes_sent, (un - 1) * bytes);
    c.reduce_scatter_sum(g.data(), x.data(), count);
    EXPECT_EQ(c.stats().op(CommOp::kReduceScatter).bytes_sent, (un - 1) * bytes);
    c.broadcast(x.data(), bytes, n - 1);  // chain n-1 -> 0 -> 1 ... : the last (n-2) sends nothing
    EXPECT_EQ(c.stats().op(CommOp::kBroadcast).bytes_sent, n == 1 || c.rank() == (n - 2 + n) % n ? 0 : bytes);
    c.barrier();
    EXPECT_EQ(c.stats().op(CommOp::kBarrier).bytes_sent, 0u);
    EXPECT_EQ(c.stats().calls(), 5u);
    EXPECT_GE(c.stats().seconds(), 0.0);
  });
  EXPECT_EQ(std::accumulate(uneven.begin(), uneven.end(), uint64_t{0}), 2 * (un - 1) * 7 * sizeof(float));
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocalCommN, ::testing::Values(1, 2, 3, 4));

TEST(RingFormulas, KnownValues) {
  EXPECT_EQ(ring_all_reduce_bytes(1024, 4, 4, 0), 6144u);  // 2*3/4 * 4096
  EXPECT_EQ(ring_all_reduce_bytes(1024, 2, 2, 1), 2048u);  // 2*1/2 * 2048
  EXPECT_EQ(ring_all_reduce_bytes(1024, 4, 1, 0), 0u);
  // 10 elements over 4 ranks: chunks 3,3,2,2; rank 0 skips chunks 1 and 2.
  EXPECT_EQ(ring_all_reduce_bytes(10, 1, 4, 0), 20u - 3 - 2);
  EXPECT_EQ(ring_all_reduce_bytes(10, 1, 4, 3), 20u - 3 - 3);
  EXPECT_EQ(ring_all_gather_bytes(100, 4), 300u);
  EXPECT_EQ(chain_broadcast_bytes(100, 4, 1, 2), 0u);  // chain 2 -> 3 -> 0 -> 1
  EXPECT_EQ(chain_broadcast_bytes(100, 4, 3, 2), 100u);
}

TEST(LocalComm, SplitIntoTwoByTwoGroups) {
  // 4 ranks = 2 pipeline stages x tp 2. Row groups: color = stage; column groups:
  // color = tp rank, ordered by descending key to check that key orders ranks.
  auto comms = make_world(4);
  run_ranks_or_throw(comms, [&](Communicator& c) {
    const int stage = c.rank() / 2, tp_rank = c.rank() % 2;
    std::unique_ptr<Communicator> tp = c.split(stage, tp_rank);
    std::unique_ptr<Communicator> col = c.split(tp_rank, -c.rank());
    std::unique_ptr<Communicator> none = c.split(c.rank() == 0 ? 0 : -1, 0);
    ASSERT_EQ(tp->size(), 2);
    ASSERT_EQ(tp->rank(), tp_rank);
    ASSERT_EQ(col->size(), 2);
    ASSERT_EQ(col->rank(), 1 - stage);
    ASSERT_EQ(none != nullptr, c.rank() == 0);
    float x = static_cast<float>(1 << c.rank());
    tp->all_reduce_sum(&x, 1);
    ASSERT_EQ(x, stage == 0 ? 3.0f : 12.0f);
    int mine = c.rank(), both[2];
    col->all_gather(&mine, both, sizeof(int));
    ASSERT_EQ(both[0], tp_rank + 2);  // rank with the larger world rank comes first
    ASSERT_EQ(both[1], tp_rank);
    EXPECT_EQ(tp->timeout_s(), c.timeout_s());
    EXPECT_EQ(tp->stats().op(CommOp::kAllReduce).bytes_sent, 4u);  // 2*(1)/2 * 4 bytes
    // Groups work concurrently with each other and with the parent.
    tp->barrier();
    c.barrier();
  });
}

// --- failures --------------------------------------------------------------

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const CommError& err) {
    return err.what();
  } catch (const std::exception& err) {
    return std::string("not a CommError: ") + err.what();
  }
  return "?";
}

TEST(LocalCommFailure, StalledRankIsNamedAfterTheTimeout) {
  auto comms = make_world(3, /*timeout_s=*/1.0);
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::vector<double> seconds(3);
  auto errors = run_ranks(comms, [&](Communicator& c) {
    float x = 1;
    if (c.rank() == 2) {  // stalls until the others have given up
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return release; });
    }
    Clock::time_point start = Clock::now();
    try {
      c.all_reduce_sum(&x, 1);
    } catch (...) {
      seconds[static_cast<size_t>(c.rank())] = std::chrono::duration<double>(Clock::now() - start).count();
      if (c.rank() == 1) {
        std::lock_guard<std::mutex> lock(m);
        release = true;
        cv.notify_all();
      }
      throw;
    }
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[static_cast<size_t>(r)]) << r;
    std::string msg = message_of(errors[static_cast<size_t>(r)]);
    EXPECT_NE(msg.find("all_reduce_sum on local rank " + std::to_string(r) + " of 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 2 did not arrive within 1.0 s"), std::string::npos) << msg;
    EXPECT_GE(seconds[static_cast<size_t>(r)], 0.9);
    EXPECT_LE(seconds[static_cast<size_t>(r)], 2.0);
  }
  // The late rank finds the group broken instead of waiting for ranks that left.
  ASSERT_TRUE(errors[2]);
  EXPECT_NE(message_of(errors[2]).find("failed"), std::string::npos) << message_of(errors[2]);
  EXPECT_LE(seconds[2], 0.5);
}

TEST(LocalCommFailure, RankThatThrowsMakesOthersFailFast) {
  auto comms = make_world(4, /*timeout_s=*/10.0);  // fail fast: far below the timeout
  std::vector<double> seconds(4);
  auto errors = run_ranks(comms, [&](Communicator& c) {
    if (c.rank() == 2) throw std::runtime_error("model code failed");
    Clock::time_point start = Clock::now();
    std::vector<float> x(64, 1.0f);
    try {
      c.all_reduce_sum(x.data(), x.size());
    } catch (...) {
      seconds[static_cast<size_t>(c.rank())] = std::chrono::duration<double>(Clock::now() - start).count();
      throw;
    }
  });
  for (int r : {0, 1, 3}) {
    std::string msg = message_of(errors[static_cast<size_t>(r)]);
    EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
    EXPECT_LE(seconds[static_cast<size_t>(r)], 1.0);
  }
  EXPECT_NE(message_of(errors[2]).find("model code failed"), std::string::npos);
  EXPECT_THROW(run_ranks_or_throw(make_world(2, 5.0),
                                  [](Communicator& c) {
                                    if (c.rank() == 1) throw std::logic_error("root cause");
                                    c.barrier();
                                  }),
               std::logic_error);  // the root cause, not the CommError it caused
}

TEST(LocalCommFailure, DestroyedCommunicatorIsNamed) {
  LocalWorld world(3, 10.0);
  auto c0 = world.rank(0);
  auto c1 = world.rank(1);
  world.rank(2).reset();  // rank 2's thread exits without taking part
  Clock::time_point start = Clock::now();
  std::string msg;
  std::thread t([&] {
    try {
      c1->barrier();
    } catch (const CommError&) {
    }
  });
  try {
    c0->barrier();
  } catch (const CommError& e) {
    msg = e.what();
  }
  t.join();
  EXPECT_NE(msg.find("rank 2 is gone (its communicator was destroyed)"), std::string::npos) << msg;
  EXPECT_LE(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
  // Broken after a failure.
  EXPECT_THROW(c0->barrier(), CommError);
}

TEST(LocalCommFailure, RecvFromSilentPeerTimesOut) {
  auto comms = make_world(2, 0.3);
  auto errors = run_ranks(comms, [&](Communicator& c) {
    if (c.rank() == 0) {
      int v;
      c.recv(&v, sizeof(v), 1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    }
  });
  std::string msg = message_of(errors[0]);
  EXPECT_NE(msg.find("recv on local rank 0 of 2: rank 1 did not send within 0.3 s"), std::string::npos) << msg;
  EXPECT_FALSE(errors[1]);
}

TEST(LocalCommFailure, MismatchedCountsAndSizesAreErrors) {
  auto errors = run_ranks(make_world(2, 5.0), [](Communicator& c) {
    std::vector<float> x(10);
    c.all_reduce_sum(x.data(), c.rank() == 0 ? 10 : 9);
  });
  EXPECT_NE(message_of(errors[0]).find("mismatched arguments"), std::string::npos) << message_of(errors[0]);
  EXPECT_TRUE(errors[1]);
  errors = run_ranks(make_world(2, 5.0), [](Communicator& c) {
    char buf[8] = {};
    if (c.rank() == 0) c.send(buf, 4, 1);
    if (c.rank() == 1) c.recv(buf, 8, 0);
  });
  EXPECT_NE(message_of(errors[1]).find("rank 0 sent 4 bytes, expected 8"), std::string::npos);
}

TEST(LocalCommFailure, DeadWorldRankIsNamedInSplitGroups) {
  auto comms = make_world(4, 10.0);
  auto errors = run_ranks(comms, [&](Communicator& c) {
    auto tp = c.split(c.rank() / 2, c.rank());
    if (c.rank() == 3) throw std::runtime_error("stage 1 rank died");
    float x = 1;
    tp->all_reduce_sum(&x, 1);
  });
  EXPECT_FALSE(errors[0]);
  EXPECT_FALSE(errors[1]);
  std::string msg = message_of(errors[2]);
  EXPECT_NE(msg.find("rank 1 (world rank 3) is gone"), std::string::npos) << msg;
}

TEST(CommFactory, ParsesBackendsAndBuildsLocal) {
  EXPECT_EQ(parse_comm_backend("local"), CommBackend::kLocal);
  EXPECT_THROW(parse_comm_backend("gloo"), InputError);
  if (comm_backend_compiled(CommBackend::kNccl)) {
    EXPECT_EQ(parse_comm_backend("nccl"), CommBackend::kNccl);
  } else {
    try {
      parse_comm_backend("nccl");
      FAIL();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("-DPARALLM_CUDA=ON"), std::string::npos);
    }
  }
  CommOptions options;
  options.timeout_s = 2.5;
  auto comms = make_communicators(CommBackend::kLocal, 3, options);
  ASSERT_EQ(comms.size(), 3u);
  EXPECT_EQ(comms[2]->rank(), 2);
  EXPECT_EQ(comms[2]->timeout_s(), 2.5);
  EXPECT_STREQ(comms[0]->backend_name(), "local");
  EXPECT_THROW(comms[0]->set_timeout_s(0), InputError);
  EXPECT_THROW(LocalWorld(0), InputError);
}

}  // namespace
}  // namespace parallm
