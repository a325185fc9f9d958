// Parsers and cross-field validation for BenchOptions (see bench_options.h).
#include "loadtest/bench_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "util/check.h"

namespace parallm::loadtest {
namespace {

int64_t parse_int(const std::string& text, const std::string& flag, const std::string& whole) {
  if (text.empty()) throw InputError(flag + " '" + whole + "': empty number");
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno != 0) throw InputError(flag + " '" + whole + "': '" + text + "' is not an integer");
  return v;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t pos = text.find(sep, begin);
    parts.push_back(text.substr(begin, pos - begin));
    if (pos == std::string::npos) break;
    begin = pos + 1;
  }
  return parts;
}

}  // namespace

IntRange parse_int_range(const std::string& text, const std::string& flag) {
  const auto parts = split(text, ':');
  if (parts.size() > 2) throw InputError(flag + " '" + text + "': expected N or MIN:MAX");
  IntRange r;
  r.min = parse_int(parts[0], flag, text);
  r.max = parts.size() == 2 ? parse_int(parts[1], flag, text) : r.min;
  if (r.min < 1) throw InputError(flag + " '" + text + "': lengths must be at least 1");
  if (r.min > r.max) {
    throw InputError(flag + " '" + text + "': MIN must not exceed MAX (did you mean " + std::to_string(r.max) + ":" +
                     std::to_string(r.min) + "?)");
  }
  if (r.max > 10'000'000) throw InputError(flag + " '" + text + "': length is implausibly large");
  return r;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> values;
  for (const auto& part : split(text, ',')) {
    const int64_t v = parse_int(part, flag, text);
    if (v < 1) throw InputError(flag + " '" + text + "': values must be positive");
    if (v > 100000) throw InputError(flag + " '" + text + "': " + part + " is too many concurrent streams");
    values.push_back(v);
  }
  return values;
}

std::vector<double> parse_rate_list(const std::string& text) {
  if (text == "inf") return {};
  std::vector<double> values;
  for (const auto& part : split(text, ',')) {
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !std::isfinite(v) || v <= 0) {
      throw InputError("--rate '" + text + "': expected 'inf' or positive requests per second, e.g. 2,4.5");
    }
    values.push_back(v);
  }
  return values;
}

Endpoint parse_endpoint(const std::string& text) {
  if (text == "chat") return Endpoint::kChat;
  if (text == "completions") return Endpoint::kCompletions;
  throw InputError("--endpoint '" + text + "': unknown endpoint; use chat or completions");
}

const char* endpoint_name(Endpoint endpoint) { return endpoint == Endpoint::kChat ? "chat" : "completions"; }

void validate_options(BenchOptions& o) {
  if (o.num_requests < 0) throw InputError("--num-requests must be positive");
  if (o.duration_s < 0 || !std::isfinite(o.duration_s)) throw InputError("--duration must be positive seconds");
  if (o.num_requests == 0 && o.duration_s == 0) o.num_requests = 100;
  if (o.timeout_s <= 0) throw InputError("--timeout must be positive seconds");
  if (!o.extra_body.empty()) {
    const auto j = nlohmann::json::parse(o.extra_body, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) throw InputError("--extra-body must be a JSON object");
  }
  if (!(o.ready_timeout_s >= 0)) throw InputError("--ready-timeout must be >= 0 seconds");
  if (o.ttft_slo_ms < 0 || o.tpot_slo_ms < 0) throw InputError("--ttft-slo/--tpot-slo must be positive milliseconds");
  if (o.save_detailed && o.json_path.empty())
    throw InputError("--save-detailed adds per-request arrays to the JSON report: give --json FILE too");
  if (o.headroom < 1.0) throw InputError("--headroom must be at least 1.0 (1.3 keeps 30% spare)");
  if (o.peak_concurrency < 0 || o.peak_qps < 0) throw InputError("--peak-concurrency/--peak-qps must be positive");
  if (o.goodput_target <= 0 || o.goodput_target > 1) throw InputError("--goodput-target must be in (0, 1]");
  if (o.rate_resolution <= 0) throw InputError("--rate-resolution must be positive");
  if (!o.open_loop() && o.concurrency.empty()) o.concurrency = {1};
  if (o.find_capacity) {
    if (o.ttft_slo_ms == 0 && o.tpot_slo_ms == 0) {
      throw InputError("--find-capacity needs an SLO to break: give --ttft-slo MS and/or --tpot-slo MS");
    }
    if (o.capacity_max < 0) throw InputError("--capacity-max must be positive");
    if (o.open_loop() && o.rates.size() != 1) {
      throw InputError("--find-capacity with --rate takes one starting rate, not a list");
    }
    if (!o.open_loop() && o.concurrency.size() > 1) {
      throw InputError("--find-capacity takes one starting --concurrency, not a list");
    }
  } else if (o.peak_concurrency > 0 || o.peak_qps > 0) {
    throw InputError("--peak-concurrency/--peak-qps plan from a measured capacity: add --find-capacity");
  }
  if (o.open_loop() && o.concurrency.size() > 1) {
    throw InputError("with --rate, --concurrency is one cap on requests in flight, not a list");
  }
}

}  // namespace parallm::loadtest
