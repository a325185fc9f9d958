#include "engine/rank_model.h"

#include "kernels/cuda/linear.h"
#include "model/device_llama_model.h"
#include "model/weight_plan.h"

namespace parallm {

namespace {

class CpuRankModel final : public RankModel {
 public:
  CpuRankModel(const ModelFile& file, const ModelOptions& options, const DeviceId& id)
      : model_(file, options), device_(id.to_string()) {}
  const LocalShape& shape() const override { return model_.shape(); }
  size_t weight_bytes() const override { return model_.weight_bytes(); }
  const MoeStats& moe_stats() const override { return model_.moe_stats(); }
  std::string device_name() const override { return device_; }
  void make_kv_cache(int64_t n_blocks, int64_t block_size, DType dtype) override {
    kv_.reset();  // the old pool's memory goes first
    const ModelConfig& c = model_.config();
    kv_ = std::make_unique<KvPool>(model_.n_local_layers(), n_blocks, block_size, model_.shape().n_kv_head_local,
                                   c.kv_row_dim(), dtype, c.kv_values_in_keys());
  }
  float* output_buffer(size_t n) override {
    if (output_.size() < n) output_.resize(n);
    return output_.data();
  }
  int64_t kv_blocks() const override { return kv_->n_blocks(); }
  size_t kv_bytes() const override { return kv_->bytes(); }
  void forward(const ForwardBatch& batch, float* hidden, float* logits, ThreadPool& pool, float* pooled) override {
    model_.forward(batch, *kv_, hidden, logits, pool, pooled);
  }

 private:
  LlamaModel model_;
  std::unique_ptr<KvPool> kv_;
  std::string device_;
  std::vector<float> output_;
};

class DeviceRankModel final : public RankModel {
 public:
  DeviceRankModel(const ModelFile& file, const ModelOptions& options, std::unique_ptr<DeviceBackend> backend)
      : backend_(std::move(backend)), model_(file, options, *backend_) {}
  const LocalShape& shape() const override { return model_.shape(); }
  size_t weight_bytes() const override { return model_.weight_bytes(); }
  const MoeStats& moe_stats() const override { return model_.moe_stats(); }
  std::string device_name() const override { return backend_->name(); }
  void make_kv_cache(int64_t n_blocks, int64_t block_size, DType dtype) override {
    model_.make_kv_cache(n_blocks, block_size, dtype);
  }
  int64_t kv_blocks() const override { return model_.kv_blocks(); }
  size_t kv_bytes() const override { return model_.kv_bytes(); }
  float* output_buffer(size_t n) override {
    if (output_bytes_ < n * sizeof(float)) {
      backend_->make_current();
      if (output_ != nullptr) backend_->release_host(output_, output_bytes_);
      output_ = nullptr;
      output_bytes_ = 0;
      output_ = static_cast<float*>(backend_->allocate_host(n * sizeof(float), "logits"));
      output_bytes_ = n * sizeof(float);
    }
    return output_;
  }
  ~DeviceRankModel() override {
    if (output_ != nullptr) backend_->release_host(output_, output_bytes_);
  }
  size_t device_activation_bytes() const override {
    return backend_->ledger().used_bytes(MemoryCategory::kActivations);
  }
  void forward(const ForwardBatch& batch, float* hidden, float* logits, ThreadPool& /*pool*/, float* pooled) override {
    model_.forward(batch, hidden, logits, pooled);
  }

 private:
  std::unique_ptr<DeviceBackend> backend_;  // outlives the model's buffers
  DeviceLlamaModel model_;
  float* output_ = nullptr;  // pinned host memory of the backend
  size_t output_bytes_ = 0;
};

size_t piece_bytes(const MatrixPiece& p) {
  if (!p.present()) return 0;
  const DType t = cuda::linear_dtype_supported(p.dtype) ? p.dtype : DType::kF16;
  return dtype_row_bytes(t, p.n_in()) * static_cast<size_t>(p.n_out()) +
         (p.bias != nullptr ? static_cast<size_t>(p.n_out()) * 4 : 0);
}

}  // namespace

size_t device_weight_bytes(const ModelFile& file, const ModelOptions& options) {
  const ModelConfig& c = file.config;
  const LocalShape s = local_shape(c, options.shard);
  const WeightPlan plan = plan_weights(file, s, options.shard);
  size_t total = 0;
  for (const LayerPlan& lp : plan.layers) {
    for (const MatrixPiece* p : {&lp.wq, &lp.wk, &lp.wv, &lp.wo, &lp.w_gate, &lp.w_up, &lp.w_down, &lp.router}) {
      total += piece_bytes(*p);
    }
    for (const auto* v : {&lp.expert_gate, &lp.expert_up, &lp.expert_down}) {
      for (const MatrixPiece& p : *v) total += piece_bytes(p);
    }
    total += static_cast<size_t>(4 * (2 * c.n_embd + 2 * c.head_dim + c.n_expert));  // norms, router bias
  }
  if (plan.token_embd != nullptr) {
    const WeightTensor& e = *plan.token_embd;
    total += piece_bytes(MatrixPiece{e.data, e.dtype, e.row_bytes(), 0, e.rows(), 0, e.cols(), e.name, nullptr});
  }
  if (plan.output.present() && (plan.token_embd == nullptr || plan.output.data != plan.token_embd->data)) {
    total += piece_bytes(plan.output);
  }
  return total;
}

std::unique_ptr<RankModel> make_rank_model(const ModelFile& file, const ModelOptions& options, const DeviceId& device,
                                           uint64_t budget_bytes) {
  if (device.kind == DeviceId::Kind::kCpu) return std::make_unique<CpuRankModel>(file, options, device);
  return std::make_unique<DeviceRankModel>(file, options, make_device_backend(device, budget_bytes));
}

}  // namespace parallm
