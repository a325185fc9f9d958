// Devices and their memory budgets.
//
// A device is where one rank's tensors live: `cpu:N` (a group of threads plus a
// memory budget carved out of host RAM), `cuda:N` (one GPU) or `emu:N` (the
// emulated GPU: the CUDA rank model on host memory, model/device_backend.h). Every allocation
// a rank makes (weight shards, KV cache, activations, communication buffers) is
// charged to its device's MemoryLedger, so that "the model does not fit" is
// detected at load time, with a message that says by how much, instead of as an
// OOM kill halfway through generation.
//
// The ledger only counts; it never allocates. Callers charge before allocating
// and release when freeing (or hold a MemoryReservation, which does both).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parallm {

struct DeviceId {
  enum class Kind { kCpu, kCuda, kEmulated };
  Kind kind = Kind::kCpu;
  int index = 0;

  std::string to_string() const;  // "cpu:0", "cuda:1", "emu:0"
  bool operator==(const DeviceId&) const = default;
};

// "cpu:0", "cuda:1", "emu:0" (also "cpu" / "cuda" for index 0). Throws InputError.
DeviceId parse_device_id(std::string_view text);
// "cpu:0,cpu:1" -> two ids. Empty items and a repeated cpu:N throw
// InputError; a GPU (or emulated one) may repeat: ranks that share it.
std::vector<DeviceId> parse_device_list(std::string_view text);

// "1G", "512MiB", "1.5GB", "800M", "4096" (bytes) -> bytes. Throws InputError.
// NOTE: K/M/G/T are binary (1024-based) with or without "i" and with or without
// "B": memory is sized in powers of two, and `--device-memory 1GB` that meant
// 10^9 would surprise anyone comparing it with `free -g` or nvidia-smi's MiB.
uint64_t parse_size(std::string_view text);

// Physical RAM of this machine in bytes (sysconf); 0 if unknown.
uint64_t total_system_memory_bytes();

enum class MemoryCategory { kWeights, kKvCache, kActivations, kCommBuffers };
constexpr int kMemoryCategoryCount = 4;
const char* memory_category_name(MemoryCategory category);  // "weights", "kv_cache", ...

// Thread-safe byte counter with a hard budget, broken down by category.
class MemoryLedger {
 public:
  MemoryLedger(std::string device_name, uint64_t budget_bytes);
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  // Adds `bytes` to `category`. Throws CapacityError (and charges nothing) when the
  // total would exceed the budget; the message names the device, what was asked for
  // (`what`, e.g. "blk.3.ffn_up shard"), the total needed, the budget, and the
  // current breakdown. Callers add advice ("try --tp 2 ...") by catching and rethrowing.
  void charge(MemoryCategory category, uint64_t bytes, std::string_view what = {});
  // Returns bytes to `category`; releasing more than was charged is a broken invariant.
  void release(MemoryCategory category, uint64_t bytes);
  bool fits(uint64_t bytes) const;

  const std::string& device_name() const { return device_name_; }
  uint64_t budget_bytes() const { return budget_bytes_; }
  uint64_t used_bytes() const;
  uint64_t used_bytes(MemoryCategory category) const;
  uint64_t free_bytes() const;
  uint64_t peak_bytes() const;  // highest used_bytes() so far
  // "weights 1.00 GiB, kv_cache 256.00 MiB, activations 0 B, comm_buffers 0 B"
  std::string breakdown() const;

 private:
  std::string breakdown_locked() const;

  const std::string device_name_;
  const uint64_t budget_bytes_;
  mutable std::mutex mutex_;
  std::array<uint64_t, kMemoryCategoryCount> used_by_category_{};
  uint64_t used_bytes_ = 0;
  uint64_t peak_bytes_ = 0;
};

// RAII charge: charges on construction (may throw CapacityError), releases on destruction.
class MemoryReservation {
 public:
  MemoryReservation() = default;
  MemoryReservation(MemoryLedger& ledger, MemoryCategory category, uint64_t bytes, std::string_view what = {});
  ~MemoryReservation();
  MemoryReservation(MemoryReservation&& other) noexcept;
  MemoryReservation& operator=(MemoryReservation&& other) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  uint64_t bytes() const { return bytes_; }
  void reset();  // releases now

 private:
  MemoryLedger* ledger_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kWeights;
  uint64_t bytes_ = 0;
};

// One device: its id, its memory ledger and (for CPU devices) its thread count.
class Device {
 public:
  Device(DeviceId id, uint64_t memory_budget_bytes, int n_threads);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceId& id() const { return id_; }
  std::string name() const { return id_.to_string(); }
  int n_threads() const { return n_threads_; }
  MemoryLedger& memory() { return memory_; }
  const MemoryLedger& memory() const { return memory_; }

 private:
  DeviceId id_;
  int n_threads_;
  MemoryLedger memory_;
};

struct DeviceSetOptions {
  // --device-memory; when absent a CPU device gets total RAM / number of CPU devices
  // and a CUDA device gets what `cuda_memory_bytes` reports.
  std::optional<uint64_t> memory_bytes_each;
  // Threads shared by all CPU devices (default_thread_count() when <= 0); each CPU
  // device gets an equal share, at least 1. CUDA devices get 1 (the host thread).
  int total_threads = 0;
  // Memory of cuda:N, supplied by the CUDA backend (core does not include CUDA).
  std::function<uint64_t(int cuda_index)> cuda_memory_bytes;
};

// Builds the devices of `--devices` (throws InputError for a CUDA device whose memory
// cannot be determined, or a budget of 0).
std::vector<std::unique_ptr<Device>> make_devices(const std::vector<DeviceId>& ids, const DeviceSetOptions& options);

}  // namespace parallm
