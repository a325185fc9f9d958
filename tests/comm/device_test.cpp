// Device ids, size parsing and memory accounting (src/core/device.h).
// NOTE: lives in tests/comm because that folder belongs to the comm/device work;
// it tests parallm_core only.
#include "core/device.h"

#include <gtest/gtest.h>

#include "util/check.h"

namespace parallm {

TEST(DeviceId, ParsesSingleIds) {
  EXPECT_EQ(parse_device_id("cpu:0"), (DeviceId{DeviceId::Kind::kCpu, 0}));
  EXPECT_EQ(parse_device_id("cuda:1"), (DeviceId{DeviceId::Kind::kCuda, 1}));
  EXPECT_EQ(parse_device_id(" CPU:12 "), (DeviceId{DeviceId::Kind::kCpu, 12}));
  EXPECT_EQ(parse_device_id("cuda"), (DeviceId{DeviceId::Kind::kCuda, 0}));
  EXPECT_EQ(parse_device_id("cuda:3").to_string(), "cuda:3");
  for (const char* bad : {"", "tpu:0", "cpu:", "cpu:x", "cpu:-1", "cpu:1:2", "cuda:1234567"}) {
    EXPECT_THROW(parse_device_id(bad), InputError) << bad;
  }
}

TEST(DeviceId, ParsesLists) {
  auto ids = parse_device_list("cpu:0,cpu:1, cuda:0");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], (DeviceId{DeviceId::Kind::kCpu, 1}));
  EXPECT_EQ(ids[2], (DeviceId{DeviceId::Kind::kCuda, 0}));
  EXPECT_THROW(parse_device_list("cpu:0,,cpu:1"), InputError);
  EXPECT_THROW(parse_device_list("cpu:0,cpu:0"), InputError);
  EXPECT_THROW(parse_device_list(""), InputError);
}

TEST(ParseSize, KnownValues) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("1G"), 1ull << 30);
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("1.5GB"), 3ull << 29);
  EXPECT_EQ(parse_size("800M"), 800ull << 20);
  EXPECT_EQ(parse_size("2k"), 2048u);
  EXPECT_EQ(parse_size("1 TiB"), 1ull << 40);
  EXPECT_EQ(parse_size("10B"), 10u);
  EXPECT_EQ(parse_size("0.5K"), 512u);
  for (const char* bad : {"", "G", "1.2.3G", "-1G", "1X", "1GiBs", "1.5", "99999999999T", "abc"}) {
    EXPECT_THROW(parse_size(bad), InputError) << bad;
  }
}

TEST(MemoryLedger, ChargesAndReleasesByCategory) {
  MemoryLedger ledger("cpu:0", 1000);
  ledger.charge(MemoryCategory::kWeights, 600, "layer 0");
  ledger.charge(MemoryCategory::kKvCache, 300);
  EXPECT_EQ(ledger.used_bytes(), 900u);
  EXPECT_EQ(ledger.used_bytes(MemoryCategory::kWeights), 600u);
  EXPECT_EQ(ledger.free_bytes(), 100u);
  EXPECT_TRUE(ledger.fits(100));
  EXPECT_FALSE(ledger.fits(101));
  ledger.release(MemoryCategory::kKvCache, 300);
  EXPECT_EQ(ledger.used_bytes(), 600u);
  EXPECT_EQ(ledger.peak_bytes(), 900u);
  EXPECT_EQ(ledger.breakdown(), "weights 600 B, kv_cache 0 B, activations 0 B, comm_buffers 0 B");
}

TEST(MemoryLedger, OverBudgetThrowsCapacityErrorNamingEverything) {
  MemoryLedger ledger("cpu:1", 1ull << 30);
  ledger.charge(MemoryCategory::kWeights, 512ull << 20);
  try {
    ledger.charge(MemoryCategory::kWeights, 1400ull << 20, "blk.3.ffn_up");
    FAIL() << "expected CapacityError";
  } catch (const CapacityError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cpu:1 needs 1.87 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("has 1.00 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("1.37 GiB more of weights (blk.3.ffn_up)"), std::string::npos) << m;
    EXPECT_NE(m.find("weights 512.00 MiB, kv_cache 0 B"), std::string::npos) << m;
  }
  // A failed charge charges nothing; CapacityError is an InputError (CLI exit 2).
  EXPECT_EQ(ledger.used_bytes(), 512ull << 20);
  EXPECT_THROW(ledger.charge(MemoryCategory::kActivations, 1ull << 40), InputError);
  EXPECT_THROW(ledger.charge(MemoryCategory::kActivations, ~0ull), CapacityError);
}

TEST(MemoryLedger, ReservationReleasesOnDestruction) {
  MemoryLedger ledger("cpu:0", 100);
  {
    MemoryReservation a(ledger, MemoryCategory::kCommBuffers, 60);
    MemoryReservation b = std::move(a);
    EXPECT_EQ(ledger.used_bytes(MemoryCategory::kCommBuffers), 60u);
    EXPECT_THROW(MemoryReservation(ledger, MemoryCategory::kActivations, 41), CapacityError);
  }
  EXPECT_EQ(ledger.used_bytes(), 0u);
}

TEST(Devices, DefaultBudgetSplitsRamAndThreads) {
  auto ids = parse_device_list("cpu:0,cpu:1");
  DeviceSetOptions options;
  options.total_threads = 5;
  auto devices = make_devices(ids, options);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]->memory().budget_bytes(), total_system_memory_bytes() / 2);
  EXPECT_GT(total_system_memory_bytes(), 0u);
  EXPECT_EQ(devices[1]->n_threads(), 2);
  EXPECT_EQ(devices[1]->name(), "cpu:1");

  options.memory_bytes_each = parse_size("1G");
  devices = make_devices(ids, options);
  EXPECT_EQ(devices[1]->memory().budget_bytes(), 1ull << 30);
  EXPECT_EQ(devices[1]->memory().device_name(), "cpu:1");

  // CUDA memory comes from the backend's query, or --device-memory.
  EXPECT_THROW(make_devices(parse_device_list("cuda:0"), DeviceSetOptions{}), InputError);
  DeviceSetOptions cuda;
  cuda.cuda_memory_bytes = [](int index) { return static_cast<uint64_t>(index + 1) << 30; };
  devices = make_devices(parse_device_list("cuda:0,cuda:1"), cuda);
  EXPECT_EQ(devices[1]->memory().budget_bytes(), 2ull << 30);
  EXPECT_THROW(make_devices({}, DeviceSetOptions{}), InputError);
}

}  // namespace parallm
