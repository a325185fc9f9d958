#include "doctor/finding.h"

#include <algorithm>

namespace parallm::doctor {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "info";
}

void rank(std::vector<Finding>* findings) {
  std::stable_sort(findings->begin(), findings->end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) < static_cast<int>(b.severity);
  });
}

Finding nothing_recognised(const std::string& what) {
  Finding f;
  f.severity = Severity::kInfo;
  f.title = "nothing recognised in " + what;
  f.evidence.push_back("no known out-of-memory, KV cache or topology pattern matched");
  f.fixes.push_back("pass the full start-up log (stderr included), the server's /metrics, or `nvidia-smi topo -m`");
  return f;
}

}  // namespace parallm::doctor
