// ReplicaSetBackend (see replica_set_backend.h). Outstanding tokens of a
// request: its prompt until the first token arrives (prefill done), then the
// tokens it may still generate; whatever is left is returned when it ends.
#include "server/replica_set_backend.h"

#include <chrono>

#include "util/check.h"

namespace parallm {
namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

ReplicaSetBackend::ReplicaSetBackend(std::vector<std::unique_ptr<CompletionBackend>> replicas,
                                     const std::string& policy, double unhealthy_cooldown_s)
    : replicas_(std::move(replicas)),
      router_(static_cast<int>(replicas_.size()), make_routing_policy(policy)),
      cooldown_s_(unhealthy_cooldown_s) {
  PARALLM_CHECK(!replicas_.empty());
}

ReplicaSetBackend::~ReplicaSetBackend() = default;

SubmitStatus ReplicaSetBackend::submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event,
                                       uint64_t* id) {
  router_.refresh_health(now_s());
  const int64_t n_prompt = static_cast<int64_t>(request.prompt.size());
  const int64_t charge = n_prompt + request.max_tokens;
  const int r = router_.route(charge);
  uint64_t gid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gid = next_id_++;
    entries_[gid] = Entry{r, 0, false};
  }
  // Per-request charge left, touched only on the replica's step thread.
  auto left = std::make_shared<int64_t>(charge);
  auto wrapped = [this, r, gid, n_prompt, left, on_event](const TokenEvent& e) {
    if (e.token >= 0) {
      const int64_t done = (e.completion_tokens <= 1 ? n_prompt : 0) + 1;
      router_.progress(r, std::min(done, *left));
      *left -= std::min(done, *left);
    }
    if (e.finished) {
      router_.finish(r, *left);
      *left = 0;
      if (e.finish_reason == "error") router_.mark_unhealthy(r, now_s(), cooldown_s_);
      std::lock_guard<std::mutex> lock(mu_);
      entries_.erase(gid);
    }
    on_event(e);
  };
  uint64_t local = 0;
  const SubmitStatus st = replicas_[static_cast<size_t>(r)]->submit(std::move(request), wrapped, &local);
  std::lock_guard<std::mutex> lock(mu_);
  if (st != SubmitStatus::kOk) {
    entries_.erase(gid);
    router_.finish(r, charge);
    return st;
  }
  auto it = entries_.find(gid);
  if (it != entries_.end()) {
    it->second.local_id = local;
    it->second.submitted = true;
  }
  *id = gid;
  return st;
}

void ReplicaSetBackend::abort(uint64_t id) {
  int r = -1;
  uint64_t local = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || !it->second.submitted) return;
    r = it->second.replica;
    local = it->second.local_id;
  }
  replicas_[static_cast<size_t>(r)]->abort(local);
}

ServingMetrics ReplicaSetBackend::metrics() const {
  ServingMetrics sum;
  for (const auto& rep : replicas_) {
    const ServingMetrics m = rep->metrics();
    sum.num_requests_running += m.num_requests_running;
    sum.num_requests_waiting += m.num_requests_waiting;
    sum.kv_cache_usage += m.kv_cache_usage / static_cast<double>(replicas_.size());
    sum.prefix_cache_hit_rate += m.prefix_cache_hit_rate / static_cast<double>(replicas_.size());
    sum.num_preemptions_total += m.num_preemptions_total;
    sum.prefix_cache_queries_total += m.prefix_cache_queries_total;
    sum.prefix_cache_hits_total += m.prefix_cache_hits_total;
    sum.prompt_tokens_total += m.prompt_tokens_total;
    sum.generation_tokens_total += m.generation_tokens_total;
    sum.kv_blocks_total += m.kv_blocks_total;
    sum.kv_blocks_free += m.kv_blocks_free;
  }
  return sum;
}

std::vector<DeviceStat> ReplicaSetBackend::device_stats() const {
  std::vector<DeviceStat> out;
  for (const auto& rep : replicas_) {
    for (auto& d : rep->device_stats()) out.push_back(d);
  }
  return out;
}

}  // namespace parallm
