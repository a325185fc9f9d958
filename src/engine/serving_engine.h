// ServingEngine: many concurrent requests on one Engine. A background step
// loop runs   plan = scheduler.schedule(); out = executor.run(plan);
// scheduler.update(plan, out)   (STYLE.md principle 2): the scheduler and the
// KV block manager (src/sched, src/kv) are pure logic; this class is the
// executor that turns a plan into a ForwardBatch, runs Engine::forward, samples
// and reports tokens to each request's callback.
//
// Thread-safety: submit(), abort() and metrics() may be called from any thread
// (the HTTP server's). Callbacks run on the step-loop thread and must be quick
// (hand the event to the connection's queue).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/serving_api.h"

namespace parallm {

class ServingEngine {
 public:
  ServingEngine(Engine& engine, const ServingOptions& options);
  ~ServingEngine();  // stops the loop; pending requests finish with "abort"

  // Queues a request. kQueueFull: over --max-queue (the server answers 429);
  // kTooLong: prompt + max_tokens can never fit (the server answers 400).
  // On kOk, *id is set and on_event will be called until a finished event.
  SubmitStatus submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event, uint64_t* id);
  // Aborts a request (client gone): its blocks are freed; a final "abort" event follows.
  void abort(uint64_t id);

  ServingMetrics metrics() const;
  // Why this engine can no longer serve ("" while it can): a step failed in
  // communication (a lost or stalled rank), which leaves the ranks out of step.
  std::string failure() const;
  const Engine& engine() const { return engine_; }
  const ServingOptions& options() const { return options_; }

 private:
  struct Impl;
  Engine& engine_;
  ServingOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parallm
