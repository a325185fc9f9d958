// run_simulation and its report writers; see simulation.h.
#include "sim/simulation.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/replica_model.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::sim {

ServeOverheads serve_overheads(const planner::PerfInputs& in) {
  ServeOverheads o;
  o.per_request_s = in.k.request_overhead_ms * 1e-3;
  if (in.gpu.is_cpu) o.per_sampled_row_s = cpu_sample_row_s(in);
  return o;
}

namespace {

int64_t longest_request(const SimLoad& load) {
  if (load.kind == LoadKind::kTrace) {
    int64_t m = 1;
    for (const SimRequest& r : load.trace) m = std::max(m, r.input_tokens + r.output_tokens);
    return m;
  }
  return load.input_len.max + load.output_len.max;
}

}  // namespace

SimulationResult run_simulation(const SimulationSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  if (spec.max_num_seqs < 1) throw InputError("--max-num-seqs must be at least 1");
  if (spec.max_num_batched_tokens < 1) throw InputError("--max-num-batched-tokens must be at least 1");
  if (spec.max_model_len < 0) throw InputError("--max-model-len must be at least 1");
  if (!(spec.request_overhead_ms >= 0 || spec.request_overhead_ms == -1))
    throw InputError("--request-overhead-ms must be at least 0");
  SimLoad load = spec.load;
  validate_load(load);
  SimulationResult out;
  out.max_model_len = spec.max_model_len > 0 ? spec.max_model_len : longest_request(load);
  planner::PlanRequest request = spec.request;
  request.memory.max_num_seqs = spec.max_num_seqs;
  request.memory.max_num_batched_tokens = spec.max_num_batched_tokens;
  const ReplicaModel model = replica_model(request, spec.layout, out.max_model_len, spec.block_size);
  if (model.n_kv_blocks < 1) throw InputError("the KV pool of one replica holds no block");
  out.n_kv_blocks = model.n_kv_blocks;
  out.overheads = serve_overheads(model.perf);
  if (spec.profile) {  // measured on serve's own step loop, sampling included (model_profile.h)
    out.overheads.per_step_s = spec.profile->step_overhead_us * 1e-6;
    out.overheads.per_sampled_row_s = 0;
    if (spec.profile->request_overhead_us >= 0) out.overheads.per_request_s = spec.profile->request_overhead_us * 1e-6;
  }
  if (spec.request_overhead_ms >= 0) out.overheads.per_request_s = spec.request_overhead_ms * 1e-3;
  const StepCost cost(model.perf, out.overheads, spec.profile ? &*spec.profile : nullptr);

  FleetOptions fo;
  fo.dp = spec.layout.dp;
  fo.policy = spec.policy;
  if (spec.http_threads < 1 || spec.http_threads > 1024) throw InputError("--http-threads must be in 1..1024");
  fo.front_threads = spec.http_threads;
  fo.client_send_s = spec.client_send_s;
  if (spec.profile) {
    fo.replica.noise_sigma = spec.profile->noise_sigma;
    fo.replica.drift_sigma = spec.profile->drift_sigma;
    fo.replica.drift_period_s = spec.profile->drift_period_s;
    fo.replica.idle_factor = spec.profile->idle_factor;
    fo.replica.idle_after_s = spec.profile->idle_after_s;
    fo.replica.cold_decode = spec.profile->cold_decode;
    fo.noise_seed = spec.load.seed * 0x9E3779B97F4A7C15ull + 1;
  }
  fo.replica.block_size = spec.block_size;
  fo.replica.n_kv_blocks = model.n_kv_blocks;
  fo.replica.scheduler.max_num_seqs = spec.max_num_seqs;
  fo.replica.scheduler.max_num_batched_tokens = spec.max_num_batched_tokens;
  fo.replica.scheduler.max_model_len = out.max_model_len;
  fo.replica.scheduler.max_queue = INT64_MAX;  // the fleet queues everything, like serve behind its HTTP limit
  out.fleet = simulate_fleet(fo, cost, load);

  loadtest::BenchReport& rep = out.report;
  loadtest::BenchOptions& bo = rep.options;
  bo.url.host = "simulate";
  bo.model = spec.request.model.name;
  if (load.kind == LoadKind::kPoisson) bo.rates = {load.rate};
  if (load.kind == LoadKind::kClosedLoop) bo.concurrency = {load.concurrency};
  bo.num_requests = load.num_requests;
  bo.duration_s = load.duration_s;
  bo.input_len = load.input_len;
  bo.output_len = load.output_len;
  bo.ttft_slo_ms = spec.slo.ttft_ms;
  bo.tpot_slo_ms = spec.slo.tpot_ms;
  bo.seed = load.seed;
  bo.ignore_eos = true;
  rep.model = spec.request.model.name;
  rep.request_path = "";
  double rate = load.kind == LoadKind::kPoisson ? load.rate : 0;
  if (load.kind == LoadKind::kTrace && load.trace.size() > 1 &&
      load.trace.back().arrival_s > load.trace.front().arrival_s)
    rate = static_cast<double>(load.trace.size() - 1) / (load.trace.back().arrival_s - load.trace.front().arrival_s);
  const int64_t conc = load.kind == LoadKind::kClosedLoop ? load.concurrency : 0;
  if (load.kind == LoadKind::kTrace) bo.rates = {rate > 0 ? rate : 1};  // open loop at the trace's own times
  rep.results.push_back(loadtest::aggregate(out.fleet.run, spec.slo, conc, rate));
  bo.save_detailed = spec.save_detailed;
  if (spec.save_detailed) rep.results.back().detailed = loadtest::request_details(out.fleet.run);
  std::vector<loadtest::RequestRecord>().swap(out.fleet.run.records);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string simulation_json(const SimulationSpec& spec, const SimulationResult& r) {
  nlohmann::json j = nlohmann::json::parse(loadtest::json_report(r.report));
  j["tool"] = "parallm simulate";
  const char* mode = spec.load.kind == LoadKind::kPoisson ? "poisson"
                     : spec.load.kind == LoadKind::kTrace ? "trace"
                                                          : "closed_loop";
  j["config"]["mode"] = mode;
  j["config"]["url"] = nullptr;
  const planner::Layout& l = spec.layout;
  j["simulation"] = {
      {"model", spec.request.model.name},
      {"device", spec.request.gpu.name},
      {"weights", spec.request.weights.name},
      {"layout", {{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"ep", l.ep}}},
      {"devices", l.gpus()},
      {"router", route_policy_name(spec.policy)},
      {"max_num_seqs", spec.max_num_seqs},
      {"max_num_batched_tokens", spec.max_num_batched_tokens},
      {"max_model_len", r.max_model_len},
      {"block_size", spec.block_size},
      {"kv_blocks_per_replica", r.n_kv_blocks},
      {"preemptions", r.fleet.preemptions},
      {"steps", r.fleet.steps},
      {"rejected", r.fleet.rejected},
      {"itl_sample_stride", r.fleet.itl_stride},
      {"replica_busy_share",
       r.report.results[0].duration_s > 0 ? r.fleet.busy_s / (r.report.results[0].duration_s * l.dp) : 0.0},
      {"overheads",
       {{"per_request_ms", r.overheads.per_request_s * 1e3},
        {"per_step_ms", r.overheads.per_step_s * 1e3},
        {"per_sampled_row_ms", r.overheads.per_sampled_row_s * 1e3}}},
      {"wall_s", r.wall_s},
      {"step_times", spec.profile ? "model profile" : "perf model"},
  };
  if (spec.profile)
    j["simulation"]["model_profile"] = {
        {"model_path", spec.profile->model_path},   {"noise_sigma", spec.profile->noise_sigma},
        {"drift_sigma", spec.profile->drift_sigma}, {"drift_period_s", spec.profile->drift_period_s},
        {"idle_factor", spec.profile->idle_factor}, {"idle_after_s", spec.profile->idle_after_s},
        {"measured_at", spec.profile->measured_at}};
  return j.dump(2) + "\n";
}

void write_simulation_text(const SimulationSpec& spec, const SimulationResult& r, std::ostream& out) {
  std::ostringstream table;
  loadtest::write_text_report(r.report, table);
  std::string text = table.str();
  text = text.substr(text.find('\n') + 1);        // bench's first line names a URL: ours names the deployment
  const size_t client = text.find("\nclient: ");  // the load generator's own cost: none here
  if (client != std::string::npos) text.erase(client + 1, text.find('\n', client + 1) - client);
  const planner::Layout& l = spec.layout;
  out << strfmt("parallm simulate  model '%s' (%s) on %d x %s as %s  %s\n", spec.request.model.name.c_str(),
                spec.request.weights.name.c_str(), l.gpus(), spec.request.gpu.name.c_str(), layout_text(l).c_str(),
                spec.load.kind == LoadKind::kPoisson ? "Poisson arrivals"
                : spec.load.kind == LoadKind::kTrace ? "trace arrivals"
                                                     : "closed loop");
  out << text;
  out << strfmt(
      "simulated: %llu steps, %llu preemptions, %lld rejected, %lld KV blocks of %lld tokens per "
      "replica, "
      "router %s, %.2f s of simulator time\n",
      static_cast<unsigned long long>(r.fleet.steps), static_cast<unsigned long long>(r.fleet.preemptions),
      static_cast<long long>(r.fleet.rejected), static_cast<long long>(r.n_kv_blocks),
      static_cast<long long>(spec.block_size), route_policy_name(spec.policy), r.wall_s);
  if (spec.profile)
    out << strfmt(
        "step times: the model's profile (%s, jitter %.1f%%, drift %.1f%% per %.2f s, x%.2f after %.0f ms idle, "
        "measured %s)\n",
        spec.profile->model_path.c_str(), 100 * spec.profile->noise_sigma, 100 * spec.profile->drift_sigma,
        spec.profile->drift_period_s, spec.profile->idle_factor, 1e3 * spec.profile->idle_after_s,
        spec.profile->measured_at.c_str());
}

}  // namespace parallm::sim
