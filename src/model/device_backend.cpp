#include "model/device_backend.h"

#include <cstdlib>
#include <cstring>

#include "util/check.h"

namespace parallm {

void DeviceBackend::all_reduce_sum(Communicator& comm, float* data, size_t count) {
  if (host_memory()) {
    comm.all_reduce_sum(data, count);
    return;
  }
  if (auto* on_stream = dynamic_cast<StreamCollectives*>(&comm)) {
    on_stream->all_reduce_sum_on_stream(data, count, stream_);
    pending_ = on_stream;
    return;
  }
  // Staged through the host: the communicators (threads, MPI) move host
  // memory, and two ranks on one GPU cannot both join an NCCL group.
  if (staging_.size() < count) staging_.resize(count);
  download(staging_.data(), data, count * sizeof(float));
  comm.all_reduce_sum(staging_.data(), count);
  upload(data, staging_.data(), count * sizeof(float));
}

void DeviceBackend::wait_collectives() {
  if (pending_ == nullptr) return;
  StreamCollectives* p = pending_;
  pending_ = nullptr;
  p->wait_stream(stream_);
}

namespace {

// The emulated device: host memory, the emulated launchers, no stream.
class EmulatedBackend final : public DeviceBackend {
 public:
  EmulatedBackend(int index, uint64_t budget)
      : DeviceBackend(DeviceId{DeviceId::Kind::kEmulated, index}, budget, cuda::emulated_kernel_set()) {}

  bool host_memory() const override { return true; }
  void* allocate(size_t bytes, MemoryCategory category, const std::string& what) override {
    ledger().charge(category, bytes, what);
    // Aligned like cudaMalloc's 256 bytes, and not zeroed (as on a GPU: the
    // model zeroes what it must).
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) {
      ledger().release(category, bytes);
      throw CapacityError(name() + ": the host is out of memory for " + what);
    }
    return p;
  }
  void release(void* p, size_t bytes, MemoryCategory category) override {
    std::free(p);
    ledger().release(category, bytes);
  }
  void* allocate_host(size_t bytes, const std::string& what) override {
    return allocate(bytes, MemoryCategory::kCommBuffers, what);
  }
  void release_host(void* p, size_t bytes) override { release(p, bytes, MemoryCategory::kCommBuffers); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}
};

}  // namespace

std::unique_ptr<DeviceBackend> make_emulated_backend(int index, uint64_t budget_bytes) {
  PARALLM_CHECK(budget_bytes > 0);
  return std::make_unique<EmulatedBackend>(index, budget_bytes);
}

std::unique_ptr<DeviceBackend> make_device_backend(const DeviceId& id, uint64_t budget_bytes) {
  if (id.kind == DeviceId::Kind::kEmulated) return make_emulated_backend(id.index, budget_bytes);
  PARALLM_CHECK(id.kind == DeviceId::Kind::kCuda);
  return make_cuda_backend(id.index, budget_bytes);
}

}  // namespace parallm
