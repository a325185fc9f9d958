#include "engine_cli.h"

#include <sstream>

#include "comm/comm_factory.h"
#include "core/device.h"
#include "util/check.h"
#ifdef PARALLM_HAVE_MPI
#include "comm/mpi_comm.h"
#endif

namespace parallm {

void EngineCli::add_to(CLI::App& app, bool model_required) {
  auto* m = app.add_option("--model,-m", model, "Model: GGUF file, Hugging Face folder, or llama2.c .bin");
  if (model_required) m->required();
  app.add_option("--tokenizer", tokenizer, "Tokenizer file (default: the model's own)");
  app.add_option("--threads,-t", threads, "Threads per device (default: cores / devices)");
  app.add_option("--ctx-size,-c", ctx_size, "Context length (default: the model's metadata)");
  app.add_option("--kv-dtype", kv_dtype, "KV cache dtype: f32, f16, bf16 or q8_0 (about half of f16's memory)")->capture_default_str();
  app.add_option("--dtype", dtype, "Convert weights at load: f16, bf16, q8_0 or q4_0");
  app.add_option("--tp", tp, "Tensor-parallel ranks")->capture_default_str();
  app.add_option("--pp", pp, "Pipeline-parallel stages")->capture_default_str();
  app.add_option("--ep", ep, "Expert-parallel ranks (MoE models)")->capture_default_str();
  app.add_option("--pp-layers", pp_layers, "Layers per pipeline stage, e.g. 3,2 (default: balanced)");
  app.add_option("--devices", devices, "Devices, e.g. cpu:0,cpu:1 (default: one CPU device per rank)");
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
  o.kv_dtype = parse_dtype(kv_dtype);
  if (o.kv_dtype != DType::kF32 && o.kv_dtype != DType::kF16 && o.kv_dtype != DType::kBF16 &&
      o.kv_dtype != DType::kQ8_0) {
    throw InputError("--kv-dtype must be f32, f16, bf16 or q8_0");
  }
  if (!dtype.empty()) {
    DType d = parse_dtype(dtype);
    if (d == DType::kQ4_K || d == DType::kQ6_K) throw InputError("--dtype must be f32, f16, bf16, q8_0 or q4_0");
    o.weight_dtype = d;
  }
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
    auto ids = parse_device_list(devices);
    const int world = std::max(tp, ep) * pp;
    if (static_cast<int>(ids.size()) != world) {
      throw InputError("--devices lists " + std::to_string(ids.size()) + " devices but the layout needs " +
                       std::to_string(world) + " (tp x pp)");
    }
    for (const auto& id : ids) {
      if (id.kind != DeviceId::Kind::kCpu) {
        throw InputError("this build runs models on CPU devices only; CUDA devices serve the NCCL communicator");
      }
    }
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
