// Metrics rendering (see server_metrics.h). The parallm: names follow the
// issue (`parallm:` prefix, as vLLM's `vllm:`); the vllm: families are vLLM's
// V1 names, label and bucket bounds, so that its dashboards read them as is.
#include "server/server_metrics.h"

#include <algorithm>

#include "util/log.h"

namespace parallm {
namespace {

// vLLM's bounds: time to first token; inter-token latency and time per output
// token; request latencies (e2e, queue, prefill, decode).
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                         1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenGapBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                             0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestBounds = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// 1, 2, 5, 10, 20, 50, ... up to max_value (vLLM's build_1_2_5_buckets).
std::vector<double> one_two_five(int64_t max_value) {
  std::vector<double> out;
  for (double scale = 1;; scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * scale > static_cast<double>(max_value)) return out;
      out.push_back(m * scale);
    }
  }
}

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Token-count buckets until set_max_model_len() says the model's length.
constexpr int64_t kDefaultMaxModelLen = 1 << 20;

}  // namespace

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

void Histogram::set_bounds(std::vector<double> upper_bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (upper_bounds == bounds_) return;
  bounds_ = std::move(upper_bounds);
  counts_.assign(bounds_.size() + 1, 0);
  sum_ = 0;
  count_ = 0;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out,
                       const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  const std::string bucket_prefix = name + "_bucket{" + (labels.empty() ? "" : labels + ",") + "le=\"";
  const std::string plain = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? strfmt("%g", bounds_[i]) : "+Inf";
    *out += bucket_prefix + le + "\"} " + std::to_string(cum) + "\n";
  }
  *out += name + "_sum" + plain + " " + strfmt("%.9g", sum_) + "\n" + name + "_count" + plain + " " +
          std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics(const std::string& model_name)
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0}),
      tpot_(
          {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0}),
      model_label_("model_name=\"" + escape_label(model_name) + "\""),
      v_ttft_(kTtftBounds),
      v_itl_(kTokenGapBounds),
      v_tpot_(kTokenGapBounds),
      v_request_tpot_(kTokenGapBounds),
      v_e2e_(kRequestBounds),
      v_queue_(kRequestBounds),
      v_prefill_(kRequestBounds),
      v_decode_(kRequestBounds),
      v_prompt_(one_two_five(kDefaultMaxModelLen)),
      v_generation_(one_two_five(kDefaultMaxModelLen)),
      v_max_generation_(one_two_five(kDefaultMaxModelLen)),
      success_{{"stop", 0}, {"length", 0}, {"abort", 0}} {}

void ServerMetrics::set_max_model_len(int64_t max_model_len) {
  if (max_model_len < 1) return;
  v_prompt_.set_bounds(one_two_five(max_model_len));
  v_generation_.set_bounds(one_two_five(max_model_len));
  v_max_generation_.set_bounds(one_two_five(max_model_len));
}

void ServerMetrics::observe_request(double ttft_s, double e2e_s, int64_t completion_tokens) {
  if (completion_tokens > 0) ttft_.observe(ttft_s);
  if (completion_tokens > 1) tpot_.observe((e2e_s - ttft_s) / static_cast<double>(completion_tokens - 1));
  e2e_.observe(e2e_s);
}

void ServerMetrics::observe_first_token(double ttft_s) { v_ttft_.observe(ttft_s); }

void ServerMetrics::observe_token_gap(double gap_s) { v_itl_.observe(gap_s); }

void ServerMetrics::observe_delivered(const FinishedChoice& c) {
  {
    std::lock_guard<std::mutex> lock(success_mu_);
    ++success_[c.finish_reason];
  }
  v_e2e_.observe(c.e2e_s);
  v_prompt_.observe(static_cast<double>(c.prompt_tokens));
  v_generation_.observe(static_cast<double>(c.generation_tokens));
  if (c.generation_tokens > 0) {
    v_queue_.observe(c.queue_s);
    v_prefill_.observe(c.prefill_s);
    v_decode_.observe(c.decode_s);
  }
  const double tpot_s =
      c.generation_tokens > 1 ? (c.e2e_s - c.ttft_s) / static_cast<double>(c.generation_tokens - 1) : 0.0;
  if (c.generation_tokens > 1) v_tpot_.observe(tpot_s);
  // NOTE: vLLM's request_time_per_output_token records a choice of 0 or 1 token as 0 (its dashboard says so).
  v_request_tpot_.observe(tpot_s);
}

void ServerMetrics::observe_delivered_response(const std::vector<FinishedChoice>& choices) {
  if (choices.empty()) return;
  int64_t most = 0;
  for (const FinishedChoice& c : choices) most = std::max(most, c.generation_tokens);
  v_max_generation_.observe(static_cast<double>(most));
}

std::string ServerMetrics::render(const ServingMetrics& m, const std::vector<DeviceStat>& devices) const {
  std::string out;
  auto gauge = [&](const char* name, const char* type, const char* help, const std::string& value) {
    out +=
        std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + value + "\n";
  };
  gauge("parallm:num_requests_running", "gauge", "Requests being generated.", std::to_string(m.num_requests_running));
  gauge("parallm:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
        std::to_string(m.num_requests_waiting));
  out +=
      "# HELP parallm:kv_cache_usage_perc KV cache blocks in use, fraction of the pool.\n"
      "# TYPE parallm:kv_cache_usage_perc gauge\n";
  for (const auto& d : devices)
    out += "parallm:kv_cache_usage_perc{device=\"" + d.device + "\"} " + strfmt("%.6g", d.kv_cache_usage) + "\n";
  gauge("parallm:prefix_cache_hit_rate", "gauge",
        "Prompt tokens found in the prefix cache, fraction of those looked up.",
        strfmt("%.6g", m.prefix_cache_hit_rate));
  gauge("parallm:num_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
        std::to_string(m.num_preemptions_total));
  gauge("parallm:prompt_tokens_total", "counter", "Prompt tokens processed.", std::to_string(m.prompt_tokens_total));
  gauge("parallm:generation_tokens_total", "counter", "Tokens generated.", std::to_string(m.generation_tokens_total));
  out +=
      "# HELP parallm:device_memory_used_bytes Weights, KV pool and profiled activations held on each device.\n"
      "# TYPE parallm:device_memory_used_bytes gauge\n";
  for (const auto& d : devices)
    out +=
        "parallm:device_memory_used_bytes{device=\"" + d.device + "\"} " + std::to_string(d.memory_used_bytes) + "\n";
  gauge("parallm:request_success_total", "counter", "Requests answered successfully.",
        std::to_string(requests_ok.load()));
  gauge("parallm:request_rejected_total", "counter", "Requests answered with an error status.",
        std::to_string(requests_rejected.load()));
  ttft_.render("parallm:time_to_first_token_seconds", "Time from request arrival to its first token.", &out);
  tpot_.render("parallm:time_per_output_token_seconds", "Mean time between output tokens of a request.", &out);
  e2e_.render("parallm:e2e_request_latency_seconds", "Time from request arrival to its last token.", &out);
  render_vllm(m, &out);
  return out;
}

void ServerMetrics::render_vllm(const ServingMetrics& m, std::string* out) const {
  const std::string& labels = model_label_;
  auto one = [&](const char* name, const char* type, const char* help, const std::string& value) {
    *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + "{" + labels +
            "} " + value + "\n";
  };
  const std::string kv = strfmt("%.6g", m.kv_cache_usage);
  one("vllm:num_requests_running", "gauge", "Requests in the model's running batch.",
      std::to_string(m.num_requests_running));
  one("vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
      std::to_string(m.num_requests_waiting));
  one("vllm:kv_cache_usage_perc", "gauge", "KV cache blocks in use, fraction of the pool (1 = full).", kv);
  one("vllm:gpu_cache_usage_perc", "gauge", "KV cache blocks in use, fraction of the pool (1 = full); older name.", kv);
  one("vllm:num_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
      std::to_string(m.num_preemptions_total));
  one("vllm:prompt_tokens_total", "counter", "Prompt tokens processed.", std::to_string(m.prompt_tokens_total));
  one("vllm:generation_tokens_total", "counter", "Tokens generated.", std::to_string(m.generation_tokens_total));
  one("vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
      std::to_string(m.prefix_cache_queries_total));
  one("vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
      std::to_string(m.prefix_cache_hits_total));
  *out +=
      "# HELP vllm:request_success_total Finished requests whose response reached the client, by finish reason.\n"
      "# TYPE vllm:request_success_total counter\n";
  {
    std::lock_guard<std::mutex> lock(success_mu_);
    for (const auto& [reason, n] : success_) {
      *out += "vllm:request_success_total{" + labels + ",finished_reason=\"" + escape_label(reason) + "\"} " +
              std::to_string(n) + "\n";
    }
  }
  v_ttft_.render("vllm:time_to_first_token_seconds", "Time from request arrival to its first token.", out, labels);
  v_itl_.render("vllm:inter_token_latency_seconds", "Time between consecutive tokens of a request, as they arrive.",
                out, labels);
  v_tpot_.render("vllm:time_per_output_token_seconds", "Per request: (e2e - time to first token) / (tokens - 1).", out,
                 labels);
  v_request_tpot_.render("vllm:request_time_per_output_token_seconds",
                         "Per request: (e2e - time to first token) / (tokens - 1); 0 for 1 token or none.", out,
                         labels);
  v_e2e_.render("vllm:e2e_request_latency_seconds", "Time from request arrival to its last event.", out, labels);
  v_queue_.render("vllm:request_queue_time_seconds", "Time from arrival in the engine to first being scheduled.", out,
                  labels);
  v_prefill_.render("vllm:request_prefill_time_seconds", "Time from first being scheduled to the first token.", out,
                    labels);
  v_decode_.render("vllm:request_decode_time_seconds", "Time from the first token to the last.", out, labels);
  v_prompt_.render("vllm:request_prompt_tokens", "Prompt tokens of each finished request.", out, labels);
  v_generation_.render("vllm:request_generation_tokens", "Generated tokens of each finished request.", out, labels);
  v_max_generation_.render("vllm:request_max_num_generation_tokens",
                           "Most tokens generated by one choice of each response delivered whole.", out, labels);
}

}  // namespace parallm
