// vLLM's and llama-server's `serve` flags that are not just second names of
// parallm's options (those sit on the options themselves: --tensor-parallel-size
// on --tp, --gpu-memory-utilization on --memory-utilization, --alias on
// --served-model-name, ...): the positional MODEL, flags accepted with no
// effect, flags mapped at start, and flags refused with the reason.
// docs/server.md "vLLM and llama-server flags" is the table of all of them.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "config/model_config.h"

namespace parallm {

struct ServeCompat {
  std::string model;  // `vllm serve MODEL`: the positional model
  bool enable_expert_parallel = false;
  bool enable_log_requests = false;  // vLLM logs each request's prompt: --log-prompts
  bool disable_log_stats = false;    // no periodic throughput line
  std::string uvicorn_log_level;     // --log-level, when given

  void add_to(CLI::App& app);
  // Before anything loads: refuses what parallm cannot honour (InputError
  // naming the flag), prints a note for flags accepted without effect,
  // resolves --model against MODEL, and maps the log flags.
  void apply(std::string* model_option, std::string* log_level, bool* log_prompts) const;
  // --enable-expert-parallel once the model's shape is known: experts spread
  // over the tp ranks (ep = tp) for a MoE model; a note otherwise.
  void apply_expert_parallel(const ModelConfig& config, int tp, int* ep) const;

 private:
  std::string n_gpu_layers, quantization, speculative_config, swap_space, seed;
  bool enforce_eager = false, trust_remote_code = false, disable_log_requests = false;
  std::vector<std::pair<const CLI::Option*, const char*>> refused_;  // option, why
  std::vector<std::pair<const CLI::Option*, const char*>> notes_;    // option, note
};

}  // namespace parallm
