// CompletionBackend: what the HTTP layer needs from whatever generates tokens.
// ServingEngine is adapted to it (engine_backend.h), the --dp router combines
// several (replica_set_backend.h), and tests script one without a model. The
// request, event and metrics types are the serving engine's own
// (engine/serving_api.h, which pulls in no compute headers).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/serving_api.h"

namespace parallm {

class Tokenizer;

struct DeviceStat {
  std::string device;              // "cpu:0" (with --dp: each replica's devices)
  double kv_cache_usage = 0;       // fraction of this device's KV blocks in use
  uint64_t memory_used_bytes = 0;  // weights + KV pool
};

class CompletionBackend {
 public:
  virtual ~CompletionBackend() = default;
  // As ServingEngine::submit: on kOk, on_event runs (on another thread) until a
  // finished event.
  virtual SubmitStatus submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event,
                              uint64_t* id) = 0;
  virtual void abort(uint64_t id) = 0;
  virtual ServingMetrics metrics() const = 0;
  virtual std::vector<DeviceStat> device_stats() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual int64_t max_model_len() const = 0;
  // The size of the embeddings ServingRequest::embed returns (the model's
  // n_embd); 0 when the backend computes none (/v1/embeddings answers 400).
  virtual int64_t embedding_size() const { return 0; }
  // Why the backend can no longer generate ("" while it can): a lost rank, a
  // broken communicator. The server then answers 503 and the process exits.
  virtual std::string failure() const { return ""; }
};

}  // namespace parallm
