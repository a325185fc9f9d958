// EngineBackend: one replica (an Engine over tp × pp devices and its
// ServingEngine) as a CompletionBackend.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/serving_engine.h"
#include "server/completion_backend.h"

namespace parallm {

class EngineBackend : public CompletionBackend {
 public:
  // device_names: one per rank of the engine ("cpu:0", ...), for metrics labels.
  // lost_ranks: names ranks whose process died ("" while all live), polled
  // by failure(); e.g. lost_peer_processes under MPI.
  EngineBackend(std::unique_ptr<Engine> engine, const ServingOptions& options, std::vector<std::string> device_names,
                std::function<std::string()> lost_ranks = nullptr);
  ~EngineBackend() override;

  SubmitStatus submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event, uint64_t* id) override;
  void abort(uint64_t id) override;
  ServingMetrics metrics() const override;
  std::vector<DeviceStat> device_stats() const override;
  const Tokenizer& tokenizer() const override;
  int64_t max_model_len() const override;
  int64_t embedding_size() const override { return engine_->config().n_embd; }
  std::string failure() const override;
  const Engine& engine() const { return *engine_; }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ServingEngine> serving_;
  std::vector<std::string> device_names_;
  std::function<std::string()> lost_ranks_;
};

}  // namespace parallm
