// ReplicaSetBackend: --dp N replicas behind the built-in router
// (src/router): each request goes to the healthy replica with the fewest
// outstanding tokens; a replica whose request fails with an error is skipped
// for a cool-down. Request ids are the set's own, mapped to each replica's.
#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "router/router.h"
#include "server/completion_backend.h"

namespace parallm {

class ReplicaSetBackend : public CompletionBackend {
 public:
  explicit ReplicaSetBackend(std::vector<std::unique_ptr<CompletionBackend>> replicas,
                             const std::string& policy = "least-outstanding-tokens",
                             double unhealthy_cooldown_s = 10.0);
  ~ReplicaSetBackend() override;

  SubmitStatus submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event, uint64_t* id) override;
  void abort(uint64_t id) override;
  ServingMetrics metrics() const override;  // sums; kv usage is the mean
  std::vector<DeviceStat> device_stats() const override;
  const Tokenizer& tokenizer() const override { return replicas_[0]->tokenizer(); }
  int64_t max_model_len() const override { return replicas_[0]->max_model_len(); }
  int64_t embedding_size() const override { return replicas_[0]->embedding_size(); }
  // The first replica's failure: replicas share this process, so one failed
  // replica means the process must be restarted.
  std::string failure() const override {
    for (const auto& r : replicas_) {
      std::string why = r->failure();
      if (!why.empty()) return why;
    }
    return "";
  }
  std::vector<ReplicaLoad> loads() const { return router_.loads(); }

 private:
  struct Entry {
    int replica = 0;
    uint64_t local_id = 0;
    bool submitted = false;
  };
  std::vector<std::unique_ptr<CompletionBackend>> replicas_;
  Router router_;
  double cooldown_s_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
};

}  // namespace parallm
