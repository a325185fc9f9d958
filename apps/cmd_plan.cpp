// `parallm plan`: the deployment planner (planner/). This file only turns
// flags into a PlanRequest, resolves the hardware (catalog, saved topology,
// or this machine), runs --calibrate (plan_calibrate.cpp measures, this file
// saves and prints) and prints the plan as text or JSON; with --emit it also
// writes the deployment files (planner/deploy_emit.h builds them) into --out.
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "command_registry.h"
#include "core/dtype.h"
#include "loader/gguf_reader.h"
#include "plan_calibrate.h"
#include "plan_profile.h"
#include "planner/calibration.h"
#include "planner/deploy_emit.h"
#include "planner/model_catalog.h"
#include "planner/model_source.h"
#include "planner/plan_output.h"
#include "sim/slo_check.h"
#include "topo/local_devices.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {
namespace {

using namespace parallm::planner;

struct PlanFlags {
  std::string model, weights, kv_dtype = "auto", gpu, interconnect, topology, calibration_path;
  std::string emit, out, engine, objective = "auto";
  int gpus = 1, nodes = 1, tp = 0, pp = 0, dp = 0, ep = 0, threads = 0;
  int64_t input_len = 1024, output_len = 256, max_model_len = 0, max_num_seqs = 256, max_batched = 8192;
  double concurrency = 0, qps = 0, ttft_slo = 0, tpot_slo = 0, price = 0, headroom = 1.3, peak_conc = 0, peak_qps = 0,
         mem_util = 0.9, expert_imbalance = 0;
  double gpu_price = 0, depreciation_months = 36, gpu_watts = 0, power_price = 0, ops_cost_month = 0,
         daily_requests = 0;
  std::string currency;
  bool offline = false, local = false, calibrate = false, json = false;
};

int run_calibrate(const PlanFlags& f) {
  const int threads = f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The model file to profile is checked before minutes of measuring.
  if (!f.model.empty() && !std::filesystem::is_regular_file(f.model))
    throw InputError("--calibrate --model " + f.model +
                     ": profiling needs a local model file (GGUF, safetensors "
                     "folder or llama2.c .bin)");
  Calibration c = measure_this_machine(threads);
  if (!f.model.empty()) c.model_profile = profile_model(f.model, threads);
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  c.measured_at = buf;
  if (!c.model_profile.model_path.empty()) c.model_profile.measured_at = buf;
  const std::string path = f.calibration_path.empty() ? default_calibration_path() : f.calibration_path;
  save_calibration(c, path);
  if (f.json) {
    std::cout << calibration_to_json(c);
  } else {
    std::cout << strfmt(
        "Calibrated %d threads: memory %.1f GB/s, FP32 FMA %.1f GFLOP/s, all-reduce %.1f us + %.2f GB/s "
        "(%d ranks)\nSaved to %s\n",
        c.threads, c.mem_bw_gbps, c.fma_gflops, c.allreduce_latency_us, c.allreduce_gbps, c.allreduce_ranks,
        path.c_str());
    std::cout << strfmt("Engine matmul (llama-110m layers): decode = 1 token, prefill = %lld tokens\n",
                        static_cast<long long>(kProbePrefillTokens));
    for (const auto& [name, k] : c.kernels)
      std::cout << strfmt("  %-5s decode %6.1f GB/s (%.2f of bandwidth)  prefill %7.1f GFLOP/s (%.2f of FMA peak)\n",
                          name.c_str(), k.decode_gbps, k.bw_eff, k.prefill_gflops, k.flops_eff);
    std::cout << "GFLOP/s by batch size (tokens):";
    if (!c.kernels.empty()) {
      for (const auto& [n, g] : c.kernels.begin()->second.gflops_by_tokens) std::cout << strfmt(" %8.0f", n);
    }
    std::cout << "\n";
    for (const auto& [name, k] : c.kernels) {
      std::cout << strfmt("  %-5s%24s", name.c_str(), "");
      for (const auto& [n, g] : k.gflops_by_tokens) std::cout << strfmt(" %8.1f", g);
      std::cout << "\n";
    }
    std::cout << strfmt(
        "Engine forward (llama-110m q4_0): %.1f us per layer besides matmuls; attention %.2f of "
        "bandwidth (decode), %.3f of FMA peak (prefill)\n",
        c.layer_overhead_us, c.attn_bw_eff, c.attn_flops_eff);
    if (const ModelProfile& p = c.model_profile; !p.model_path.empty()) {
      std::cout << "Model profile (" << p.model_path << ", the engine's forward in ms by tokens):";
      for (const auto& [n, ms] : p.forward_ms_by_tokens) std::cout << strfmt(" %.0f:%.2f", n, ms);
      std::cout << strfmt("\n  each further logits row %.3f ms, prefill attention %.2f ns per query-key pair, ",
                          p.logit_row_ms, p.prefill_pair_ns);
      if (p.decode_kv_ms_by_ctx.empty()) {
        std::cout << strfmt("decode %.2f ns per context token", p.decode_kv_token_ns);
      } else {
        std::cout << "decode attention in ms by context tokens";
        for (const auto& [n, ms] : p.decode_kv_ms_by_ctx) std::cout << strfmt(" %.0f:%.2f", n, ms);
      }
      std::cout << strfmt(
          ", serving %.0f us per step and %.0f per sampled token, step jitter %.1f%%, drift %.1f%% per "
          "%.2f s, x%.2f after %.0f ms idle",
          p.step_overhead_us, p.stream_token_us, 100 * p.noise_sigma, 100 * p.drift_sigma, p.drift_period_s,
          p.idle_factor, 1e3 * p.idle_after_s);
      if (p.request_overhead_us >= 0)
        std::cout << strfmt(", serve's front end %.0f us a request", p.request_overhead_us);
      if (!p.cold_decode.empty()) {
        std::cout << strfmt(", decode steps after a %.0f-token prompt", p.cold_decode.prompt_tokens);
        for (const auto& [ctx, extra] : p.cold_decode.extra_ms) {
          double sum = 0;
          for (double ms : extra) sum += ms;
          std::cout << strfmt(" +%.1f ms over %zu (context %.0f)", sum, extra.size(), ctx);
        }
      }
      std::cout << "\n";
    }
  }
  return 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Checked before planning, so a bad flag costs no planning time.
void check_emit_flags(const PlanFlags& f) {
  if (f.emit.empty()) {
    if (!f.out.empty() || !f.engine.empty()) throw InputError("--out and --engine go with --emit k8s|compose|systemd");
    return;
  }
  (void)parse_emit_kind(f.emit);
  if (!f.engine.empty()) check_engine(f.engine);
  if (f.out.empty()) throw InputError("--emit " + f.emit + " needs --out DIR (the folder to write the files into)");
}

void write_deployment_files(const Plan& plan, const PlanFlags& f) {
  EmitOptions o;
  if (!f.engine.empty()) o.engine = f.engine;
  const std::vector<EmittedFile> files = emit_deployment(plan, parse_emit_kind(f.emit), o);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(f.out, ec);
  if (ec || !fs::is_directory(f.out))
    throw InputError("--out " + f.out + ": cannot create the folder" + (ec ? " (" + ec.message() + ")" : ""));
  for (const auto& file : files) {
    const fs::path path = fs::path(f.out) / file.name;
    std::ofstream o_file(path, std::ios::binary | std::ios::trunc);
    o_file << file.text;
    o_file.close();
    if (!o_file) throw InputError("--out " + f.out + ": cannot write " + path.string());
  }
  std::cerr << strfmt("Wrote %zu %s file(s) for the %s engine to %s\n", files.size(), f.emit.c_str(), o.engine.c_str(),
                      f.out.c_str());
}

void check_economics(const PlanFlags& f) {
  const std::pair<const char*, double> nonneg[] = {
      {"--gpu-hour-price", f.price},    {"--gpu-price", f.gpu_price},           {"--gpu-watts", f.gpu_watts},
      {"--power-price", f.power_price}, {"--ops-cost-month", f.ops_cost_month}, {"--daily-requests", f.daily_requests}};
  for (const auto& [name, v] : nonneg)
    if (v < 0) throw InputError(strfmt("%s must not be negative (got %g)", name, v));
  if (f.price > 0 && f.gpu_price > 0)
    throw InputError("--gpu-hour-price (rent) and --gpu-price (bought, depreciated) both price the cards; give one");
  if (f.depreciation_months < 1)
    throw InputError(strfmt("--depreciation-months must be at least 1 (got %g)", f.depreciation_months));
  if (!f.currency.empty() && f.currency != "USD" && f.price <= 0 && f.gpu_price <= 0)
    throw InputError("--currency " + f.currency +
                     ": the catalog's card prices are USD; give --gpu-hour-price or --gpu-price in " + f.currency);
}

int run_plan(const PlanFlags& f) {
  if (f.calibrate) return run_calibrate(f);
  check_emit_flags(f);
  check_economics(f);
  if (f.model.empty()) throw InputError("--model is required (a catalog name, GGUF file, config.json or directory)");
  PlanRequest r;
  r.model = load_model_spec(f.model);
  // Launch lines load the catalog's repository, the HF id given, or the path.
  r.model_ref = catalog_has_model(f.model) ? r.model.hf_repo : f.model;
  std::string weights = f.weights;
  if (weights.empty()) weights = !r.model.file_weight_type.empty() ? r.model.file_weight_type : "bf16";
  r.weights = parse_weight_format(weights);
  if (!f.weights.empty() && r.model.file_weight_bytes > 0 && f.weights != r.model.file_weight_type)
    r.model.file_weight_bytes = 0;  // predict the file re-quantized to --weights
  r.kv_dtype = f.kv_dtype;
  r.kv_elem_bytes = parse_kv_dtype_bytes(f.kv_dtype);
  if (f.mem_util > 0) r.memory.gpu_memory_utilization = f.mem_util;
  r.memory.max_num_seqs = f.max_num_seqs;
  r.memory.max_num_batched_tokens = f.max_batched;

  if (f.local) {
    if (!f.gpu.empty() || !f.topology.empty()) throw InputError("--local replaces --gpu and --topology; give one");
    topo::LocalMachine m = topo::discover_local_machine();
    if (!m.gpus.empty()) {
      if (!match_gpu_name(m.gpus[0].name, static_cast<double>(m.gpus[0].memory_bytes), &r.gpu))
        throw InputError("--local: GPU '" + m.gpus[0].name + "' is not in the catalog; use --gpu with a similar one");
      r.fabric = fabric_from_topology(r.gpu, *m.gpu_links, f.nodes);
    } else {
      const std::string path = f.calibration_path.empty() ? default_calibration_path() : f.calibration_path;
      Calibration c = load_calibration(path);
      r.gpu = calibrated_cpu(c, static_cast<double>(m.host_memory_bytes));
      r.constants = calibrated_constants(c, r.weights);
      r.memory.activation_elem_bytes = 4;  // the CPU engine keeps fp32 activations
      r.memory.gpu_memory_utilization = f.mem_util > 0 && f.mem_util != 0.9 ? f.mem_util : 0.8;
      r.fabric = fabric_from_interconnect(r.gpu, "memory", 1, 1);
      r.fabric.description = strfmt("this machine's CPU (%d threads, calibrated %.1f GB/s, %.1f GFLOP/s)", c.threads,
                                    c.mem_bw_gbps, c.fma_gflops);
    }
  } else {
    if (f.gpu.empty()) throw InputError("--gpu NAME is required (or --local); known: H100-SXM, A100-80G, ...");
    r.gpu = catalog_gpu(f.gpu);
    if (!f.topology.empty()) {
      if (!f.interconnect.empty()) throw InputError("--topology and --interconnect both describe the links; give one");
      topo::TopoMatrix t = topo::parse_nvidia_smi_topo(read_file(f.topology));
      r.fabric = fabric_from_topology(r.gpu, t, f.nodes);
    } else {
      r.fabric = fabric_from_interconnect(r.gpu, f.interconnect, f.gpus, f.nodes);
    }
  }
  r.pinned = Layout{f.dp, f.tp, f.pp, f.ep};
  Workload& w = r.workload;
  w.input_len = f.input_len;
  w.output_len = f.output_len;
  const int load_flags = (f.concurrency > 0) + (f.qps > 0) + (f.offline ? 1 : 0);
  if (load_flags > 1) throw InputError("give one of --concurrency, --qps and --offline");
  if (f.offline)
    w.mode = LoadMode::kOffline;
  else if (f.qps > 0) {
    w.mode = LoadMode::kQps;
    w.qps = f.qps;
  } else {
    w.mode = LoadMode::kConcurrency;
    w.concurrency = f.concurrency > 0 ? f.concurrency : 1;
  }
  if (f.concurrency < 0 || f.qps < 0) throw InputError("--concurrency and --qps must be positive");
  w.load_given = f.concurrency > 0 || f.qps > 0;
  w.objective = f.objective == "auto" ? Objective::kAuto : parse_objective(f.objective);
  if (f.expert_imbalance != 0 && !(f.expert_imbalance >= 1.0))
    throw InputError("--expert-imbalance must be at least 1 (the busiest expert-parallel rank over the mean)");
  r.expert_imbalance = f.expert_imbalance;
  w.ttft_slo_ms = f.ttft_slo;
  w.tpot_slo_ms = f.tpot_slo;
  w.max_model_len = f.max_model_len;
  r.economics.gpu_hour_price = f.price;
  r.economics.gpu_price = f.gpu_price;
  r.economics.depreciation_months = f.depreciation_months;
  r.economics.gpu_watts = f.gpu_watts;
  r.economics.power_price = f.power_price;
  r.economics.ops_cost_month = f.ops_cost_month;
  r.economics.daily_requests = f.daily_requests;
  if (!f.currency.empty()) r.economics.currency = f.currency;
  r.economics.headroom = f.headroom;
  r.economics.peak_concurrency = f.peak_conc;
  r.economics.peak_qps = f.peak_qps;
  Plan plan = make_plan(r);
  // The claimed SLO capacity of the top candidates, checked with the real
  // scheduler (src/sim depends on the planner, so the check is made here).
  const std::vector<sim::SloCheck> checks = sim::check_slo_capacity(plan, 3);
  if (f.json) {
    nlohmann::json j = plan_to_json(plan);
    if (!checks.empty()) j["simulate_check"] = sim::slo_checks_json(checks);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << plan_to_text(plan) << sim::slo_checks_text(plan, checks);
  }
  if (!f.emit.empty()) write_deployment_files(plan, f);
  return 0;
}

const bool registered = register_command(
    {"plan", "Plan a deployment: fits? which layout? how many GPUs?", [](CLI::App& sub) -> CommandAction {
       auto f = std::make_shared<PlanFlags>();
       sub.add_option("--model", f->model, "Catalog name, GGUF file, config.json or HF directory");
       sub.add_option("--weights", f->weights, "fp32|bf16|fp16|fp8|int8|int4 or a GGUF type [bf16 / the file's]");
       sub.add_option("--kv-dtype", f->kv_dtype, "KV cache type: auto|fp16|bf16|fp8|int8|fp32 [auto = 16-bit]");
       sub.add_option("--gpu", f->gpu, "Device from the catalog (H100-SXM, A100-80G, RTX-4090, cpu, ...)");
       sub.add_option("--gpus", f->gpus, "Devices per node [1]");
       sub.add_option("--nodes", f->nodes, "Nodes [1]");
       sub.add_option("--interconnect", f->interconnect, "nvlink|nvswitch|pcie3|pcie4|pcie5");
       sub.add_option("--topology", f->topology, "Saved `nvidia-smi topo -m` output");
       sub.add_flag("--local", f->local, "Use this machine's devices (CPU: needs --calibrate first)");
       sub.add_flag("--calibrate", f->calibrate,
                    "Measure this machine (bandwidth, FMA peak, all-reduce) and save it; with --model FILE also "
                    "profile that model's step times (for simulate --local)");
       sub.add_option("--calibration", f->calibration_path, "Calibration file [~/.cache/parallm/calibration.json]");
       sub.add_option("--threads", f->threads, "Threads for --calibrate [all]");
       sub.add_option("--input-len", f->input_len, "Prompt tokens [1024]");
       sub.add_option("--output-len", f->output_len, "Output tokens [256]");
       sub.add_option("--concurrency", f->concurrency, "Requests in flight [1]");
       sub.add_option("--qps", f->qps, "Requests per second");
       sub.add_flag("--offline", f->offline, "As many requests in flight as memory allows (max throughput)");
       sub.add_option("--ttft-slo", f->ttft_slo, "Time-to-first-token SLO, ms");
       sub.add_option("--tpot-slo", f->tpot_slo, "Time-per-output-token SLO, ms");
       sub.add_option("--max-model-len", f->max_model_len, "Context to reserve per sequence [input + output]");
       sub.add_option("--tp", f->tp, "Pin tensor parallel size");
       sub.add_option("--pp", f->pp, "Pin pipeline parallel size");
       sub.add_option("--dp", f->dp, "Pin data parallel replicas");
       sub.add_option("--ep", f->ep, "Pin expert parallel size (MoE)");
       sub.add_option("--gpu-hour-price", f->price, "Rent per device-hour, in --currency [catalog estimate, USD]");
       sub.add_option("--gpu-price", f->gpu_price, "Purchase price per device (depreciation instead of rent)");
       sub.add_option("--depreciation-months", f->depreciation_months, "Months --gpu-price is written off over [36]");
       sub.add_option("--gpu-watts", f->gpu_watts, "Board power per device, W [catalog]");
       sub.add_option("--power-price", f->power_price, "Electricity per kWh, in --currency [0: not counted]");
       sub.add_option("--ops-cost-month", f->ops_cost_month, "Operations (staff, hosting) per month, in --currency");
       sub.add_option("--daily-requests", f->daily_requests,
                      "Requests a day, for the cost per token at the real volume");
       sub.add_option("--currency", f->currency, "Label of every price [USD]");
       sub.add_option("--headroom", f->headroom, "Capacity headroom factor [1.3]");
       sub.add_option("--peak-concurrency", f->peak_conc, "Peak concurrent requests to provision for");
       sub.add_option("--peak-qps", f->peak_qps, "Peak requests/s to provision for");
       sub.add_option("--gpu-memory-utilization", f->mem_util, "Memory cap fraction [0.9]");
       sub.add_option("--max-num-seqs", f->max_num_seqs, "Scheduler limit of sequences per replica [256]");
       sub.add_option("--max-num-batched-tokens", f->max_batched, "Token budget per step [8192]");
       sub.add_option("--objective", f->objective,
                      "Rank by latency|throughput|cost [auto: SLOs then cost at the workload, or at full capacity]");
       sub.add_option("--expert-imbalance", f->expert_imbalance,
                      "MoE: busiest expert-parallel rank's tokens over the mean [1.3, docs/plan.md]");
       sub.add_flag("--json", f->json, "Print JSON (schema: docs/plan.md)");
       sub.add_option("--emit", f->emit, "Write deployment files for the plan: k8s|compose|systemd (docs/plan.md)");
       sub.add_option("--out", f->out, "Folder for the --emit files");
       sub.add_option("--engine", f->engine, "Engine the --emit files run: parallm|vllm|sglang|trtllm|llamacpp [vllm]");
       return [f]() -> int { return run_plan(*f); };
     }});

}  // namespace
}  // namespace parallm
