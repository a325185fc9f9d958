// libFuzzer target: EBNF / Lark grammars (constrain/ebnf_parser). Any text
// is refused (InputError) or compiles to a grammar whose reachable states
// all complete.
// clang-format off
// FUZZ_SOURCES: src/constrain/expr.cpp src/constrain/grammar.cpp src/constrain/matcher.cpp src/constrain/regex_parser.cpp src/constrain/ebnf_parser.cpp src/constrain/json_schema.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
// FUZZ_MAX_LEN: 4096
// clang-format on
#include <cstddef>
#include <cstdint>
#include <string>

#include "constrain/ebnf_parser.h"
#include "constrain_fuzz_check.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    parallm::constrain::Grammar g =
        parallm::constrain::parse_ebnf(std::string(reinterpret_cast<const char*>(data), size));
    g.compile(parallm::constrain::GrammarLimits{200000, 20000, 5000000});
    check_completes(g);
  } catch (const parallm::InputError&) {
  }
  return 0;
}
