// The CUDA device backend (device_backend.h). Without CUDA in the build,
// make_cuda_backend says so.
#include "model/device_backend.h"
#include "util/check.h"

#if PARALLM_HAVE_CUDA
#include "device/cuda_buffer.h"
#include "device/cuda_device.h"
#include "device/cuda_error.h"
#include "device/cuda_stream.h"
#endif

namespace parallm {

#if PARALLM_HAVE_CUDA
namespace {

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(int index, uint64_t budget)
      : DeviceBackend(DeviceId{DeviceId::Kind::kCuda, index}, budget, cuda::cuda_kernel_set()), stream_obj_(index) {
    stream_ = stream_obj_.handle();
  }
  ~CudaBackend() override {
    try {
      stream_obj_.synchronize();
    } catch (...) {
      // A faulted stream is reported by the step that faulted.
    }
  }

  bool host_memory() const override { return false; }
  void make_current() override { cuda::set_current_device(stream_obj_.device_index()); }
  void* allocate(size_t bytes, MemoryCategory category, const std::string& what) override {
    // DeviceBuffer charges the ledger and turns a GPU out of memory into a
    // CapacityError with advice; the backend keeps it by its pointer.
    cuda::DeviceBuffer b(device(), category, bytes, what);
    void* p = b.data();
    buffers_.emplace_back(std::move(b));
    return p;
  }
  void release(void* p, size_t /*bytes*/, MemoryCategory /*category*/) override {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (buffers_[i].data() == p) {
        stream_obj_.synchronize();  // no kernel may still read it
        buffers_[i] = std::move(buffers_.back());
        buffers_.pop_back();
        return;
      }
    }
    PARALLM_CHECK_MSG(false, "CudaBackend::release: a pointer it did not allocate");
  }
  void* allocate_host(size_t bytes, const std::string& what) override {
    cuda::PinnedBuffer b(device(), MemoryCategory::kCommBuffers, bytes, what);
    void* p = b.data();
    pinned_.emplace_back(std::move(b));
    return p;
  }
  void release_host(void* p, size_t /*bytes*/) override {
    for (size_t i = 0; i < pinned_.size(); ++i) {
      if (pinned_[i].data() == p) {
        stream_obj_.synchronize();  // no copy may still target it
        pinned_[i] = std::move(pinned_.back());
        pinned_.pop_back();
        return;
      }
    }
    PARALLM_CHECK_MSG(false, "CudaBackend::release_host: a pointer it did not allocate");
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    cuda::copy_to_device(dst, src, bytes, stream_);
    // NOTE: from pageable memory; a copy returns once the source was staged,
    // so the caller may reuse it. Pinned staging for per-step inputs is a
    // later optimisation.
  }
  void download(void* dst, const void* src, size_t bytes) override {
    wait_collectives();
    cuda::copy_to_host(dst, src, bytes, stream_);
    stream_obj_.synchronize();
  }
  void zero(void* dst, size_t bytes) override { cuda::fill_bytes(dst, 0, bytes, stream_); }
  void copy(void* dst, const void* src, size_t bytes) override { cuda::copy_on_device(dst, src, bytes, stream_); }
  void synchronize() override {
    wait_collectives();
    stream_obj_.synchronize();
  }

 private:
  cuda::Stream stream_obj_;
  std::vector<cuda::DeviceBuffer> buffers_;
  std::vector<cuda::PinnedBuffer> pinned_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend(int index, uint64_t budget_bytes) {
  cuda::require_device(index);
  if (budget_bytes == 0) budget_bytes = cuda::device_memory_budget_bytes(index);
  return std::make_unique<CudaBackend>(index, budget_bytes);
}
#else
std::unique_ptr<DeviceBackend> make_cuda_backend(int index, uint64_t /*budget_bytes*/) {
  throw InputError("cuda:" + std::to_string(index) +
                   ": this parallm was built without CUDA; rebuild with -DPARALLM_CUDA=ON (docs/cuda.md), "
                   "or run on CPU devices (--devices cpu:0)");
}
#endif

}  // namespace parallm
