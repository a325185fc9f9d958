// What the three deployment writers share: flag checks, one replica's argv
// (from launch_commands(), with dp = 1: each pod, container or unit is one
// replica), the GPU groups on one host, and YAML quoting.
// The GPU groups come from gpu_groups.h: consecutive without a topology,
// NV#-linked and spread over NUMA nodes with `plan --topology`.
#include "planner/deploy_emit.h"

#include <sstream>

#include "planner/gpu_groups.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::planner {

EmitKind parse_emit_kind(const std::string& s) {
  if (s == "k8s") return EmitKind::kK8s;
  if (s == "compose") return EmitKind::kCompose;
  if (s == "systemd") return EmitKind::kSystemd;
  throw InputError("--emit '" + s + "': expected k8s, compose or systemd");
}

EngineInfo engine_info(const std::string& engine) {
  // NOTE: the metric is each server's own waiting-queue gauge; only parallm's has a rule in
  // deploy/k8s/prometheus-adapter-config.yaml, the others need one of the same shape
  // (docs/plan.md).
  if (engine == "parallm") return {"registry.example.com/parallm:0.2.0-cuda", "parallm_num_requests_waiting"};
  if (engine == "vllm") return {"docker.io/vllm/vllm-openai:latest", "vllm_num_requests_waiting"};
  if (engine == "sglang") return {"docker.io/lmsysorg/sglang:latest", "sglang_num_queue_reqs"};
  if (engine == "trtllm") return {"nvcr.io/nvidia/tensorrt-llm/release:latest", "trtllm_num_requests_waiting"};
  if (engine == "llamacpp") return {"ghcr.io/ggml-org/llama.cpp:server-cuda", "llamacpp_requests_deferred"};
  throw InputError("--engine '" + engine + "': expected parallm, vllm, sglang, trtllm or llamacpp");
}

void check_engine(const std::string& engine) { (void)engine_info(engine); }

int emit_replicas(const Plan& plan) {
  if (plan.recommended.tp <= 0)
    throw InputError("--emit: no layout fits this model on this hardware; nothing to deploy");
  return static_cast<int>(std::max<int64_t>(1, plan.capacity.replicas));
}

std::vector<std::string> replica_argv(const Plan& plan, const std::string& engine, const std::string& host, int port,
                                      int drain_s) {
  Candidate c;
  if (plan.best >= 0)
    c = plan.candidates[plan.best];
  else
    c.layout = plan.recommended;
  c.layout.dp = 1;
  const LaunchCommands cmd = launch_commands(plan, c);
  const std::string* line = engine == "parallm"    ? &cmd.parallm
                            : engine == "vllm"     ? &cmd.vllm
                            : engine == "sglang"   ? &cmd.sglang
                            : engine == "trtllm"   ? &cmd.trtllm
                            : engine == "llamacpp" ? &cmd.llamacpp
                                                   : nullptr;
  if (!line) throw InputError("--engine '" + engine + "': expected parallm, vllm, sglang, trtllm or llamacpp");
  if (line->empty()) {
    // The engine cannot run this plan (launch_commands.cpp says why).
    const EngineLaunch& e = engine == "parallm"  ? cmd.parallm_all
                            : engine == "vllm"   ? cmd.vllm_all
                            : engine == "sglang" ? cmd.sglang_all
                            : engine == "trtllm" ? cmd.trtllm_all
                                                 : cmd.llamacpp_all;
    throw InputError("--engine " + engine + ": " + (e.note.empty() ? "no launch line for this plan" : e.note));
  }
  std::vector<std::string> argv;
  std::istringstream in(*line);
  for (std::string w; in >> w;) {
    if (w[0] == '#') break;  // a trailing comment (only written for dp > 1)
    argv.push_back(w);
  }
  argv.push_back("--host");
  argv.push_back(host);
  argv.push_back("--port");
  argv.push_back(std::to_string(port));
  if (engine == "parallm") {
    argv.push_back("--shutdown-timeout");
    argv.push_back(std::to_string(drain_s));
  }
  return argv;
}

std::vector<std::vector<int>> replica_gpu_groups(const Plan& plan) {
  const int n = emit_replicas(plan);
  const int per = plan.recommended.tp * plan.recommended.pp;
  std::vector<std::vector<int>> groups(n);
  if (n * per <= plan.request.fabric.gpus_per_node) {
    // One host holds them all: the groups of gpu_groups.h (topology-aware).
    const std::vector<GpuGroup> g = gpu_groups(plan.request.fabric, per, n, plan.recommended.tp);
    for (int i = 0; i < n; ++i) groups[i] = g[static_cast<size_t>(i)].gpus;
    return groups;
  }
  // More than one host's worth (one_host_note says so): consecutive indices.
  for (int i = 0; i < n; ++i)
    for (int g = 0; g < per; ++g) groups[i].push_back(i * per + g);
  return groups;
}

std::string one_host_note(const Plan& plan) {
  const int need = emit_replicas(plan) * plan.recommended.tp * plan.recommended.pp;
  const int have = plan.request.fabric.gpus_per_node;
  if (need <= have) return "";
  return strfmt(
      "# NOTE: the plan's replicas need %d GPUs; one node of this plan has %d: spread the replicas "
      "over hosts.\n",
      need, have);
}

std::string yaml_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"')
      out += "\\\"";
    else if (ch == '\\')
      out += "\\\\";
    else if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch < 0x20)
      out += strfmt("\\x%02x", ch);
    else
      out += static_cast<char>(ch);
  }
  return out + "\"";
}

std::vector<EmittedFile> emit_deployment(const Plan& plan, EmitKind kind, const EmitOptions& o) {
  check_engine(o.engine);
  switch (kind) {
    case EmitKind::kK8s:
      return emit_k8s(plan, o);
    case EmitKind::kCompose:
      return emit_compose(plan, o);
    case EmitKind::kSystemd:
      return emit_systemd(plan, o);
  }
  return {};
}

}  // namespace parallm::planner
