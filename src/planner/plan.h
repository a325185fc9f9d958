// The deployment planner: inputs (model, devices, workload, economics), the
// candidate layouts it evaluates, and the decision it reaches, in the terms
// of the deployment playbook: "fine on one device", "doesn't fit" (needs tp/pp
// or quantization), "can't keep up" (fits, but the load needs replicas).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "planner/fabric.h"
#include "planner/memory_model.h"
#include "planner/perf_model.h"

namespace parallm::planner {

enum class LoadMode { kConcurrency, kQps, kOffline };
// What the ranking minimises. kAuto: with a workload (load_given), meet the
// SLOs at that load, then the cost per output token at that load; without
// one, the cost per output token at full SLO capacity.
enum class Objective { kAuto, kLatency, kThroughput, kCost };
const char* objective_name(Objective o);  // "auto", "latency", "throughput", "cost"
// Throws InputError for anything else.
Objective parse_objective(const std::string& s);
enum class Verdict { kFine, kDoesntFit, kCantKeepUp };
const char* verdict_name(Verdict v);  // "fine", "doesnt_fit", "cant_keep_up"

// Busiest EP rank's routed tokens over the mean, without expert replication:
// docs/plan.md gives the source. --expert-imbalance overrides it.
constexpr double kDefaultExpertImbalance = 1.3;

struct Workload {
  int64_t input_len = 1024;
  int64_t output_len = 256;
  LoadMode mode = LoadMode::kConcurrency;
  double concurrency = 1;  // sequences in flight, all replicas together
  double qps = 0;          // requests per second (mode kQps)
  double ttft_slo_ms = 0;  // 0 = none
  double tpot_slo_ms = 0;
  int64_t max_model_len = 0;  // 0 = input_len + output_len
  bool load_given = false;    // --concurrency or --qps was given (not the default of 1)
  Objective objective = Objective::kAuto;
};

struct Economics {
  double gpu_hour_price = 0;  // rent per device-hour; 0 = catalog price of the device (USD)
  double gpu_price = 0;       // purchase price per device; > 0 = depreciation instead of rent
  double depreciation_months = 36;
  double gpu_watts = 0;       // per device; 0 = catalog board power
  double power_price = 0;     // per kWh; 0 = power not counted
  double ops_cost_month = 0;  // staff and hosting per month
  double daily_requests = 0;  // real volume; 0 = unknown (cost at full capacity only)
  std::string currency = "USD";
  double headroom = 1.3;
  double peak_concurrency = 0;  // 0 = the workload's
  double peak_qps = 0;
};

struct PlanRequest {
  ModelSpec model;
  std::string model_ref;  // what launch commands load (catalog repo or path)
  WeightFormat weights;
  std::string kv_dtype = "auto";
  double kv_elem_bytes = 2;
  GpuSpec gpu;
  Fabric fabric;
  Layout pinned{0, 0, 0, 0};  // 0 = let the search choose
  Workload workload;
  Economics economics;
  MemoryOptions memory;
  PerfConstants constants;
  // Routed tokens per expert on the busiest EP rank over the mean (1 = perfectly
  // balanced); 0 = the published default (docs/plan.md, kDefaultExpertImbalance).
  double expert_imbalance = 0;
};

struct Candidate {
  Layout layout;
  DeviceMemory memory;
  GroupLink tp_link;
  bool fits = false;
  int64_t max_concurrency_kv = 0;    // per replica, sequences of input+output tokens
  int64_t max_concurrency_slo = 0;   // per replica, also meeting the SLOs
  double max_qps_slo = 0;            // per replica, Poisson arrivals meeting the SLOs
  LoadPoint at_load;                 // per replica at its share of the workload
  LoadPoint at_capacity;             // per replica at max_concurrency_slo
  double output_tokens_per_s = 0;    // all replicas at the workload
  double capacity_tokens_per_s = 0;  // all replicas at max_concurrency_slo
  // At full SLO capacity, all replicas; NaN (and has_cost false) when the
  // layout has no SLO capacity: printers show "-", never 0.
  double cost_per_million_output_tokens = 0;
  bool has_cost = false;
  // At the workload: the layout's devices over the tokens it delivers (NaN
  // when it does not fit or cannot serve the load stably).
  double cost_per_million_at_load = 0;
  int64_t replicas_needed = 0;  // replicas of this layout the peak needs (x headroom)
  bool meets_slo = false;       // at the workload
  bool meets_load = false;      // the workload fits these replicas within the SLOs
  std::string note;             // why it ranks where it does
};

struct Capacity {
  double peak = 0;         // peak load in `unit`
  std::string unit;        // "concurrent requests" | "requests/s" | "offline"
  double per_replica = 0;  // capacity of one replica in `unit`
  int64_t replicas = 0;
  int64_t gpus = 0;
  double cost_per_hour = 0;   // cost_model.h: cost_per_month / 720 h
  double cost_per_month = 0;  // cost_model.h: cards + power + ops, 30 days
  double cost_per_million_output_tokens = 0;
};

// One command of a launch: where it runs ("node 0", "replica 1 (node 0)",
// "" = the only one) and the shell line itself (no comments: it runs as printed).
struct LaunchLine {
  std::string where;
  std::string command;
};

// Per engine: every command to run (one per node or per replica when the
// engine needs that), and a note (why there is no line, what a placeholder
// path stands for, which checkpoint holds the quantized weights).
struct EngineLaunch {
  std::vector<LaunchLine> lines;  // empty = the engine cannot run this plan (note says why)
  std::string note;
};

struct LaunchCommands {
  // The first command of each engine (one replica / the head node), "" when none.
  std::string parallm, vllm, sglang, trtllm, llamacpp;
  EngineLaunch parallm_all, vllm_all, sglang_all, trtllm_all, llamacpp_all;
};

struct Plan {
  PlanRequest request;
  ParamCounts params;
  double weight_bytes = 0;
  double kv_bytes_per_token = 0;
  int64_t max_model_len = 0;
  std::vector<Candidate> candidates;  // ranked, best first
  int best = -1;                      // index into candidates, -1 = nothing fits
  int runner_up = -1;
  Layout recommended;  // also set when it needs more devices than given
  Verdict verdict = Verdict::kFine;
  // What the ranking minimised, in words for the report ("cost per output
  // token at full capacity (no workload given)", ...).
  std::string ranking_basis;
  // The resolved objective (kAuto becomes kCost) and, for kCost, whether the
  // cost compared was the one at the workload (cost_per_million_at_load) or
  // at full SLO capacity: the table's cost column and the reasons use the same.
  Objective ranked_by = Objective::kCost;
  bool ranked_at_load = false;
  std::vector<std::string> reasons;
  Capacity capacity;
  MonthlyCost cost;  // cost_model.h for capacity.gpus devices
  LaunchCommands commands;
};

// Throws InputError for inconsistent inputs and for SLOs no layout can meet.
Plan make_plan(const PlanRequest& request);

// Enumerated layouts for `gpus_total` devices (exposed for tests): tp divides
// the heads (and KV heads divide tp or tp divides them), tp within a node,
// pp <= n_layer, ep divides the experts and either divides tp (experts split
// inside the tp group) or, with pp = 1, is a multiple of tp dividing dp x tp
// (attention data-parallel over ep/tp replicas + experts expert-parallel over
// ep devices); pins respected.
std::vector<Layout> enumerate_layouts(const ModelSpec& m, int gpus_per_node, int nodes, const Layout& pinned);

// Evaluates every enumerated layout and appends them ranked (best first).
void evaluate_candidates(const PlanRequest& r, const ParamCounts& p, int64_t max_model_len,
                         std::vector<Candidate>* out);

// Sorts evaluated candidates best first (ranking.cpp) and returns what the
// order minimised, in words (Plan::ranking_basis).
std::string rank_candidates(const PlanRequest& r, std::vector<Candidate>* candidates);
// What rank_candidates minimises for this workload: the objective with kAuto
// resolved to kCost, and whether that cost is the one at the workload.
Objective resolved_objective(const Workload& w);
bool ranks_at_load(const Workload& w);
// The cost the ranking compared for `c` (at load or at capacity, per
// ranks_at_load), NaN when the candidate has none.
double ranked_cost(const Plan& plan, const Candidate& c);
// The cost objectives' preference for small replicas: the factor a layout's
// cost is multiplied by before comparing (1 + 10% per doubling of devices).
double small_replica_factor(int gpus_per_replica);

LaunchCommands launch_commands(const Plan& plan, const Candidate& c);

// What one device costs an hour under the request's economics (cost_model.h:
// rent or depreciation, plus power; ops excluded, being per deployment): the
// price behind every candidate's cost per million output tokens.
double device_hour_price(const PlanRequest& r);
// The seeds' monthly cost (cost_model.h) of `gpus` devices of the request.
MonthlyCost deployment_cost(const PlanRequest& r, double gpus, double capacity_tokens_per_s);

}  // namespace parallm::planner
