// Internal to the launch-line builders (launch_commands.cpp and one file per
// engine): what every engine's lines are made of.
#pragma once
#include <string>
#include <vector>

#include "planner/gpu_groups.h"
#include "planner/model_catalog.h"
#include "planner/plan.h"

namespace parallm::planner {

struct LaunchContext {
  const Plan* plan = nullptr;
  Layout layout;
  std::string model;       // what the engines load: HF id or local path
  std::string name;        // short name for placeholder paths ("llama-3.1-8b")
  bool local = false;      // model is a file or directory on this machine
  bool gguf_file = false;  // model is a .gguf file
  QuantizedRepos repos;    // catalog repositories in other formats
  long long max_model_len = 0;
  long long max_num_seqs = 1;  // per replica (launch_commands.cpp: SLO capacity capped by KV)
  int gpus_per_node = 1;
  // Attention data-parallel + expert-parallel (ep > tp with dp > 1: the
  // experts span the dp ranks, DeepSeek-V3's serving layout): the dp ranks are
  // one replica of dp x tp x pp GPUs, not independent copies.
  bool attn_dp_ep = false;
  int group_size = 1;  // GPUs of one replica: tp x pp (x dp with attn_dp_ep)
  bool replica_spans_nodes = false;
  int nodes_used = 1;            // nodes the whole deployment occupies
  std::vector<GpuGroup> groups;  // [dp] from gpu_groups.h
  bool kv_8bit = false;          // planned KV cache of one byte a value (fp8/int8)
  bool kv_4bit = false;          // q4_0-sized KV cache
};

// Appends " --flag value"-style text.
std::string flag(const char* name, const std::string& value);
std::string flag(const char* name, long long value);
// vLLM's and SGLang's --dtype for unquantized weights ("" for bf16, their default).
std::string hf_dtype_flag(const std::string& weights);

EngineLaunch launch_vllm(const LaunchContext& c);
EngineLaunch launch_sglang(const LaunchContext& c);
EngineLaunch launch_trtllm(const LaunchContext& c);
EngineLaunch launch_llamacpp(const LaunchContext& c);
EngineLaunch launch_parallm(const LaunchContext& c);

// Where each replica runs, for per-replica lines: "replica 1 (node 0)".
std::string replica_where(const LaunchContext& c, int replica);
// "CUDA_VISIBLE_DEVICES=0,3,1,2 " for a one-node command whose engine takes
// the GPUs in order (TP ranks first, then stages, then DP ranks), when the
// topology's groups are not simply 0, 1, 2, ...; "" otherwise.
std::string device_prefix(const LaunchContext& c);

}  // namespace parallm::planner
