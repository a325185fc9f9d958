// `parallm simulate`: the discrete-event serving simulator (src/sim). Thin:
// resolves the model and device as `plan` does (catalog, GGUF or config.json;
// --gpu from the catalog or --local from `plan --calibrate`), parses the
// layout and the load, runs the library and writes bench's table / JSON /
// HTML. See docs/simulate.md.
#include <fstream>
#include <iostream>

#include "command_registry.h"
#include "loadtest/bench_runner.h"
#include "planner/calibration.h"
#include "planner/model_catalog.h"
#include "planner/model_source.h"
#include "sim/replica_model.h"
#include "sim/simulation.h"
#include "sim/trace.h"
#include "topo/local_devices.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {
namespace {

using namespace parallm::planner;

struct SimFlags {
  std::string model, weights, kv_dtype = "auto", gpu, interconnect, calibration_path, layout = "tp=1,pp=1,dp=1";
  std::string trace, input_len = "128", output_len = "128", router = "least-outstanding-tokens", json, html;
  bool local = false, save_detailed = false;
  double qps = 0, duration = 0, request_overhead_ms = -1, ttft_slo = 0, tpot_slo = 0, mem_util = 0;
  int gpus_per_node = 8, http_threads = 4;
  int64_t concurrency = 0, num_requests = 0, max_num_seqs = 256, max_batched = 2048, max_model_len = 0, block_size = 16;
  uint64_t seed = 0;
  CLI::Option *qps_opt = nullptr, *conc_opt = nullptr, *trace_opt = nullptr;
};

void write_file(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw InputError(std::string(flag) + " " + path + ": cannot write file");
}

// The device and its constants, as `plan` resolves them.
// `profile`: set to the calibration's profile of the model file, when it has one.
void resolve_device(const SimFlags& f, PlanRequest& r, const Layout& layout, std::optional<ModelProfile>* profile) {
  if (f.gpus_per_node < 1 || f.gpus_per_node > 1024) throw InputError("--gpus-per-node must be in 1..1024");
  const int per_node = f.gpus_per_node;
  const int nodes = (layout.tp * layout.pp + per_node - 1) / per_node;  // a replica's nodes (pp may cross them)
  if (f.local) {
    if (!f.gpu.empty()) throw InputError("--local replaces --gpu; give one");
    topo::LocalMachine m = topo::discover_local_machine();
    if (!m.gpus.empty()) {
      if (!match_gpu_name(m.gpus[0].name, static_cast<double>(m.gpus[0].memory_bytes), &r.gpu))
        throw InputError("--local: GPU '" + m.gpus[0].name + "' is not in the catalog; use --gpu with a similar one");
      r.fabric = fabric_from_topology(r.gpu, *m.gpu_links, 1);
      return;
    }
    const std::string path = f.calibration_path.empty() ? default_calibration_path() : f.calibration_path;
    const Calibration c = load_calibration(path);
    if (const ModelProfile* p = profile_for(c, f.model)) {
      *profile = *p;
    } else if (!c.model_profile.model_path.empty()) {
      // The profile is of one file as it was (path and size): a copy, a
      // moved or a changed file is not it, and its step times would be a guess.
      log_warn(
          strfmt("simulate: %s profiles %s (%lld bytes), not --model %s: step times come from the planner's "
                 "cost model; profile this file with `parallm plan --calibrate --model %s`",
                 path.c_str(), c.model_profile.model_path.c_str(), static_cast<long long>(c.model_profile.file_bytes),
                 f.model.c_str(), f.model.c_str()));
    }
    r.gpu = calibrated_cpu(c, static_cast<double>(m.host_memory_bytes));
    r.constants = calibrated_constants(c, r.weights);
    r.memory.activation_elem_bytes = 4;  // the CPU engine keeps fp32 activations
    r.memory.gpu_memory_utilization = f.mem_util > 0 ? f.mem_util : 0.8;
    r.fabric = fabric_from_interconnect(r.gpu, "memory", 1, 1);
    return;
  }
  if (f.gpu.empty()) throw InputError("--gpu NAME is required (or --local); known: H100-SXM, A100-80G, ...");
  r.gpu = catalog_gpu(f.gpu);
  if (f.mem_util > 0) r.memory.gpu_memory_utilization = f.mem_util;
  r.fabric = fabric_from_interconnect(r.gpu, f.interconnect, per_node, nodes);
}

int run_simulate(SimFlags& f) {
  sim::SimulationSpec spec;
  const int modes = static_cast<int>(f.qps_opt->count() + f.conc_opt->count() + f.trace_opt->count());
  if (modes != 1) throw InputError("give exactly one of --qps R, --concurrency C and --trace FILE.jsonl");
  if (f.model.empty()) throw InputError("--model is required (a catalog name, GGUF file, config.json or directory)");
  spec.layout = sim::parse_layout(f.layout);
  PlanRequest& r = spec.request;
  r.model = load_model_spec(f.model);
  validate_model(r.model);
  std::string weights = f.weights;
  if (weights.empty()) weights = !r.model.file_weight_type.empty() ? r.model.file_weight_type : "bf16";
  r.weights = parse_weight_format(weights);
  if (!f.weights.empty() && r.model.file_weight_bytes > 0 && f.weights != r.model.file_weight_type)
    r.model.file_weight_bytes = 0;  // the file re-quantized to --weights
  r.kv_dtype = f.kv_dtype;
  r.kv_elem_bytes = parse_kv_dtype_bytes(f.kv_dtype);
  if (f.mem_util < 0 || f.mem_util > 1) throw InputError("--gpu-memory-utilization must be in (0, 1]");
  resolve_device(f, r, spec.layout, &spec.profile);
  // The profile measured the file's own weights; re-quantized to --weights it
  // is another model (the report then says "perf model").
  if (spec.profile && !f.weights.empty() && f.weights != r.model.file_weight_type) spec.profile.reset();
  spec.request_overhead_ms = f.request_overhead_ms;

  sim::SimLoad& load = spec.load;
  if (f.qps_opt->count()) {
    load.kind = sim::LoadKind::kPoisson;
    load.rate = f.qps;
  } else if (f.conc_opt->count()) {
    load.kind = sim::LoadKind::kClosedLoop;
    load.concurrency = f.concurrency;
  } else {
    load.kind = sim::LoadKind::kTrace;
    load.trace = sim::load_trace(f.trace);
  }
  load.input_len = loadtest::parse_int_range(f.input_len, "--input-len");
  load.output_len = loadtest::parse_int_range(f.output_len, "--output-len");
  load.num_requests = f.num_requests;
  load.duration_s = f.duration;
  load.seed = f.seed;
  if (f.ttft_slo < 0 || f.tpot_slo < 0) throw InputError("--ttft-slo and --tpot-slo must be positive milliseconds");
  spec.slo = {f.ttft_slo, f.tpot_slo};
  spec.max_num_seqs = f.max_num_seqs;
  spec.max_num_batched_tokens = f.max_batched;
  spec.max_model_len = f.max_model_len;
  if (f.block_size < 1 || f.block_size > 1024) throw InputError("--block-size must be in 1..1024");
  spec.block_size = f.block_size;
  spec.http_threads = f.http_threads;
  spec.policy = sim::parse_route_policy(f.router);
  if (f.save_detailed && f.json.empty())
    throw InputError("--save-detailed adds per-request arrays to the JSON report: give --json FILE too");
  spec.save_detailed = f.save_detailed;

  const sim::SimulationResult res = sim::run_simulation(spec);
  const bool json_stdout = f.json == "-";
  sim::write_simulation_text(spec, res, json_stdout ? std::cerr : std::cout);
  if (json_stdout)
    std::cout << sim::simulation_json(spec, res);
  else if (!f.json.empty())
    write_file(f.json, sim::simulation_json(spec, res), "--json");
  if (!f.html.empty()) write_file(f.html, loadtest::html_report(res.report), "--html");
  return 0;
}

CommandAction setup_simulate(CLI::App& sub) {
  auto f = std::make_shared<SimFlags>();
  sub.add_option("--model", f->model, "Catalog name, GGUF file, config.json or HF directory");
  sub.add_option("--weights", f->weights, "fp32|bf16|fp16|fp8|int8|int4 or a GGUF type [bf16 / the file's]");
  sub.add_option("--kv-dtype", f->kv_dtype, "KV cache type: auto|fp16|bf16|fp8|int8|fp32 [auto = 16-bit]");
  sub.add_option("--gpu", f->gpu, "Device from the catalog (H100-SXM, A100-80G, RTX-4090, cpu, ...)");
  sub.add_flag("--local", f->local, "This machine's device (CPU: from `parallm plan --calibrate`)");
  sub.add_option("--calibration", f->calibration_path, "Calibration file [~/.cache/parallm/calibration.json]");
  sub.add_option("--interconnect", f->interconnect, "nvlink|nvswitch|pcie3|pcie4|pcie5 inside a replica");
  sub.add_option("--gpus-per-node", f->gpus_per_node, "Devices per node: tp stays inside one [8]");
  sub.add_option("--layout", f->layout, "tp=N,pp=N,dp=N[,ep=N]: dp replicas of tp x pp devices [tp=1,pp=1,dp=1]");
  f->qps_opt = sub.add_option("--qps", f->qps, "Poisson arrivals, requests/s over the whole fleet");
  f->conc_opt = sub.add_option("--concurrency", f->concurrency, "Closed loop: streams in flight over the whole fleet");
  f->trace_opt =
      sub.add_option("--trace", f->trace, "JSONL trace: {\"arrival_s\", \"input_tokens\", \"output_tokens\"}");
  sub.add_option("--duration", f->duration, "Seconds of arrivals (simulated time)");
  sub.add_option("--num-requests", f->num_requests, "Requests to issue [100 when no --duration]");
  sub.add_option("--input-len", f->input_len, "Prompt tokens, N or MIN:MAX [128]");
  sub.add_option("--output-len", f->output_len, "Generated tokens, N or MIN:MAX [128]");
  sub.add_option("--seed", f->seed, "Seed for arrivals and lengths [0]");
  sub.add_option("--ttft-slo", f->ttft_slo, "TTFT SLO in ms (goodput)");
  sub.add_option("--tpot-slo", f->tpot_slo, "TPOT SLO in ms (goodput)");
  sub.add_option("--router", f->router, "Replica choice: least-outstanding-tokens|round-robin");
  sub.add_option("--max-num-seqs", f->max_num_seqs, "Sequences per replica step [256]");
  sub.add_option("--max-num-batched-tokens", f->max_batched, "Token budget per step [2048, as serve]");
  sub.add_option("--max-model-len", f->max_model_len, "Context per sequence [the longest request]");
  sub.add_option("--block-size", f->block_size, "KV block size in tokens [16]");
  sub.add_option("--gpu-memory-utilization", f->mem_util, "Memory cap fraction for the KV pool [0.9; CPU 0.8]");
  sub.add_option("--request-overhead-ms", f->request_overhead_ms,
                 "Server time per request before its first step (parse, template, tokenize) "
                 "[a model profile's measurement, else the planner's]");
  sub.add_option("--http-threads", f->http_threads,
                 "Front-end threads per replica that parse and tokenize requests, as serve's [4]");
  sub.add_option("--json", f->json, "Write bench's JSON report here ('-' for stdout)");
  sub.add_option("--html", f->html, "Write bench's HTML report here");
  sub.add_flag("--save-detailed", f->save_detailed,
               "Add every request's TTFT, TPOT, E2E, tokens and error to the --json report, as bench's");
  return [f]() -> int { return run_simulate(*f); };
}

const bool registered = register_command(
    {"simulate", "Simulate serving a load on a fleet: the real scheduler, the planner's step times", setup_simulate});

}  // namespace
}  // namespace parallm
