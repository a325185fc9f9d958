// The engine flags shared by `generate`, `bench-model` and `serve`
// (model, tokenizer, threads, context, dtypes, parallel layout), parsed and
// validated once into EngineOptions.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"

namespace parallm {

// --kv-dtype / --kv-cache-dtype: parallm's names, and vLLM's auto (= f16);
// vLLM's fp8 variants are refused with what parallm offers instead.
DType parse_kv_dtype(const std::string& value);
// --dtype: parallm's weight conversions (f16, bf16, q8_0, q4_0, f32) and
// vLLM's names (auto = the file's types, half, float16, bfloat16, float,
// float32). nullopt: no conversion.
std::optional<DType> parse_weight_dtype(const std::string& value);

struct EngineCli {
  std::string model, tokenizer, kv_dtype = "f16", dtype, devices, device_memory, comm = "local", pp_layers;
  int threads = 0, tp = 1, pp = 1, ep = 1;
  int64_t ctx_size = 0;
  double comm_timeout_s = 60.0;

  // model_required: false for commands that have a built-in default model.
  void add_to(CLI::App& app, bool model_required = true);
  EngineOptions to_options() const;
};

// MPI is initialized when --comm mpi (or nccl under mpirun) asks for it;
// finalized when the guard goes out of scope.
class CommSession {
 public:
  explicit CommSession(const std::string& comm);
  ~CommSession();
  bool active() const { return active_; }
  // This process's rank among the MPI processes (0 without MPI): rank 0 is
  // the driver, known before any engine is built.
  int rank() const { return rank_; }

 private:
  bool active_ = false;
  int rank_ = 0;
};

}  // namespace parallm
