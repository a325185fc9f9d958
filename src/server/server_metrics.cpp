// Metrics rendering (see server_metrics.h). Names follow the issue
// (`parallm:` prefix, as vLLM's `vllm:`); bucket bounds follow vLLM's choices.
#include "server/server_metrics.h"

#include "util/log.h"

namespace parallm {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? strfmt("%g", bounds_[i]) : "+Inf";
    *out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  *out += name + "_sum " + strfmt("%.9g", sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      tpot_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0}) {}

void ServerMetrics::observe_request(double ttft_s, double e2e_s, int64_t completion_tokens) {
  if (completion_tokens > 0) ttft_.observe(ttft_s);
  if (completion_tokens > 1) tpot_.observe((e2e_s - ttft_s) / static_cast<double>(completion_tokens - 1));
  e2e_.observe(e2e_s);
}

std::string ServerMetrics::render(const ServingMetrics& m, const std::vector<DeviceStat>& devices) const {
  std::string out;
  auto gauge = [&](const char* name, const char* type, const char* help, const std::string& value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + value + "\n";
  };
  gauge("parallm:num_requests_running", "gauge", "Requests being generated.", std::to_string(m.num_requests_running));
  gauge("parallm:num_requests_waiting", "gauge", "Requests waiting to be scheduled.", std::to_string(m.num_requests_waiting));
  out += "# HELP parallm:kv_cache_usage_perc KV cache blocks in use, fraction of the pool.\n"
         "# TYPE parallm:kv_cache_usage_perc gauge\n";
  for (const auto& d : devices) out += "parallm:kv_cache_usage_perc{device=\"" + d.device + "\"} " + strfmt("%.6g", d.kv_cache_usage) + "\n";
  gauge("parallm:prefix_cache_hit_rate", "gauge", "Prompt tokens found in the prefix cache, fraction of those looked up.",
        strfmt("%.6g", m.prefix_cache_hit_rate));
  gauge("parallm:num_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
        std::to_string(m.num_preemptions_total));
  gauge("parallm:prompt_tokens_total", "counter", "Prompt tokens processed.", std::to_string(m.prompt_tokens_total));
  gauge("parallm:generation_tokens_total", "counter", "Tokens generated.", std::to_string(m.generation_tokens_total));
  out += "# HELP parallm:device_memory_used_bytes Weights, KV pool and profiled activations held on each device.\n"
         "# TYPE parallm:device_memory_used_bytes gauge\n";
  for (const auto& d : devices) out += "parallm:device_memory_used_bytes{device=\"" + d.device + "\"} " + std::to_string(d.memory_used_bytes) + "\n";
  gauge("parallm:request_success_total", "counter", "Requests answered successfully.", std::to_string(requests_ok.load()));
  gauge("parallm:request_rejected_total", "counter", "Requests answered with an error status.", std::to_string(requests_rejected.load()));
  ttft_.render("parallm:time_to_first_token_seconds", "Time from request arrival to its first token.", &out);
  tpot_.render("parallm:time_per_output_token_seconds", "Mean time between output tokens of a request.", &out);
  e2e_.render("parallm:e2e_request_latency_seconds", "Time from request arrival to its last token.", &out);
  return out;
}

}  // namespace parallm
