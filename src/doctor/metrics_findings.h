// /metrics recognisers: a KV cache near full, preemptions, a waiting queue and
// uneven KV use across devices, from parallm's or vLLM's Prometheus text.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "doctor/finding.h"

namespace parallm::doctor {

struct MetricSample {
  std::string name;                           // "parallm:kv_cache_usage_perc"
  std::map<std::string, std::string> labels;  // {"device": "cpu:0"}
  double value = 0;
};

// Parses Prometheus text exposition; comments and unparsable lines are skipped.
std::vector<MetricSample> parse_metrics_text(const std::string& text);

// Findings for one scrape; empty when no known metric is present.
std::vector<Finding> metrics_findings(const std::string& text);

}  // namespace parallm::doctor
