// Prometheus text exposition for GET /metrics: the engine's gauges and
// counters (ServingMetrics, DeviceStat) plus request latency histograms that
// the server measures itself (time to first token, time per output token,
// end-to-end latency), each with _bucket{le=...}, _sum and _count.
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "server/completion_backend.h"

namespace parallm {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  void render(const std::string& name, const std::string& help, std::string* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void observe_request(double ttft_s, double e2e_s, int64_t completion_tokens);
  std::atomic<uint64_t> requests_ok{0}, requests_rejected{0};
  std::string render(const ServingMetrics& m, const std::vector<DeviceStat>& devices) const;

 private:
  Histogram ttft_, tpot_, e2e_;
};

}  // namespace parallm
