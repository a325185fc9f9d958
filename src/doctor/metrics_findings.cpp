#include "doctor/metrics_findings.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "util/log.h"

namespace parallm::doctor {
namespace {

constexpr double kKvFull = 0.9;    // usage fraction that counts as near full
constexpr double kKvSpread = 0.2;  // max - min usage across devices that counts as uneven

std::string label_text(const MetricSample& s) {
  std::string out;
  for (const auto& [k, v] : s.labels) out += (out.empty() ? "" : ",") + k + "=\"" + v + "\"";
  return out.empty() ? s.name : s.name + "{" + out + "}";
}

std::string sample_line(const MetricSample& s) { return label_text(s) + " " + strfmt("%g", s.value); }

}  // namespace

std::vector<MetricSample> parse_metrics_text(const std::string& text) {
  std::vector<MetricSample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] == '#') continue;
    MetricSample s;
    size_t j = i;
    while (j < line.size() && line[j] != '{' && line[j] != ' ' && line[j] != '\t') ++j;
    s.name = line.substr(i, j - i);
    if (j < line.size() && line[j] == '{') {
      size_t close = line.find('}', j);
      if (close == std::string::npos) continue;
      std::string body = line.substr(j + 1, close - j - 1);
      size_t p = 0;
      while (p < body.size()) {
        size_t eq = body.find('=', p);
        if (eq == std::string::npos) break;
        std::string key = body.substr(p, eq - p);
        key.erase(0, key.find_first_not_of(" ,"));
        size_t q1 = body.find('"', eq);
        size_t q2 = q1 == std::string::npos ? std::string::npos : body.find('"', q1 + 1);
        if (q2 == std::string::npos) break;
        s.labels[key] = body.substr(q1 + 1, q2 - q1 - 1);
        p = q2 + 1;
      }
      j = close + 1;
    }
    std::string rest = line.substr(j);
    const char* begin = rest.c_str();
    char* end = nullptr;
    s.value = std::strtod(begin, &end);
    if (end == begin || s.name.empty()) continue;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Finding> metrics_findings(const std::string& text) {
  const std::vector<MetricSample> samples = parse_metrics_text(text);
  std::vector<const MetricSample*> kv, preempt, waiting, running;
  for (const auto& s : samples) {
    if (s.name == "parallm:kv_cache_usage_perc" || s.name == "vllm:kv_cache_usage_perc" ||
        s.name == "vllm:gpu_cache_usage_perc")
      kv.push_back(&s);
    else if (s.name == "parallm:num_preemptions_total" || s.name == "vllm:num_preemptions_total")
      preempt.push_back(&s);
    else if (s.name == "parallm:num_requests_waiting" || s.name == "vllm:num_requests_waiting")
      waiting.push_back(&s);
    else if (s.name == "parallm:num_requests_running" || s.name == "vllm:num_requests_running")
      running.push_back(&s);
  }
  std::vector<Finding> out;
  if (kv.empty() && preempt.empty() && waiting.empty() && running.empty()) return out;

  // parallm reports the same numbers under both prefixes; use parallm's when present.
  auto prefer = [](std::vector<const MetricSample*> v) {
    bool any_parallm = std::any_of(v.begin(), v.end(), [](auto* s) { return s->name.rfind("parallm:", 0) == 0; });
    if (any_parallm) std::erase_if(v, [](auto* s) { return s->name.rfind("parallm:", 0) != 0; });
    return v;
  };
  kv = prefer(kv);
  preempt = prefer(preempt);
  waiting = prefer(waiting);
  running = prefer(running);
  auto total = [](const std::vector<const MetricSample*>& v) {
    double t = 0;
    for (auto* s : v) t += s->value;
    return t;
  };
  const std::vector<std::string> capacity_fixes = {
      "raise KV capacity: store the KV cache as q8_0 (--kv-dtype q8_0) and raise --memory-utilization "
      "(vLLM: --kv-cache-dtype fp8, --gpu-memory-utilization)",
      "lower --max-num-seqs so fewer sequences share the pool",
      "lower --max-model-len if requests do not need the full context",
      "add replicas behind `parallm router` (or more --tp to spread the KV cache)"};

  double kv_max = 0;
  const MetricSample* kv_worst = nullptr;
  for (auto* s : kv)
    if (!kv_worst || s->value > kv_max) kv_max = s->value, kv_worst = s;
  if (kv_worst && kv_max >= kKvFull) {
    Finding f;
    f.severity = Severity::kWarning;
    f.title = strfmt("KV cache nearly full (%.0f%% used)", kv_max * 100);
    for (auto* s : kv) f.evidence.push_back(sample_line(*s));
    f.evidence.push_back(strfmt("threshold %.0f%%", kKvFull * 100));
    f.fixes = capacity_fixes;
    out.push_back(std::move(f));
  }

  const double preemptions = total(preempt);
  if (preemptions > 0) {
    Finding f;
    f.severity = Severity::kWarning;
    f.title = strfmt("%.0f sequences preempted for lack of KV blocks", preemptions);
    for (auto* s : preempt) f.evidence.push_back(sample_line(*s));
    f.fixes = capacity_fixes;
    out.push_back(std::move(f));
  }

  const double n_waiting = total(waiting), n_running = total(running);
  if (n_waiting > 0) {
    Finding f;
    f.severity = n_running > 0 ? Severity::kWarning : Severity::kInfo;
    f.title = strfmt("%.0f requests waiting while %.0f run", n_waiting, n_running);
    for (auto* s : waiting) f.evidence.push_back(sample_line(*s));
    for (auto* s : running) f.evidence.push_back(sample_line(*s));
    f.fixes = {"if running equals --max-num-seqs and the KV cache has room: raise --max-num-seqs",
               "if the KV cache is the limit: raise KV capacity (--kv-dtype q8_0, --memory-utilization)",
               "add replicas behind `parallm router`"};
    out.push_back(std::move(f));
  }

  std::vector<const MetricSample*> per_device;
  for (auto* s : kv)
    if (s->labels.count("device")) per_device.push_back(s);
  if (per_device.size() >= 2) {
    auto [lo, hi] =
        std::minmax_element(per_device.begin(), per_device.end(), [](auto* a, auto* b) { return a->value < b->value; });
    if ((*hi)->value - (*lo)->value >= kKvSpread) {
      Finding f;
      f.severity = Severity::kWarning;
      f.title = strfmt("uneven KV use across devices (%s %.0f%%, %s %.0f%%)", (*hi)->labels.at("device").c_str(),
                       (*hi)->value * 100, (*lo)->labels.at("device").c_str(), (*lo)->value * 100);
      for (auto* s : per_device) f.evidence.push_back(sample_line(*s));
      f.fixes = {"check that pipeline stages hold balanced layer counts (--pp) and that replicas get even load",
                 "route by load across replicas (`parallm router`) rather than a fixed split"};
      out.push_back(std::move(f));
    }
  }

  if (out.empty()) {
    Finding f;
    f.severity = Severity::kInfo;
    f.title = "KV cache and queue look healthy";
    for (auto* s : kv) f.evidence.push_back(sample_line(*s));
    for (auto* s : preempt) f.evidence.push_back(sample_line(*s));
    for (auto* s : waiting) f.evidence.push_back(sample_line(*s));
    for (auto* s : running) f.evidence.push_back(sample_line(*s));
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace parallm::doctor
