// libFuzzer target: JSON schemas (constrain/json_schema) compiled to a
// grammar. Any bytes: not JSON, or a schema that is refused (InputError), or
// a grammar whose every reachable state completes (constrain_fuzz_check.h).
// clang-format off
// FUZZ_SOURCES: src/constrain/expr.cpp src/constrain/grammar.cpp src/constrain/matcher.cpp src/constrain/regex_parser.cpp src/constrain/ebnf_parser.cpp src/constrain/json_schema.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
// FUZZ_MAX_LEN: 4096
// clang-format on
#include <cstddef>
#include <cstdint>
#include <string>

#include "constrain/json_schema.h"
#include "constrain_fuzz_check.h"
#include "util/check.h"
#include "util/json_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto schema =
      parallm::try_parse_json<nlohmann::ordered_json>(text, parallm::JsonLimits{parallm::kRequestJsonDepth}, nullptr);
  if (!schema) return 0;
  try {
    parallm::constrain::Grammar g = parallm::constrain::json_schema_grammar(*schema);
    g.compile(parallm::constrain::GrammarLimits{200000, 20000, 5000000});
    check_completes(g);
  } catch (const parallm::InputError&) {
  }
  return 0;
}
