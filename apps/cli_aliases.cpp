#include "cli_aliases.h"

#include <cstring>

namespace parallm {
namespace {

struct DashAlias {
  const char* dash;  // as vLLM or llama-server spells it
  const char* long_name;
};

// NOTE: -tp, -pp and -dp are vLLM's; -np and -ngl are llama-server's. The
// long names are options of `serve` (and --tensor-parallel-size /
// --pipeline-parallel-size of every engine command).
constexpr DashAlias kDashAliases[] = {
    {"-tp", "--tensor-parallel-size"}, {"-pp", "--pipeline-parallel-size"},
    {"-dp", "--data-parallel-size"},   {"-np", "--parallel"},
    {"-ngl", "--n-gpu-layers"},
};

}  // namespace

std::vector<std::string> rewrite_dash_aliases(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size());
  bool options_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i == 0 || options_ended) {
      out.push_back(a);
      continue;
    }
    if (a == "--") options_ended = true;
    std::string rewritten = a;
    for (const DashAlias& d : kDashAliases) {
      const size_t n = std::strlen(d.dash);
      if (a.compare(0, n, d.dash) == 0 && (a.size() == n || a[n] == '=')) {
        rewritten = d.long_name + a.substr(n);
        break;
      }
    }
    out.push_back(std::move(rewritten));
  }
  return out;
}

}  // namespace parallm
