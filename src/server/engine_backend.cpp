// EngineBackend (see engine_backend.h). Device memory in use is what each
// rank holds for good: its weight shard plus its KV pool.
#include "server/engine_backend.h"

namespace parallm {

EngineBackend::EngineBackend(std::unique_ptr<Engine> engine, const ServingOptions& options,
                             std::vector<std::string> device_names, std::function<std::string()> lost_ranks)
    : engine_(std::move(engine)), device_names_(std::move(device_names)), lost_ranks_(std::move(lost_ranks)) {
  serving_ = std::make_unique<ServingEngine>(*engine_, options);
}

EngineBackend::~EngineBackend() {
  serving_.reset();  // stops the step loop before the engine goes
  engine_.reset();
}

SubmitStatus EngineBackend::submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event,
                                   uint64_t* id) {
  return serving_->submit(std::move(request), std::move(on_event), id);
}

void EngineBackend::abort(uint64_t id) { serving_->abort(id); }

ServingMetrics EngineBackend::metrics() const { return serving_->metrics(); }

std::vector<DeviceStat> EngineBackend::device_stats() const {
  const ServingMetrics m = serving_->metrics();
  const std::vector<size_t> weights = engine_->rank_weight_bytes();
  // Ranks of other (MPI) processes are not visible here: their pools are
  // counted as this process's first, their weights as unknown.
  const std::vector<size_t> kv = engine_->rank_kv_bytes();
  std::vector<DeviceStat> out;
  for (size_t i = 0; i < device_names_.size(); ++i) {
    DeviceStat d;
    d.device = device_names_[i];
    d.kv_cache_usage = m.kv_cache_usage;
    d.memory_used_bytes =
        (i < weights.size() ? weights[i] : 0) + (i < kv.size() ? kv[i] : kv[0]) + engine_->activation_bytes_per_rank();
    out.push_back(d);
  }
  return out;
}

std::string EngineBackend::failure() const {
  std::string why = serving_->failure();
  if (why.empty() && lost_ranks_) {
    const std::string lost = lost_ranks_();
    if (!lost.empty()) why = "lost " + lost + ": its process exited";
  }
  return why;
}

const Tokenizer& EngineBackend::tokenizer() const { return engine_->tokenizer(); }

int64_t EngineBackend::max_model_len() const {
  const int64_t m = serving_->options().max_model_len;
  return m > 0 ? m : engine_->ctx_size();
}

}  // namespace parallm
