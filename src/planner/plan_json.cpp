// JSON form of a plan. Field names are fixed by issue 4 and documented in
// docs/plan.md; add fields, never rename them.
#include <cmath>

#include "planner/plan_output.h"

namespace parallm::planner {

namespace {

nlohmann::json engine_json(const EngineLaunch& e) {
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& l : e.lines) lines.push_back({{"where", l.where}, {"command", l.command}});
  return {{"lines", lines}, {"note", e.note}};
}

nlohmann::json cost_json(const MonthlyCost& c) {
  auto or_null = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"currency", c.currency},
          {"card_basis", c.card_basis},
          {"cards_per_month", c.cards_month},
          {"power_per_month", c.power_month},
          {"power_kwh_per_month", c.power_kwh_month},
          {"ops_per_month", c.ops_month},
          {"total_per_month", c.total_month},
          {"hours_per_month", MonthlyCost::kHoursPerMonth},
          {"output_tokens_per_month_at_volume", or_null(c.tokens_month_volume)},
          {"output_tokens_per_month_at_capacity", or_null(c.tokens_month_capacity)},
          {"cost_per_million_output_tokens_at_volume", or_null(c.cost_per_million_volume)},
          {"cost_per_million_output_tokens_at_capacity", or_null(c.cost_per_million_capacity)},
          {"utilization", or_null(c.utilization)}};
}

nlohmann::json layout_json(const Layout& l) { return {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"ep", l.ep}}; }

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json candidate_json(const Plan& plan, const Candidate& c) {
  const DeviceMemory& m = c.memory;
  nlohmann::json j;
  j["layout"] = layout_json(c.layout);
  j["gpus"] = c.layout.gpus();
  j["fits"] = c.fits;
  j["memory_per_device"] = {{"weights_bytes", m.weights_bytes},       {"kv_bytes", m.kv_bytes},
                            {"activation_bytes", m.activation_bytes}, {"overhead_bytes", m.overhead_bytes},
                            {"total_bytes", m.total_bytes},           {"capacity_bytes", m.capacity_bytes},
                            {"usable_bytes", m.usable_bytes}};
  j["kv_capacity_tokens"] = m.kv_capacity_tokens;
  j["max_concurrency_kv"] = c.max_concurrency_kv;
  j["tp_link"] = {
      {"kind", c.tp_link.kind}, {"bw_gbps", c.tp_link.size > 1 ? c.tp_link.bw_gbps : 0.0}, {"fast", c.tp_link.fast}};
  // An unstable load (arrivals beyond what the replica serves) has no finite
  // latency: null, as the report's "\u2013".
  j["predicted"] = {{"concurrency_per_replica", c.at_load.concurrency},
                    {"ttft_ms", number_or_null(c.at_load.ttft_ms)},
                    {"tpot_ms", number_or_null(c.at_load.tpot_ms)},
                    {"ttft_p50_ms", number_or_null(c.at_load.ttft_p50_ms)},
                    {"ttft_p95_ms", number_or_null(c.at_load.ttft_p95_ms)},
                    {"tpot_p50_ms", number_or_null(c.at_load.tpot_p50_ms)},
                    {"tpot_p95_ms", number_or_null(c.at_load.tpot_p95_ms)},
                    {"queue_ms", number_or_null(c.at_load.queue_ms)},
                    {"stable", c.at_load.stable},
                    {"output_tokens_per_s", c.output_tokens_per_s},
                    {"max_concurrency_at_slo", c.max_concurrency_slo},
                    {"capacity_output_tokens_per_s", c.capacity_tokens_per_s}};
  j["meets_slo"] = c.meets_slo;
  j["meets_load"] = c.meets_load;
  // No SLO capacity, no cost: null, never 0.
  j["cost_per_million_output_tokens"] =
      c.max_concurrency_slo > 0 ? number_or_null(c.cost_per_million_output_tokens) : nlohmann::json(nullptr);
  j["cost_per_million_output_tokens_at_load"] = number_or_null(c.cost_per_million_at_load);
  // The cost the ranking compared (= one of the two above, per ranking.cost_at).
  j["ranked_cost_per_million_output_tokens"] = number_or_null(ranked_cost(plan, c));
  j["replicas_needed"] = c.replicas_needed;
  return j;
}

}  // namespace

nlohmann::json plan_to_json(const Plan& plan) {
  const PlanRequest& r = plan.request;
  nlohmann::json j;
  j["model"] = {{"name", r.model.name},
                {"params_total", plan.params.total},
                {"params_active", plan.params.active},
                {"weight_format", r.weights.name},
                {"weight_bytes", plan.weight_bytes},
                {"kv_dtype", r.kv_dtype},
                {"kv_bytes_per_token", plan.kv_bytes_per_token},
                {"max_model_len", plan.max_model_len}};
  j["hardware"] = {{"gpu", r.gpu.name},
                   {"gpus_per_node", r.fabric.gpus_per_node},
                   {"nodes", r.fabric.nodes},
                   {"memory_bytes", r.gpu.memory_bytes},
                   {"mem_bw_gbps", r.gpu.mem_bw_gbps},
                   {"interconnect", r.fabric.description}};
  const Workload& w = r.workload;
  j["workload"] = {{"input_len", w.input_len},
                   {"output_len", w.output_len},
                   {"mode", w.mode == LoadMode::kOffline ? "offline"
                            : w.mode == LoadMode::kQps   ? "qps"
                                                         : "concurrency"},
                   {"concurrency", w.concurrency},
                   {"qps", w.qps},
                   {"ttft_slo_ms", w.ttft_slo_ms},
                   {"tpot_slo_ms", w.tpot_slo_ms}};
  j["candidates"] = nlohmann::json::array();
  for (const auto& c : plan.candidates) j["candidates"].push_back(candidate_json(plan, c));
  j["recommendation"] = {{"layout", layout_json(plan.recommended)},
                         {"verdict", verdict_name(plan.verdict)},
                         {"reasons", plan.reasons},
                         {"candidate_index", plan.best},
                         {"gpus", plan.recommended.gpus()},
                         {"runner_up_index", plan.runner_up}};
  j["ranking_basis"] = plan.ranking_basis;
  j["ranking"] = {{"basis", plan.ranking_basis},
                  {"objective", objective_name(r.workload.objective)},
                  {"minimises", plan.ranked_by == Objective::kLatency      ? "p95_tpot_at_load"
                                : plan.ranked_by == Objective::kThroughput ? "minus_capacity_output_tokens_per_s"
                                                                           : "cost_per_million_output_tokens"},
                  {"cost_at", plan.ranked_at_load ? "load" : "capacity"}};
  j["capacity"] = {{"replicas", plan.capacity.replicas},
                   {"gpus", plan.capacity.gpus},
                   {"peak", plan.capacity.peak},
                   {"unit", plan.capacity.unit},
                   {"per_replica", plan.capacity.per_replica},
                   {"headroom", r.economics.headroom},
                   {"cost_per_hour", plan.capacity.cost_per_hour},
                   {"cost_per_month", plan.capacity.cost_per_month},
                   {"cost_per_million_output_tokens", plan.capacity.cost_per_million_output_tokens}};
  j["launch"] = {{"parallm", plan.commands.parallm},
                 {"vllm", plan.commands.vllm},
                 {"sglang", plan.commands.sglang},
                 {"trtllm", plan.commands.trtllm},
                 {"llamacpp", plan.commands.llamacpp}};
  j["launch_all"] = {{"parallm", engine_json(plan.commands.parallm_all)},
                     {"vllm", engine_json(plan.commands.vllm_all)},
                     {"sglang", engine_json(plan.commands.sglang_all)},
                     {"trtllm", engine_json(plan.commands.trtllm_all)},
                     {"llamacpp", engine_json(plan.commands.llamacpp_all)}};
  j["cost"] = cost_json(plan.cost);
  return j;
}

}  // namespace parallm::planner
