// Deployment files for a plan's recommended layout (`parallm plan --emit`):
// Kubernetes manifests, a compose file, systemd units. Pure string building
// from the Plan; apps/cmd_plan.cpp writes the files. Every replica runs the
// engine's launch line (launch_commands.cpp) for one replica (dp = 1) of the
// layout on tp x pp GPUs; the number of replicas is plan.capacity.replicas,
// the number the report prints. YAML is written by hand: a small subset
// (2-space indentation, block maps and lists, every string double-quoted).
#pragma once
#include <string>
#include <vector>

#include "planner/plan.h"

namespace parallm::planner {

enum class EmitKind { kK8s, kCompose, kSystemd };

struct EmitOptions {
  std::string engine = "vllm";   // parallm|vllm|sglang|trtllm|llamacpp
  std::string name = "parallm";  // object / service / unit name prefix
  int port = 8000;               // the server's port inside a pod or container; host ports count up from it
  int drain_s = 30;              // parallm serve --shutdown-timeout; grace periods cover it
};

struct EmittedFile {
  std::string name;  // file name inside --out
  std::string text;
};

// Throw InputError naming the accepted values.
EmitKind parse_emit_kind(const std::string& s);
void check_engine(const std::string& engine);

// Per engine: the container image and the name prometheus-adapter gives its
// waiting-queue gauge (':' becomes '_', as deploy/k8s/prometheus-adapter-config.yaml).
struct EngineInfo {
  const char* image;
  const char* queue_metric;
};
EngineInfo engine_info(const std::string& engine);

// argv of one replica: the engine's launch line for the layout with dp = 1,
// split on blanks, plus the host and port (and parallm's drain timeout).
std::vector<std::string> replica_argv(const Plan& plan, const std::string& engine, const std::string& host, int port,
                                      int drain_s);
// GPU indices of each replica on one host: groups of tp x pp from gpu_groups.h
// (topology-aware with --topology), consecutive when they need more than one host.
std::vector<std::vector<int>> replica_gpu_groups(const Plan& plan);
// For compose and systemd: a comment line when the replicas need more GPUs
// than one node of the plan has ("" when they fit).
std::string one_host_note(const Plan& plan);
// The replicas to deploy: plan.capacity.replicas (at least 1). Throws InputError when nothing fits.
int emit_replicas(const Plan& plan);

std::vector<EmittedFile> emit_k8s(const Plan& plan, const EmitOptions& o);
std::vector<EmittedFile> emit_compose(const Plan& plan, const EmitOptions& o);
std::vector<EmittedFile> emit_systemd(const Plan& plan, const EmitOptions& o);
std::vector<EmittedFile> emit_deployment(const Plan& plan, EmitKind kind, const EmitOptions& o);

// A YAML double-quoted scalar ("..." with \" \\ and control characters escaped).
std::string yaml_quote(const std::string& s);

}  // namespace parallm::planner
