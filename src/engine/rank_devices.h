// Which device each world rank runs on, and its memory budget: `--devices`
// (cpu:N, cuda:N, emu:N; empty = CPU ranks), checked once for the layout.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm_factory.h"
#include "core/device.h"

namespace parallm {

// One id per world rank. InputError when the list has the wrong length,
// mixes CPU and GPU ranks, names a GPU this build or machine does not have
// (no CUDA in the build, no driver, no device, an index past the last), or
// pairs --comm nccl with ranks that are not on CUDA devices.
std::vector<DeviceId> rank_devices(const std::vector<DeviceId>& listed, int world, CommBackend comm);

// The budget of one rank on `device`: --device-memory when given; else host
// RAM / world for cpu and emu ranks, and what the GPU has free / the ranks
// that share it for cuda ranks.
uint64_t rank_budget_bytes(const DeviceId& device, int64_t device_memory_bytes, int world, int ranks_on_device);

// The GPUs `--devices cuda:N` can name, as the CUDA runtime numbers them
// (after CUDA_VISIBLE_DEVICES): what `parallm topo` lists for the engine.
struct EngineGpu {
  std::string id;  // "cuda:0"
  std::string name;
  int cc_major = 0, cc_minor = 0, n_sm = 0;
  uint64_t total_bytes = 0, free_bytes = 0;
};
// The visible GPUs; *status says why there are none, or which
// CUDA_VISIBLE_DEVICES applies ("" when unset).
std::vector<EngineGpu> engine_gpus(std::string* status);

}  // namespace parallm
