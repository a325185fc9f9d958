// Prometheus text exposition (format 0.0.4) for GET /metrics, in two sets of
// families side by side:
//  - parallm's own (`parallm:`): the engine's gauges and counters
//    (ServingMetrics, DeviceStat, with a `device` label where per device) and
//    the request latency histograms the server measures itself;
//  - vLLM's names and labels (`vllm:`, each series with model_name="<served
//    model name>"), so that dashboards and alerts written for vLLM work here:
//    the same gauges and counters (replica-wide, not per device), per-token
//    histograms (time to first token, inter-token latency) observed as tokens
//    arrive, per-request histograms and request_success_total{finished_reason}
//    observed for each choice of a response that reached its client.
// docs/server.md (Metrics) says what each family measures in parallm.
#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/completion_backend.h"

namespace parallm {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // New bounds (the counts start again; nothing changes when they are the same).
  void set_bounds(std::vector<double> upper_bounds);
  // labels: "" or `k="v",...` without braces; `le` is added to the buckets.
  void render(const std::string& name, const std::string& help, std::string* out, const std::string& labels = "") const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// One choice (one engine request) once it has finished, as the server saw it.
struct FinishedChoice {
  std::string finish_reason;  // the engine's: "stop" | "length" | "abort" | ... (a parsed tool call is "stop")
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  double e2e_s = 0;      // arrival -> its final event
  double ttft_s = 0;     // arrival -> its first token (with generation_tokens > 0)
  double queue_s = 0;    // the engine's, on the first token's event: submit -> first scheduled
  double prefill_s = 0;  // first scheduled -> the step that sampled the first token
  double decode_s = 0;   // first token -> last token, as they arrived
};

class ServerMetrics {
 public:
  explicit ServerMetrics(const std::string& model_name = "");
  // vLLM's token-count buckets (1, 2, 5, 10, 20, 50, ...) stop at the model
  // length: set once the backend is known, before requests are served.
  void set_max_model_len(int64_t max_model_len);

  // parallm: histograms, for each choice that ended without error or abort.
  void observe_request(double ttft_s, double e2e_s, int64_t completion_tokens);
  // vllm: per-token histograms, as tokens arrive (whatever becomes of the request).
  void observe_first_token(double ttft_s);
  void observe_token_gap(double gap_s);
  // vllm: per-request histograms and request_success_total, for each choice
  // of a response delivered whole.
  void observe_delivered(const FinishedChoice& c);
  // vllm:request_max_num_generation_tokens: once per response delivered whole,
  // the most tokens any of its choices generated (vLLM's per sequence group).
  void observe_delivered_response(const std::vector<FinishedChoice>& choices);

  std::atomic<uint64_t> requests_ok{0}, requests_rejected{0};
  std::string render(const ServingMetrics& m, const std::vector<DeviceStat>& devices) const;

 private:
  void render_vllm(const ServingMetrics& m, std::string* out) const;

  Histogram ttft_, tpot_, e2e_;    // parallm:
  const std::string model_label_;  // model_name="..." (escaped)
  Histogram v_ttft_, v_itl_, v_tpot_, v_request_tpot_, v_e2e_, v_queue_, v_prefill_, v_decode_, v_prompt_,
      v_generation_, v_max_generation_;
  mutable std::mutex success_mu_;
  std::map<std::string, uint64_t> success_;  // by finish reason; stop, length and abort from the start
};

}  // namespace parallm
