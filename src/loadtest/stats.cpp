// Aggregation of request records; definitions in stats.h.
#include "loadtest/stats.h"

#include <algorithm>
#include <numeric>

#include "util/check.h"

namespace parallm::loadtest {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kHttp4xx:
      return "http_4xx";
    case ErrorKind::kHttp5xx:
      return "http_5xx";
    case ErrorKind::kConnection:
      return "connection";
    case ErrorKind::kDroppedStream:
      return "dropped_stream";
    case ErrorKind::kStreamError:
      return "stream_error";
    case ErrorKind::kBadResponse:
      return "bad_response";
  }
  return "unknown";
}

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Summary summarize(std::vector<double>& values) {
  Summary s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.p50 = percentile_sorted(values, 50);
  s.p90 = percentile_sorted(values, 90);
  s.p95 = percentile_sorted(values, 95);
  s.p99 = percentile_sorted(values, 99);
  return s;
}

bool meets_slo(const RequestRecord& r, const Slo& slo) {
  if (!r.ok()) return false;
  if (slo.ttft_ms > 0 && (r.first_token_s < 0 || r.ttft_ms() > slo.ttft_ms)) return false;
  if (slo.tpot_ms > 0 && r.tpot_ms() > slo.tpot_ms) return false;  // < 0 (one token): no TPOT to miss
  return true;
}

LevelResult aggregate(const LevelRun& run, const Slo& slo, int64_t concurrency, double rate) {
  LevelResult out;
  out.concurrency = concurrency;
  out.rate = rate;
  out.requests = static_cast<int64_t>(run.records.size());
  int64_t good = 0;
  int64_t chunks_all = 0;
  double decode_tokens = 0, decode_s = 0, in_flight_s = 0;
  for (const RequestRecord& r : run.records) {
    chunks_all += r.chunks_with_text;
    if (!r.ok()) {
      const size_t k = static_cast<size_t>(r.error);
      PARALLM_CHECK(k > 0 && k < out.errors.size());
      if (out.errors[k]++ == 0) out.error_sample[k] = r.error_message;
      continue;
    }
    ++out.completed;
    out.input_tokens += r.input_tokens();
    out.output_tokens += r.output_tokens();
    out.output_tokens_counted += r.chunks_with_text;
    if (r.usage_completion_tokens >= 0) ++out.usage_reported;
    if (meets_slo(r, slo)) ++good;
    if (r.first_token_s >= 0) out.ttft_samples.push_back(r.ttft_ms());
    if (r.tpot_ms() >= 0) {
      out.tpot_samples.push_back(r.tpot_ms());
      decode_tokens += static_cast<double>(r.output_tokens() - 1);
      decode_s += r.end_s - r.first_token_s;
    }
    in_flight_s += r.end_s - r.start_s;
    out.e2e_samples.push_back(r.e2e_ms());
    out.itl_samples.insert(out.itl_samples.end(), r.itl_ms.begin(), r.itl_ms.end());
  }
  out.ttft_ms = summarize(out.ttft_samples);
  out.tpot_ms = summarize(out.tpot_samples);
  out.itl_ms = summarize(out.itl_samples);
  out.e2e_ms = summarize(out.e2e_samples);
  out.duration_s = std::max(0.0, run.end_s - run.start_s);
  if (out.duration_s > 0) {
    out.requests_per_s = static_cast<double>(out.completed) / out.duration_s;
    out.input_tokens_per_s = static_cast<double>(out.input_tokens) / out.duration_s;
    out.output_tokens_per_s = static_cast<double>(out.output_tokens) / out.duration_s;
    if (decode_s > 0) out.decode_tokens_per_s = decode_tokens / decode_s * (in_flight_s / out.duration_s);
    out.goodput_requests_per_s = static_cast<double>(good) / out.duration_s;
    out.client_cpu_share = run.client_cpu_s / out.duration_s;
  }
  out.goodput = out.requests > 0 ? static_cast<double>(good) / static_cast<double>(out.requests) : 0;
  out.client_cpu_s = run.client_cpu_s;
  out.client_cpu_us_per_token = chunks_all > 0 ? run.client_cpu_s * 1e6 / static_cast<double>(chunks_all) : 0;
  out.max_in_flight = run.max_in_flight;
  out.connections_opened = run.connections_opened;
  return out;
}

std::vector<RequestDetail> request_details(const LevelRun& run) {
  std::vector<const RequestRecord*> by_issue;  // bench's records come in order of completion
  by_issue.reserve(run.records.size());
  for (const RequestRecord& r : run.records) by_issue.push_back(&r);
  std::stable_sort(by_issue.begin(), by_issue.end(),
                   [](const RequestRecord* a, const RequestRecord* b) { return a->index < b->index; });
  std::vector<RequestDetail> out;
  out.reserve(run.records.size());
  for (const RequestRecord* rp : by_issue) {
    const RequestRecord& r = *rp;
    RequestDetail d;
    d.start_s = r.start_s - run.start_s;
    d.error = r.error;
    d.input_tokens = r.input_tokens();
    d.output_tokens = r.ok() ? r.output_tokens() : r.chunks_with_text;
    if (r.ok()) {  // the latencies bench's statistics use: successful requests only
      if (r.first_token_s >= 0) d.ttft_ms = r.ttft_ms();
      d.tpot_ms = r.tpot_ms();
      d.e2e_ms = r.e2e_ms();
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace parallm::loadtest
