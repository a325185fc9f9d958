// `parallm bench`: load-test any OpenAI-compatible streaming server and find
// its capacity. Thin: parses flags into BenchOptions, runs the library
// (src/loadtest), writes the table/JSON/HTML. See docs/bench.md.
#include <fstream>
#include <iostream>

#include "command_registry.h"
#include "loadtest/bench_runner.h"
#include "util/check.h"

namespace parallm {
namespace {

struct BenchFlags {
  std::string url, model, api_key, endpoint = "chat", concurrency, rate = "inf";
  std::string input_len = "128", output_len = "128";
  loadtest::BenchOptions options;
};

void write_file(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw InputError(std::string(flag) + " " + path + ": cannot write file");
}

CommandAction setup_bench(CLI::App& sub) {
  auto flags = std::make_shared<BenchFlags>();
  auto& o = flags->options;
  sub.add_option("--url", flags->url, "Server base URL, e.g. http://127.0.0.1:8000 (or .../v1)")->required();
  sub.add_option("--model", flags->model, "Model name to send (default: first of GET /v1/models)");
  sub.add_option("--api-key", flags->api_key, "Sent as 'Authorization: Bearer KEY'");
  sub.add_option("--endpoint", flags->endpoint, "chat (/v1/chat/completions) or completions (/v1/completions)");
  sub.add_option("--concurrency", flags->concurrency,
                 "Streams in flight, comma list: one level each (with --rate: a cap) [1]");
  sub.add_option("--rate", flags->rate, "inf (closed loop) or Poisson requests/s, comma list [inf]");
  sub.add_option("--num-requests", o.num_requests, "Requests per level [100 when no --duration]");
  sub.add_option("--duration", o.duration_s, "Seconds per level to issue requests");
  sub.add_option("--input-len", flags->input_len, "Prompt tokens, N or MIN:MAX [128]");
  sub.add_option("--output-len", flags->output_len, "max_tokens, N or MIN:MAX [128]");
  sub.add_option("--dataset", o.dataset_path,
                 "JSONL prompts: {\"prompt\"|\"messages\"|\"conversations\", \"output_len\"?}");
  sub.add_option("--ttft-slo", o.ttft_slo_ms, "TTFT SLO in ms (per request)");
  sub.add_option("--tpot-slo", o.tpot_slo_ms, "TPOT SLO in ms (per request)");
  sub.add_option("--seed", o.seed, "Seed for prompts, lengths and arrivals [0]");
  sub.add_option("--timeout", o.timeout_s, "Per-request timeout in seconds [60]");
  sub.add_option("--ready-timeout", o.ready_timeout_s,
                 "Seconds to wait for a server still loading its model (503 from /v1/models) [600]");
  sub.add_flag("--ignore-eos", o.ignore_eos, "Send ignore_eos (vLLM/llama.cpp extension) for exact output lengths");
  sub.add_option("--extra-body", o.extra_body,
                 "JSON object merged into every request body, e.g. '{\"guided_json\": {...}}' (structured outputs)");
  sub.add_option("--json", o.json_path, "Write the JSON report here ('-' for stdout)");
  sub.add_option("--html", o.html_path, "Write the self-contained HTML report here");
  sub.add_flag("--save-detailed", o.save_detailed,
               "Add every request's TTFT, TPOT, E2E, tokens and error to the --json report (results[].detailed)");
  sub.add_flag("--find-capacity", o.find_capacity,
               "Raise load until an SLO breaks, refine, report per-server capacity");
  sub.add_option("--goodput-target", o.goodput_target, "A level meets the SLOs when goodput >= this [0.95]");
  sub.add_option("--capacity-max", o.capacity_max, "Highest concurrency (or rate) the search tries [1024 / 10000]");
  sub.add_option("--rate-resolution", o.rate_resolution, "Rate search stops when hi/lo <= 1 + this [0.1]");
  sub.add_option("--peak-concurrency", o.peak_concurrency, "Plan: peak concurrent streams to serve");
  sub.add_option("--peak-qps", o.peak_qps, "Plan: peak requests/s to serve");
  sub.add_option("--headroom", o.headroom, "Plan: spare capacity factor [1.3]");
  return [flags]() -> int {
    auto& o = flags->options;
    o.url = loadtest::parse_http_url(flags->url);
    o.model = flags->model;
    o.api_key = flags->api_key;
    o.endpoint = loadtest::parse_endpoint(flags->endpoint);
    if (!flags->concurrency.empty()) o.concurrency = loadtest::parse_int_list(flags->concurrency, "--concurrency");
    o.rates = loadtest::parse_rate_list(flags->rate);
    o.input_len = loadtest::parse_int_range(flags->input_len, "--input-len");
    o.output_len = loadtest::parse_int_range(flags->output_len, "--output-len");
    loadtest::validate_options(o);
    const bool json_stdout = o.json_path == "-";
    const loadtest::BenchReport report = loadtest::run_bench(o, &std::cerr);
    loadtest::write_text_report(report, json_stdout ? std::cerr : std::cout);
    if (json_stdout) {
      std::cout << loadtest::json_report(report);
    } else if (!o.json_path.empty()) {
      write_file(o.json_path, loadtest::json_report(report), "--json");
    }
    if (!o.html_path.empty()) write_file(o.html_path, loadtest::html_report(report), "--html");
    return 0;
  };
}

const bool registered = register_command(
    {"bench", "Load-test an OpenAI-compatible server; find its capacity (--find-capacity)", setup_bench});

}  // namespace
}  // namespace parallm
