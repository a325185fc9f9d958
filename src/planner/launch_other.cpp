// TensorRT-LLM (`trtllm-serve`, tensorrt_llm/commands/serve.py), llama.cpp
// (`llama-server`, common/arg.cpp) and parallm (`parallm serve`) launch lines.
// Neither trtllm-serve nor llama-server has built-in data parallelism: with
// dp > 1 they get one command per replica, each with its CUDA_VISIBLE_DEVICES
// group (gpu_groups.h) and its own port. TensorRT-LLM takes quantization from
// the checkpoint (ModelOpt FP8 / int8 SmoothQuant / int4 AWQ) and the KV cache
// dtype from a --config YAML; llama.cpp takes a GGUF (-hf REPO:QUANT or a
// .gguf path, never safetensors). parallm gets a line only when it can run the
// plan: a local GGUF or safetensors model of an architecture src/model runs,
// on the CPU (there is no CUDA backend yet).
#include <filesystem>

#include "config/model_config.h"
#include "planner/launch_engines.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::planner {

namespace {

// One line per replica, or one line when dp = 1. `make(r)` is the command of
// replica r without device selection or port.
template <typename Make>
void per_replica(const LaunchContext& c, EngineLaunch* e, Make make) {
  if (c.layout.dp <= 1) {
    e->lines.push_back({"", device_prefix(c) + make(0)});
    return;
  }
  for (int rep = 0; rep < c.layout.dp; ++rep)
    e->lines.push_back(
        {replica_where(c, rep), "CUDA_VISIBLE_DEVICES=" + gpu_list(c.groups[static_cast<size_t>(rep)].gpus) + " " +
                                    make(rep) + flag("--port", 8000LL + rep)});
  e->note +=
      std::string(e->note.empty() ? "" : " ") +
      "No built-in data parallelism: one server per replica on its own GPUs and port; put a load balancer over them.";
}

// GGUF quantization tag of a weight format, as GGUF repositories name files.
std::string gguf_tag(const std::string& w) {
  if (w == "fp16") return "F16";
  if (w == "bf16") return "BF16";
  if (w == "fp32") return "F32";
  if (w == "fp8" || w == "int8" || w == "q8_0") return "Q8_0";
  if (w == "int4" || w == "q4_k") return "Q4_K_M";
  if (w == "q4_0") return "Q4_0";
  if (w == "q6_k") return "Q6_K";
  if (w == "q5_k") return "Q5_K_M";
  if (w == "q5_0") return "Q5_0";
  if (w == "q3_k") return "Q3_K_M";
  if (w == "q2_k") return "Q2_K";
  return "Q4_K_M";
}

}  // namespace

EngineLaunch launch_trtllm(const LaunchContext& c) {
  const Layout& l = c.layout;
  const std::string& w = c.plan->request.weights.name;
  EngineLaunch e;
  if (w.rfind("q", 0) == 0) {
    e.note = "TensorRT-LLM does not load GGUF (" + w + ") weights; no line.";
    return e;
  }
  std::string model = c.model;
  auto placeholder = [&](const char* qformat) {
    model = "./" + c.name + "-" + qformat;
    e.note = std::string("Quantized checkpoint: make ") + model +
             " with TensorRT-LLM's examples/quantization/quantize.py "
             "--qformat " +
             qformat + " (NVIDIA ModelOpt).";
  };
  if (w == "fp8") {
    if (!c.local && !c.repos.fp8.empty())
      model = c.repos.fp8;
    else
      placeholder("fp8");
  } else if (w == "int8") {
    placeholder("int8_sq");
  } else if (w == "int4") {
    placeholder("int4_awq");
  }
  std::string pre, cfg, yaml;
  // The KV cache dtype has no trtllm-serve flag: it is an LLM API option of
  // the --config YAML (written by a printf line).
  if (c.kv_8bit || c.kv_4bit) yaml += "kv_cache_config:\\n  dtype: fp8\\n";
  if (c.attn_dp_ep) {
    // Attention DP is an LLM API option: TP over all the replica's GPUs, each
    // rank its own attention batch, the experts over --ep_size.
    yaml += "enable_attention_dp: true\\n";
  }
  if (!yaml.empty()) {
    pre = "printf '" + yaml + "' > trtllm-extra.yaml";
    cfg = flag("--config", std::string("trtllm-extra.yaml"));
  }
  const int tp_size = c.attn_dp_ep ? l.tp * l.dp : l.tp;
  std::string base = "trtllm-serve " + model + flag("--backend", std::string("pytorch")) +
                     flag("--tp_size", static_cast<long long>(tp_size)) +
                     flag("--pp_size", static_cast<long long>(l.pp));
  if (l.ep > 1) base += flag("--ep_size", static_cast<long long>(l.ep));
  base += flag("--max_batch_size", c.max_num_seqs) + flag("--max_seq_len", c.max_model_len) +
          flag("--kv_cache_free_gpu_memory_fraction", strfmt("%.2f", c.plan->request.memory.gpu_memory_utilization)) +
          cfg;
  if (!pre.empty()) e.lines.push_back({c.nodes_used > 1 ? "every node" : "", pre});
  if (c.replica_spans_nodes) {
    // MPI starts the ranks of one replica on all its nodes; trtllm-llmapi-launch
    // wires them into one server.
    const int per_replica = (c.group_size + c.gpus_per_node - 1) / c.gpus_per_node;
    const int replicas = c.attn_dp_ep ? 1 : l.dp;
    for (int rep = 0; rep < replicas; ++rep) {
      std::string hosts;
      for (int k = 0; k < per_replica; ++k)
        hosts += (hosts.empty() ? "" : ",") + strfmt("$NODE%d:%d", rep * per_replica + k, c.gpus_per_node);
      e.lines.push_back({replicas > 1 ? strfmt("replica %d", rep) : "node 0",
                         strfmt("mpirun -H %s -np %d trtllm-llmapi-launch ", hosts.c_str(), c.group_size) + base +
                             (replicas > 1 ? flag("--port", 8000LL + rep) : "")});
    }
    e.note += std::string(e.note.empty() ? "" : " ") + "Set NODE<k> to the hosts; mpirun starts every rank.";
    return e;
  }
  if (c.attn_dp_ep) {
    e.lines.push_back({"", device_prefix(c) + base});
    return e;
  }
  per_replica(c, &e, [&](int) { return base; });
  return e;
}

EngineLaunch launch_llamacpp(const LaunchContext& c) {
  const Layout& l = c.layout;
  const std::string& w = c.plan->request.weights.name;
  EngineLaunch e;
  if (c.attn_dp_ep) {
    e.note = "llama.cpp has no expert parallelism; no line for attention DP + EP.";
    return e;
  }
  if (c.replica_spans_nodes) {
    e.note =
        "llama.cpp splits a model only over the GPUs of one host (its RPC backend is experimental); no line for a "
        "replica of " +
        std::to_string(c.group_size) + " GPUs.";
    return e;
  }
  const std::string tag = gguf_tag(w);
  std::string src;
  if (c.gguf_file) {
    src = flag("-m", c.model);
  } else if (!c.local && !c.repos.gguf.empty() && tag != "F16" && tag != "BF16" && tag != "F32") {
    // GGUF repositories hold the quantized files; 16-bit ones are converted locally (below).
    src = flag("-hf", c.repos.gguf + ":" + tag);
  } else {
    const std::string file = (c.local ? c.model + "/" : std::string("./")) + c.name + "-" + tag + ".gguf";
    src = flag("-m", file);
    e.note = "GGUF: " + file + " stands for the model converted with llama.cpp's convert_hf_to_gguf.py" +
             (tag == "F16" || tag == "BF16" || tag == "F32" ? std::string(".") : " and llama-quantize to " + tag + ".");
  }
  if (w == "fp8" || w == "int8")
    e.note +=
        std::string(e.note.empty() ? "" : " ") + "llama.cpp has no fp8/int8 weights; Q8_0 (8.5 bits) is the nearest.";
  if (w == "int4") e.note += std::string(e.note.empty() ? "" : " ") + "int4 maps to GGUF Q4_K_M (4.5 bits).";
  std::string base = "llama-server" + src + flag("-ngl", 999LL);
  const int devs = c.group_size;
  if (devs > 1) {
    std::string split;
    for (int i = 0; i < devs; ++i) split += (i ? "," : "") + std::string("1");
    // Row split is llama.cpp's tensor-parallel-like mode, layer split its pipeline.
    base += flag("--split-mode", std::string(l.tp > 1 ? "row" : "layer")) + flag("--tensor-split", split);
  }
  // -c is the context of all slots together; -np the slots (sequences).
  base += flag("-c", c.max_model_len * c.max_num_seqs) + flag("-np", c.max_num_seqs);
  if (c.kv_8bit || c.kv_4bit) {
    const std::string t = c.kv_4bit ? "q4_0" : "q8_0";
    base += flag("-ctk", t) + flag("-ctv", t) +
            flag("-fa", std::string("on"));  // a quantized V cache needs flash attention
  }
  per_replica(c, &e, [&](int) { return base; });
  return e;
}

EngineLaunch launch_parallm(const LaunchContext& c) {
  const PlanRequest& r = c.plan->request;
  const Layout& l = c.layout;
  EngineLaunch e;
  if (!c.local) {
    e.note =
        "No parallm line: parallm serves local files (GGUF or a safetensors folder), and " + c.model + " is not one.";
    return e;
  }
  // The file's own description says whether the engine runs it
  // (ModelConfig::unsupported, the same check `parallm serve` makes).
  if (r.model.arch.empty() || !r.model.engine_refusal.empty()) {
    e.note = "No parallm line: parallm's engine does not run " + c.model + ": " +
             (r.model.arch.empty() ? std::string("its architecture is unknown") : r.model.engine_refusal) + ".";
    return e;
  }
  if (!r.gpu.is_cpu) {
    e.note =
        "No parallm line: parallm runs on the CPU only (no CUDA backend yet), and this plan is for " + r.gpu.name + ".";
    return e;
  }
  std::string cmd = "parallm serve" + flag("--model", c.model) + flag("--tp", static_cast<long long>(l.tp)) +
                    flag("--pp", static_cast<long long>(l.pp)) + flag("--dp", static_cast<long long>(l.dp));
  if (l.ep > 1) cmd += flag("--ep", static_cast<long long>(l.ep));
  cmd += flag("--max-model-len", c.max_model_len) + flag("--max-num-seqs", c.max_num_seqs);
  // parallm's smallest KV cache is q8_0 (1.06 bytes a value).
  if (c.kv_8bit || c.kv_4bit) cmd += flag("--kv-dtype", std::string("q8_0"));
  e.lines.push_back({"", cmd});
  return e;
}

}  // namespace parallm::planner
