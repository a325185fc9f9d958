#include "serve_compat.h"

#include <cstdio>

#include "util/check.h"

namespace parallm {

void ServeCompat::add_to(CLI::App& app) {
  const std::string group = "vLLM / llama-server compatibility (docs/server.md)";
  app.add_option("MODEL", model, "Model, as `vllm serve MODEL` takes it (the same as --model)")->group(group);
  app.add_flag("--enable-expert-parallel", enable_expert_parallel,
               "MoE models: experts spread over the tensor-parallel ranks (--ep = --tp)")
      ->group(group);
  app.add_flag("--enable-log-requests", enable_log_requests, "vLLM's request log: the same as --log-prompts")
      ->group(group);
  app.add_flag("--disable-log-requests", disable_log_requests, "Accepted: prompts are not logged unless --log-prompts")
      ->group(group);
  app.add_flag("--disable-log-stats", disable_log_stats, "No periodic throughput / KV cache line")->group(group);
  auto* uvicorn = app.add_option("--uvicorn-log-level", uvicorn_log_level,
                                 "The same as --log-level (critical = error, trace = debug)")
                      ->group(group);
  if (CLI::Option* level = app.get_option_no_throw("--log-level")) uvicorn->excludes(level);
  app.add_flag("--enforce-eager", enforce_eager, "Accepted: parallm captures no CUDA graphs, every step runs eagerly")
      ->group(group);
  app.add_flag("--trust-remote-code", trust_remote_code, "Accepted: parallm runs no code from a model's folder")
      ->group(group);
  notes_.emplace_back(
      app.add_option("--n-gpu-layers,--gpu-layers", n_gpu_layers, "llama-server's -ngl: accepted, no effect")
          ->group(group),
      "-ngl / --n-gpu-layers has no meaning here: parallm runs the whole model on its CPU devices");
  refused_.emplace_back(
      app.add_option("--quantization,-q", quantization, "Refused (the file's types; see --dtype)")->group(group),
      "parallm takes the quantization from the model file; --dtype q8_0 or q4_0 converts the "
      "weights at load");
  refused_.emplace_back(app.add_option("--speculative-config", speculative_config, "Refused")->group(group),
                        "parallm has no speculative decoding");
  refused_.emplace_back(app.add_option("--swap-space", swap_space, "Refused")->group(group),
                        "parallm preempts a sequence by recomputing it and keeps no CPU swap space");
  refused_.emplace_back(app.add_option("--seed", seed, "Refused (send 'seed' per request)")->group(group),
                        "parallm has no server-wide seed: send \"seed\" in a request for reproducible sampling");
}

void ServeCompat::apply(std::string* model_option, std::string* log_level, bool* log_prompts) const {
  for (const auto& [opt, why] : refused_) {
    if (opt->count() > 0) throw InputError(opt->get_name() + " is not supported: " + why);
  }
  for (const auto& [opt, note] : notes_) {
    if (opt->count() > 0) std::fprintf(stderr, "parallm serve: note: %s\n", note);
  }
  if (!model.empty()) {
    if (!model_option->empty() && *model_option != model) {
      throw InputError("two models given: --model '" + *model_option + "' and MODEL '" + model + "'; give one");
    }
    *model_option = model;
  }
  if (!uvicorn_log_level.empty()) {
    *log_level = uvicorn_log_level == "critical" ? "error" : uvicorn_log_level == "trace" ? "debug" : uvicorn_log_level;
  }
  if (enable_log_requests) *log_prompts = true;
}

void ServeCompat::apply_expert_parallel(const ModelConfig& config, int tp, int* ep) const {
  if (!enable_expert_parallel) return;
  if (!config.is_moe()) {
    std::fprintf(stderr, "parallm serve: note: the model has no experts: --enable-expert-parallel has no effect\n");
    return;
  }
  if (*ep != 1 && *ep != tp) {
    throw InputError("--enable-expert-parallel spreads the experts over the " + std::to_string(tp) +
                     " tensor-parallel ranks; --ep " + std::to_string(*ep) + " contradicts it");
  }
  if (tp == 1) {
    std::fprintf(stderr, "parallm serve: note: one tensor-parallel rank: --enable-expert-parallel has no effect\n");
  }
  *ep = tp;
}

}  // namespace parallm
