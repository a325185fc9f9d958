// EngineBackend: one replica (an Engine over tp × pp devices and its
// ServingEngine) as a CompletionBackend.
#pragma once
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
  EngineBackend(std::unique_ptr<Engine> engine, const ServingOptions& options, std::vector<std::string> device_names);
  ~EngineBackend() override;

  SubmitStatus submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event, uint64_t* id) override;
  void abort(uint64_t id) override;
  ServingMetrics metrics() const override;
  std::vector<DeviceStat> device_stats() const override;
  const Tokenizer& tokenizer() const override;
  int64_t max_model_len() const override;
  const Engine& engine() const { return *engine_; }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ServingEngine> serving_;
  std::vector<std::string> device_names_;
};

}  // namespace parallm
