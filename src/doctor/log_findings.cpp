#include "doctor/log_findings.h"

#include <regex>
#include <sstream>

namespace parallm::doctor {
namespace {

enum class Engine { kVllm, kSglang, kParallm };

// The troubleshooting order, spelled in the flags of the engine that printed the log.
// `allocation_failed`: the CUDA allocator itself failed (other processes or the
// CUDA context took what the cap assumed free): lower the cap. Otherwise the KV
// pool came out too small under the cap: raise it.
std::vector<std::string> oom_fixes(Engine e, const std::string& max_len_hint, bool allocation_failed = false) {
  std::vector<std::string> f;
  switch (e) {
    case Engine::kVllm:
      f.push_back(
          "check the real load precision and weight size: a float32 checkpoint loads at 4 bytes per "
          "parameter; load in bf16 (--dtype bfloat16), fp8 (--quantization fp8) or an int4 AWQ/GPTQ checkpoint");
      f.push_back("lower --max-model-len" + max_len_hint);
      f.push_back(
          allocation_failed
              ? "lower --gpu-memory-utilization (e.g. 0.85): check `nvidia-smi` for other processes (monitoring "
                "agents, other CUDA contexts) holding memory outside vLLM's share"
              : "raise --gpu-memory-utilization (e.g. 0.95), after checking `nvidia-smi` for other processes on the "
                "GPU");
      f.push_back("lower concurrency: --max-num-seqs (and --max-num-batched-tokens)");
      f.push_back("only then: more --tensor-parallel-size, or a device with more memory");
      break;
    case Engine::kSglang:
      f.push_back(
          "check the real load precision and weight size: load in bf16 (--dtype bfloat16), fp8 "
          "(--quantization fp8) or an int4 AWQ/GPTQ checkpoint");
      f.push_back("lower --context-length" + max_len_hint);
      f.push_back(
          "adjust --mem-fraction-static (raise it when the KV pool is too small, lower it when CUDA graphs or "
          "activations run out), after checking `nvidia-smi` for other processes");
      f.push_back("lower concurrency: --max-running-requests (and --chunked-prefill-size)");
      f.push_back("only then: more --tp, or a device with more memory");
      break;
    case Engine::kParallm:
      f.push_back(
          "check the real load precision and weight size: load the weights as --dtype q8_0 or q4_0, and the KV "
          "cache as --kv-dtype q8_0");
      f.push_back("lower --max-model-len" + max_len_hint);
      f.push_back("raise --memory-utilization (or --device-memory when the budget is set by hand)");
      f.push_back("lower concurrency: --max-num-seqs and --max-num-batched-tokens");
      f.push_back("only then: more --tp / --pp, or a device with more memory");
      break;
  }
  return f;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

// Long log lines are cut for the evidence list.
std::string clip(const std::string& line) { return line.size() <= 300 ? line : line.substr(0, 297) + "..."; }

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// std::regex recurses per character: only lines holding `needle` are matched,
// and only their first 2,000 characters (the messages are shorter).
bool search(const std::string& line, const char* needle, const std::regex& re, std::smatch* m, std::string* held) {
  if (!contains(line, needle)) return false;
  *held = line.size() > 2000 ? line.substr(0, 2000) : line;
  return std::regex_search(*held, *m, re);
}

Engine guess_engine(const std::string& log) {
  if (contains(log, "sglang") || contains(log, "mem-fraction-static") || contains(log, "mem_fraction_static"))
    return Engine::kSglang;
  if (contains(log, "parallm")) return Engine::kParallm;
  return Engine::kVllm;
}

}  // namespace

std::vector<Finding> log_findings(const std::string& log) {
  std::vector<Finding> out;
  const std::vector<std::string> lines = lines_of(log);
  const Engine engine = guess_engine(log);
  std::smatch m;
  std::string held;  // the clipped line `m` points into

  // vLLM / SGLang / PyTorch: "CUDA out of memory. Tried to allocate X. GPU n has a total capacity of T of which F is
  // free."
  static const std::regex torch_oom(R"(CUDA out of memory\.?\s*(?:Tried to allocate ([0-9.]+ ?[KMGT]i?B))?)");
  static const std::regex torch_detail(
      R"(GPU (\d+) has a total capacity of ([0-9.]+ ?[KMGT]i?B) of which ([0-9.]+ ?[KMGT]i?B) is free)");
  static const std::regex torch_proc(R"(Process (\d+) has ([0-9.]+ ?[KMGT]i?B) memory in use)");
  static const std::regex torch_alloc(R"(([0-9.]+ ?[KMGT]i?B) is allocated by PyTorch)");
  for (const auto& line : lines) {
    if (!search(line, "out of memory", torch_oom, &m, &held)) continue;
    Finding f;
    f.severity = Severity::kError;
    f.title = "CUDA out of memory at start";
    if (m[1].matched) f.evidence.push_back("tried to allocate " + m[1].str());
    std::smatch d;
    if (std::regex_search(held, d, torch_detail))
      f.evidence.push_back("GPU " + d[1].str() + ": total capacity " + d[2].str() + ", free " + d[3].str());
    if (std::regex_search(held, d, torch_alloc)) f.evidence.push_back(d[1].str() + " allocated by PyTorch");
    int processes = 0;
    for (auto it = std::sregex_iterator(held.begin(), held.end(), torch_proc); it != std::sregex_iterator(); ++it) {
      f.evidence.push_back("process " + (*it)[1].str() + " holds " + (*it)[2].str());
      ++processes;
    }
    f.evidence.push_back("log: " + clip(line));
    f.fixes = oom_fixes(engine, "", true);
    if (processes > 1)
      f.fixes.insert(f.fixes.begin(),
                     "more than one process holds this GPU's memory: stop the others, or "
                     "give each server its own GPU (CUDA_VISIBLE_DEVICES)");
    out.push_back(std::move(f));
    break;  // one traceback usually repeats the message; report it once
  }

  // vLLM: max seq len larger than what the KV cache holds.
  static const std::regex vllm_len(
      R"(max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((\d+)\))");
  for (const auto& line : lines) {
    if (!search(line, "max seq len", vllm_len, &m, &held)) continue;
    Finding f;
    f.severity = Severity::kError;
    f.title = "KV cache cannot hold one sequence of max-model-len";
    f.evidence.push_back("max model len " + m[1].str() + " tokens, KV cache holds " + m[2].str() + " tokens");
    f.evidence.push_back("log: " + clip(line));
    f.fixes = oom_fixes(Engine::kVllm, " to at most " + m[2].str());
    out.push_back(std::move(f));
    break;
  }

  // vLLM: nothing left for the KV cache after weights and activations.
  for (const auto& line : lines) {
    if (!contains(line, "No available memory for the cache blocks")) continue;
    Finding f;
    f.severity = Severity::kError;
    f.title = "no memory left for the KV cache after loading the weights";
    f.evidence.push_back("log: " + clip(line));
    f.fixes = oom_fixes(Engine::kVllm, "");
    out.push_back(std::move(f));
    break;
  }

  // SGLang: the static memory fraction leaves no room for the KV pool.
  for (const auto& line : lines) {
    if (!contains(line, "Not enough memory") || !contains(line, "mem-fraction-static")) continue;
    Finding f;
    f.severity = Severity::kError;
    f.title = "SGLang: not enough memory for the KV cache pool";
    f.evidence.push_back("log: " + clip(line));
    static const std::regex frac(R"(mem[-_]fraction[-_]static[= ]([0-9.]+))");
    std::smatch fm;
    std::string held_frac;
    for (const auto& l : lines)
      if (search(l, "fraction", frac, &fm, &held_frac)) {
        f.evidence.push_back("mem_fraction_static " + fm[1].str());
        break;
      }
    f.fixes = oom_fixes(Engine::kSglang, "");
    out.push_back(std::move(f));
    break;
  }

  // parallm serve: KvSizing::blocks (apps/cmd_serve.cpp).
  static const std::regex pm_kv(
      R"(the KV cache fits (-?\d+) blocks per device but one sequence of --max-model-len (\d+) needs (\d+) \(([^×]+?) budget × ([0-9.]+), weights ([^,]+), activations ([^)]+)\))");
  for (const auto& line : lines) {
    if (!search(line, "blocks per device", pm_kv, &m, &held)) continue;
    Finding f;
    f.severity = Severity::kError;
    f.title = "KV cache cannot hold one sequence of --max-model-len";
    f.evidence.push_back("KV blocks that fit per device: " + m[1].str() + ", one sequence of " + m[2].str() +
                         " tokens needs " + m[3].str());
    f.evidence.push_back("budget " + m[4].str() + " × memory utilization " + m[5].str() + ", weights " + m[6].str() +
                         ", activations " + m[7].str());
    f.evidence.push_back("log: " + clip(line));
    f.fixes = oom_fixes(Engine::kParallm, "");
    out.push_back(std::move(f));
    break;
  }

  // parallm engine: CapacityError from the engine's up-front check (engine.cpp).
  static const std::regex pm_engine(
      R"(needs (\S+ \S+) per device at tp=(\d+), pp=(\d+) \(weights (\S+ \S+) \+ KV cache (\S+ \S+) for (\d+) tokens\), (\S+) has (\S+ \S+))");
  for (const auto& line : lines) {
    if (!search(line, "per device at tp=", pm_engine, &m, &held)) continue;
    Finding f;
    f.severity = Severity::kError;
    f.title = "model does not fit the device at this tp/pp";
    f.evidence.push_back("needs " + m[1].str() + " per device at tp=" + m[2].str() + ", pp=" + m[3].str());
    f.evidence.push_back("weights " + m[4].str() + " + KV cache " + m[5].str() + " for " + m[6].str() + " tokens");
    f.evidence.push_back(m[7].str() + " has " + m[8].str());
    f.evidence.push_back("log: " + clip(line));
    f.fixes = oom_fixes(Engine::kParallm, "");
    out.push_back(std::move(f));
    break;
  }

  // parallm device accounting: CapacityError from core/device.cpp.
  static const std::regex pm_device(
      R"((\S+) needs (\S+ \S+), has (\S+ \S+): (\S+ \S+) more of (.+?) does not fit on top of (.*))");
  for (const auto& line : lines) {
    if (!search(line, "does not fit on top of", pm_device, &m, &held)) continue;
    Finding f;
    f.severity = Severity::kError;
    f.title = "device memory budget exceeded";
    f.evidence.push_back(m[1].str() + " needs " + m[2].str() + ", has " + m[3].str());
    f.evidence.push_back(m[4].str() + " more of " + m[5].str() + " on top of " + clip(m[6].str()));
    f.fixes = oom_fixes(Engine::kParallm, "");
    out.push_back(std::move(f));
    break;
  }
  return out;
}

}  // namespace parallm::doctor
