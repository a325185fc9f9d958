// One result of `parallm doctor`: what was found, how bad it is, the numbers or
// lines that show it, and the fixes in the order to try them. The recognisers
// (log_findings.h, metrics_findings.h, topology_findings.h) are pure functions
// from text to findings; the command only reads inputs and prints.
#pragma once
#include <string>
#include <vector>

namespace parallm::doctor {

enum class Severity { kError, kWarning, kInfo };  // ranked: most severe first

struct Finding {
  Severity severity = Severity::kInfo;
  std::string title;
  std::vector<std::string> evidence;  // what was seen: numbers, matrix cells, log lines
  std::vector<std::string> fixes;     // in the order to try them
};

// "error" / "warning" / "info".
const char* severity_name(Severity s);
// Stable sort: errors, then warnings, then infos; the recognisers' order kept within each.
void rank(std::vector<Finding>* findings);
// The one finding given for input that no recogniser understood.
Finding nothing_recognised(const std::string& what);

}  // namespace parallm::doctor
