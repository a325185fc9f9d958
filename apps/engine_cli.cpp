#include "engine_cli.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "comm/comm_factory.h"
#include "core/device.h"
#include "util/check.h"
#ifdef PARALLM_HAVE_MPI
#include "comm/mpi_comm.h"
#endif

namespace parallm {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

DType parse_kv_dtype(const std::string& value) {
  const std::string v = lower(value);
  if (v == "auto") return DType::kF16;
  // NOTE: vLLM's fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla: parallm keeps
  // no fp8 KV cache; q8_0 is its 8-bit one (a scale per 32 values).
  if (v.rfind("fp8", 0) == 0) {
    throw InputError("--kv-cache-dtype " + value +
                     ": parallm has no fp8 KV cache; use q8_0 (8-bit, about half of f16's memory), f16 (= auto), bf16 "
                     "or f32");
  }
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    if (v == dtype_name(t)) return t;
  }
  throw InputError("--kv-dtype / --kv-cache-dtype must be auto, f16, bf16, q8_0 or f32, not '" + value + "'");
}

std::optional<DType> parse_weight_dtype(const std::string& value) {
  const std::string v = lower(value);
  if (v.empty() || v == "auto") return std::nullopt;  // the file's own types
  if (v == "half" || v == "float16") return DType::kF16;
  if (v == "bfloat16") return DType::kBF16;
  if (v == "float" || v == "float32") return DType::kF32;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    if (v == dtype_name(t)) return t;
  }
  throw InputError(
      "--dtype must be auto (the file's types), f16 (half, float16), bf16 (bfloat16), f32 (float, float32), "
      "q8_0 or q4_0, not '" +
      value + "'");
}

void EngineCli::add_to(CLI::App& app, bool model_required) {
  auto* m = app.add_option("--model,-m", model, "Model: GGUF file, Hugging Face folder, or llama2.c .bin");
  if (model_required) m->required();
  app.add_option("--tokenizer", tokenizer, "Tokenizer file (default: the model's own)");
  app.add_option("--threads,-t", threads, "Threads per device (default: cores / devices)");
  app.add_option("--ctx-size,-c", ctx_size, "Context length (default: the model's metadata)");
  app.add_option("--kv-dtype,--kv-cache-dtype", kv_dtype,
                 "KV cache dtype: f32, f16, bf16 or q8_0 (about half of f16's memory); auto = f16")
      ->capture_default_str();
  app.add_option("--dtype", dtype,
                 "Convert weights at load: f16, bf16, q8_0, q4_0 or f32 (vLLM's auto keeps the file's, half, float16, "
                 "bfloat16, float, float32)");
  app.add_option("--tp,--tensor-parallel-size", tp, "Tensor-parallel ranks (-tp)")->capture_default_str();
  app.add_option("--pp,--pipeline-parallel-size", pp, "Pipeline-parallel stages (-pp)")->capture_default_str();
  app.add_option("--ep", ep, "Expert-parallel ranks (MoE models)")->capture_default_str();
  app.add_option("--pp-layers", pp_layers, "Layers per pipeline stage, e.g. 3,2 (default: balanced)");
  app.add_option("--devices", devices,
                 "Devices, one per rank: cpu:0,cpu:1 / cuda:0,cuda:1 (a GPU may repeat: ranks sharing it) / emu:0 (the "
                 "emulated GPU) (default: one CPU device per rank)");
  app.add_option("--device-memory", device_memory, "Memory budget per device, e.g. 1G (default: RAM / devices)");
  app.add_option("--comm", comm, "Communicator: local, mpi or nccl")->capture_default_str();
  app.add_option("--comm-timeout", comm_timeout_s, "Seconds before a stalled collective fails")->capture_default_str();
}

EngineOptions EngineCli::to_options() const {
  EngineOptions o;
  o.model_path = model;
  o.tokenizer_path = tokenizer;
  if (threads < 0) throw InputError("--threads must be >= 0");
  o.threads = threads;
  if (ctx_size < 0) throw InputError("--ctx-size must be > 0");
  o.ctx_size = ctx_size;
  o.kv_dtype = parse_kv_dtype(kv_dtype);
  o.weight_dtype = parse_weight_dtype(dtype);
  o.tp = tp;
  o.pp = pp;
  o.ep = ep;
  if (!pp_layers.empty()) {
    std::stringstream ss(pp_layers);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        o.pp_layers.push_back(std::stoll(item));
      } catch (...) {
        throw InputError("--pp-layers must be a comma-separated list of layer counts, e.g. 3,2");
      }
    }
  }
  o.comm = comm;
  if (!(comm_timeout_s > 0)) throw InputError("--comm-timeout must be > 0");
  o.comm_timeout_s = comm_timeout_s;
  if (!device_memory.empty()) o.device_memory_bytes = static_cast<int64_t>(parse_size(device_memory));
  if (!devices.empty()) {
    parse_device_list(devices);  // syntax now; the engine checks the list against the layout and the machine
    o.devices = devices;
  }
  return o;
}

CommSession::CommSession(const std::string& comm) {
  CommBackend b = parse_comm_backend(comm);
#ifdef PARALLM_HAVE_MPI
  if (b == CommBackend::kMpi || (b == CommBackend::kNccl && mpi_world_size() > 0)) {
    init_mpi(nullptr, nullptr);
    active_ = true;
    rank_ = mpi_world_rank();
  }
#else
  (void)b;
#endif
}

CommSession::~CommSession() {
#ifdef PARALLM_HAVE_MPI
  if (active_) finalize_mpi();
#endif
}

}  // namespace parallm
