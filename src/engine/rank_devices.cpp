#include "engine/rank_devices.h"

#include <cstdlib>
#include <string>

#include "util/check.h"

#if PARALLM_HAVE_CUDA
#include "device/cuda_device.h"
#endif

namespace parallm {

std::vector<DeviceId> rank_devices(const std::vector<DeviceId>& listed, int world, CommBackend comm) {
  std::vector<DeviceId> ids = listed;
  if (ids.empty()) {
    for (int r = 0; r < world; ++r) ids.push_back(DeviceId{DeviceId::Kind::kCpu, r});
  }
  if (static_cast<int>(ids.size()) != world) {
    throw InputError("--devices lists " + std::to_string(ids.size()) + " devices but the layout needs " +
                     std::to_string(world) + " (tp x pp)");
  }
  for (const DeviceId& id : ids) {
    if ((id.kind == DeviceId::Kind::kCpu) != (ids[0].kind == DeviceId::Kind::kCpu)) {
      throw InputError("--devices mixes CPU and GPU ranks (" + ids[0].to_string() + ", " + id.to_string() +
                       "); put every rank of a model on one kind of device");
    }
  }
  const bool cuda = ids[0].kind == DeviceId::Kind::kCuda;
  if (comm == CommBackend::kNccl) {
    if (!cuda) {
      throw InputError(
          "--comm nccl moves GPU memory: it needs CUDA devices (--devices cuda:0,cuda:1,...); "
          "CPU ranks use --comm local or mpi");
    }
    throw InputError(
        "--comm nccl for model ranks is not wired yet: GPU ranks talk through --comm local "
        "(threads, host-staged) or mpi");
  }
  if (cuda) {
#if PARALLM_HAVE_CUDA
    for (const DeviceId& id : ids) cuda::require_device(id.index);
#else
    throw InputError(ids[0].to_string() +
                     ": this parallm was built without CUDA; rebuild with -DPARALLM_CUDA=ON (docs/cuda.md), "
                     "or run on CPU devices (--devices cpu:0)");
#endif
  }
  return ids;
}

uint64_t rank_budget_bytes(const DeviceId& device, int64_t device_memory_bytes, int world, int ranks_on_device) {
  if (device_memory_bytes > 0) return static_cast<uint64_t>(device_memory_bytes);
  if (device.kind != DeviceId::Kind::kCuda) return total_system_memory_bytes() / static_cast<uint64_t>(world);
#if PARALLM_HAVE_CUDA
  return cuda::device_memory_budget_bytes(device.index) / static_cast<uint64_t>(ranks_on_device);
#else
  (void)ranks_on_device;
  return 0;  // rank_devices refused it already
#endif
}

std::vector<EngineGpu> engine_gpus(std::string* status) {
  std::vector<EngineGpu> out;
#if PARALLM_HAVE_CUDA
  try {
    const int n = cuda::device_count();
    for (int i = 0; i < n; ++i) {
      const cuda::CudaDeviceInfo d = cuda::query_device(i);
      out.push_back({"cuda:" + std::to_string(i), d.name, d.cc_major, d.cc_minor, d.n_sm, d.total_bytes, d.free_bytes});
    }
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    *status = n == 0 ? "the CUDA driver reports no device"
                     : (visible != nullptr ? std::string("CUDA_VISIBLE_DEVICES=") + visible : std::string());
  } catch (const InputError& e) {
    *status = e.what();
  }
#else
  *status = "this parallm was built without CUDA (-DPARALLM_CUDA=ON builds GPU ranks)";
#endif
  return out;
}

}  // namespace parallm
