// process_findings (see process_findings.h).
#include "doctor/process_findings.h"

#include <cmath>

#include "util/log.h"

namespace parallm::doctor {

namespace {

// Memory that NVML counts as used but no listed process holds, past which
// the gap is worth a line: each CUDA context's own few hundred MiB stay under it.
constexpr double kUnaccountedBytes = 1024.0 * 1024 * 1024;
// Headroom under the free share for the engine's own CUDA context.
constexpr double kContextMarginRatio = 0.02;

std::string describe(const hwmetrics::GpuProcess& p) {
  std::string kind = p.compute && p.graphics ? "compute+graphics" : p.graphics ? "graphics" : "compute";
  std::string who = strfmt("pid %u", p.pid);
  if (!p.name.empty())
    who += " (" + p.name + ", " + kind + ")";
  else
    who += " (" + kind + ")";
  return who + ": " +
         (p.used_bytes ? format_bytes(static_cast<double>(*p.used_bytes)) : std::string("amount not reported"));
}

}  // namespace

Finding nvml_unavailable(const std::string& why) {
  Finding f;
  f.severity = Severity::kInfo;
  f.title = "NVML not available: cannot list other processes";
  f.evidence.push_back(why);
  f.fixes.push_back(
      "run doctor where the NVIDIA driver is loaded (libnvidia-ml.so.1), or read `nvidia-smi` by "
      "hand");
  return f;
}

std::vector<Finding> process_findings(const std::vector<hwmetrics::GpuSample>& gpus,
                                      const std::vector<hwmetrics::GpuProcess>& processes) {
  std::vector<Finding> out;
  std::vector<std::string> quiet;  // GPUs nobody else holds
  for (const hwmetrics::GpuSample& g : gpus) {
    std::vector<const hwmetrics::GpuProcess*> here;
    double held_bytes = 0;
    size_t unreported = 0;  // processes NVML gives no memory for
    for (const auto& p : processes)
      if (p.gpu == g.index) {
        here.push_back(&p);
        held_bytes += static_cast<double>(p.used_bytes.value_or(0));
        if (!p.used_bytes) ++unreported;
      }
    const std::string name = strfmt("GPU %d", g.index) + (g.uuid.empty() ? "" : " (" + g.uuid + ")");
    const bool have_memory = g.memory_total_bytes && g.memory_used_bytes && *g.memory_total_bytes > 0;
    const double total = have_memory ? static_cast<double>(*g.memory_total_bytes) : 0;
    const double used = have_memory ? static_cast<double>(*g.memory_used_bytes) : 0;
    const std::string memory_line =
        have_memory ? strfmt("%s: %s used, %s free of %s (NVML)", name.c_str(), format_bytes(used).c_str(),
                             format_bytes(total - used).c_str(), format_bytes(total).c_str())
                    : name + ": NVML reports no memory reading";
    const bool unaccounted = have_memory && used - held_bytes > kUnaccountedBytes;
    if (here.empty() && !unaccounted) {
      quiet.push_back(memory_line);
      continue;
    }
    Finding f;
    f.severity = Severity::kWarning;
    f.evidence.push_back(memory_line);
    for (const auto* p : here) f.evidence.push_back(name + ": " + describe(*p));
    if (unaccounted)
      f.evidence.push_back(
          strfmt("%s: %s in use that no listed process accounts for (processes of another "
                 "container or PID namespace, or leaked contexts)",
                 name.c_str(), format_bytes(used - held_bytes).c_str()));
    const std::string amount = unreported == here.size() ? std::string("an unreported amount of")
                               : unreported > 0          ? "at least " + format_bytes(held_bytes) + " of"
                                                         : format_bytes(held_bytes) + " of";
    f.title = here.empty() ? strfmt("%s: %s of device memory is in use by something NVML does not list", name.c_str(),
                                    format_bytes(used).c_str())
                           : strfmt("%s: %zu other process%s hold%s %s device memory", name.c_str(), here.size(),
                                    here.size() == 1 ? "" : "es", here.size() == 1 ? "s" : "", amount.c_str());
    if (!here.empty()) {
      std::string pids;
      for (const auto* p : here) pids += (pids.empty() ? "" : " ") + std::to_string(p->pid);
      f.fixes.push_back("stop them or move them to another GPU (after checking they are not needed): kill " + pids);
    } else {
      f.fixes.push_back("find the holder with `nvidia-smi` on the host (or in the other containers) and stop it");
    }
    if (have_memory) {
      // The engine asks for util × total; only the free share is there to take.
      const double cap = std::floor((1.0 - used / total - kContextMarginRatio) * 100.0) / 100.0;
      if (cap > 0)
        f.fixes.push_back(
            strfmt("or lower the memory-utilization cap to at most %.2f (vLLM "
                   "--gpu-memory-utilization, SGLang --mem-fraction-static, parallm "
                   "--memory-utilization): the cap is a share of the whole %s, and %.0f%% of it "
                   "is already taken",
                   cap, format_bytes(total).c_str(), 100.0 * used / total));
      else
        f.fixes.push_back("this GPU has no room left: use another one (CUDA_VISIBLE_DEVICES)");
    }
    out.push_back(std::move(f));
  }
  if (out.empty()) {
    Finding f;
    f.severity = Severity::kInfo;
    f.title = strfmt("no other process holds memory on the %zu GPU(s)", gpus.size());
    f.evidence = quiet;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace parallm::doctor
