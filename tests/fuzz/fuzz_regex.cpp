// libFuzzer target: regexes (constrain/regex_parser). The input up to the
// first newline is the pattern, the rest a text fed to its automaton. Any
// pattern is refused (InputError) or compiles to a grammar whose reachable
// states all complete; feeding any text never crashes.
// clang-format off
// FUZZ_SOURCES: src/constrain/expr.cpp src/constrain/grammar.cpp src/constrain/matcher.cpp src/constrain/regex_parser.cpp src/constrain/ebnf_parser.cpp src/constrain/json_schema.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
// FUZZ_MAX_LEN: 2048
// clang-format on
#include <cstddef>
#include <cstdint>
#include <string>

#include "constrain/regex_parser.h"
#include "constrain_fuzz_check.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string pattern = in.substr(0, nl), text = nl == std::string::npos ? "" : in.substr(nl + 1);
  try {
    parallm::constrain::Grammar g;
    g.define(g.add_rule("root"), parallm::constrain::parse_regex(pattern));
    g.compile(parallm::constrain::GrammarLimits{200000, 20000, 5000000});
    check_completes(g);
    parallm::constrain::Matcher m(&g);
    for (char c : text) {
      if (!m.feed(std::string(1, c))) break;
    }
  } catch (const parallm::InputError&) {
  }
  return 0;
}
