// The frozen configuration of one `parallm bench` run, and the parsers that
// turn command-line strings into it. Every bad value throws InputError with a
// one-line message naming the flag, so the CLI exits 2 with something a person
// can act on. Nothing here touches the network.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loadtest/http_url.h"

namespace parallm::loadtest {

enum class Endpoint { kChat, kCompletions };

struct IntRange {
  int64_t min = 0;
  int64_t max = 0;  // inclusive; min == max for a fixed value
};

struct BenchOptions {
  HttpUrl url;          // scheme/host/port/path of the endpoint to load
  std::string model;    // empty: ask GET /v1/models, else send none
  std::string api_key;  // sent as "Authorization: Bearer ..." when set
  Endpoint endpoint = Endpoint::kChat;
  std::vector<int64_t> concurrency;  // closed loop: one level each (default 1); open loop: cap (empty: none)
  std::vector<double> rates;         // empty: closed loop ("inf"); else Poisson req/s per level
  int64_t num_requests = 0;          // per level; 0: bounded by duration only
  double duration_s = 0;             // per level; 0: bounded by num_requests only
  IntRange input_len{128, 128};      // prompt tokens (approximated by words)
  IntRange output_len{128, 128};     // max_tokens
  std::string dataset_path;          // JSONL prompts, replaces the word-list prompts
  double ttft_slo_ms = 0;            // 0: no TTFT SLO
  double tpot_slo_ms = 0;            // 0: no TPOT SLO
  uint64_t seed = 0;
  double timeout_s = 60;         // per request, until the end of its stream
  double ready_timeout_s = 600;  // wait this long for a server that answers 503 (still loading)
  bool ignore_eos = false;       // send "ignore_eos": true (vLLM, llama.cpp extension)
  std::string extra_body;        // --extra-body: a JSON object merged into every request (e.g. response_format)
  std::string json_path;
  std::string html_path;
  bool save_detailed = false;  // --save-detailed: per-request arrays in the JSON report
  // --find-capacity
  bool find_capacity = false;
  double goodput_target = 0.95;  // a level meets the SLOs when goodput >= this
  double capacity_max = 0;       // 0: 1024 concurrent streams or 10000 req/s
  double rate_resolution = 0.1;  // rate search stops when hi/lo <= 1 + this
  double peak_concurrency = 0;   // capacity planning inputs (0: not given)
  double peak_qps = 0;
  double headroom = 1.3;

  bool open_loop() const { return !rates.empty(); }
};

// "N" or "MIN:MAX" with 1 <= MIN <= MAX; `flag` names the option in messages.
IntRange parse_int_range(const std::string& text, const std::string& flag);
// "1,8,32": positive integers.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag);
// "inf" or "2,4.5": positive rates; "inf" alone gives an empty vector.
std::vector<double> parse_rate_list(const std::string& text);
Endpoint parse_endpoint(const std::string& text);
const char* endpoint_name(Endpoint endpoint);

// Cross-field checks (bounds, SLOs needed by --find-capacity, ...). Throws InputError.
void validate_options(BenchOptions& options);

}  // namespace parallm::loadtest
