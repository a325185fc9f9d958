// RankModel: one rank's model and KV cache behind the engine, on the backend
// the engine chose for the rank's device once, at load: the CPU model
// (model/llama_model.h over a KvPool and the rank's threads) or the device
// model (model/device_llama_model.h on a CUDA GPU or the emulated device).
// Both take the same ForwardBatch and block ids and hand back host logits.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"
#include "loader/model_file.h"
#include "model/forward_batch.h"
#include "model/llama_model.h"
#include "model/moe.h"
#include "model/shard.h"
#include "util/thread_pool.h"

namespace parallm {

class RankModel {
 public:
  virtual ~RankModel() = default;
  virtual const LocalShape& shape() const = 0;
  virtual size_t weight_bytes() const = 0;
  virtual const MoeStats& moe_stats() const = 0;
  virtual std::string device_name() const = 0;  // "cpu:0", "cuda:1", "emu:0"
  int64_t n_local_layers() const { return shape().layer_end - shape().layer_begin; }

  // A fresh, empty KV cache of n_blocks blocks (the old one freed first).
  virtual void make_kv_cache(int64_t n_blocks, int64_t block_size, DType dtype) = 0;
  virtual int64_t kv_blocks() const = 0;
  virtual size_t kv_bytes() const = 0;

  // Device memory the rank's activations and step inputs hold now (0 for a
  // CPU rank, whose activations are measured as host memory).
  virtual size_t device_activation_bytes() const { return 0; }

  // Host memory for a step's output (logits, then pooled rows) of at least
  // n floats, kept until the next call: page-locked for a GPU rank, so the
  // logits' copy back is a DMA the sampler can read as it lands.
  virtual float* output_buffer(size_t n) = 0;

  // As LlamaModel::forward; every pointer is host memory.
  virtual void forward(const ForwardBatch& batch, float* hidden, float* logits, ThreadPool& pool, float* pooled) = 0;
};

// The rank's model on `device` (cpu: LlamaModel; emu / cuda: DeviceLlamaModel,
// budget_bytes of device memory, 0 = what the GPU has free).
std::unique_ptr<RankModel> make_rank_model(const ModelFile& file, const ModelOptions& options, const DeviceId& device,
                                           uint64_t budget_bytes);

// The bytes the device model would upload for this rank's weights
// (q4_0 / q4_k / q6_k as f16): the capacity check runs before the upload.
size_t device_weight_bytes(const ModelFile& file, const ModelOptions& options);

}  // namespace parallm
