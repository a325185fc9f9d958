// libFuzzer target: chat templates (server/jinja). Templates come from model
// files, so any text must render or give an InputError: no crash, no hang.
// FUZZ_SOURCES: src/server/jinja/jinja_builtins.cpp src/server/jinja/jinja_eval.cpp src/server/jinja/jinja_parser.cpp src/tokenizer/unicode.cpp src/util/check.cpp src/util/log.cpp
// FUZZ_LIBS: -lutf8proc
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/jinja/jinja.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi h\u00e9 <b>"},
                 {"role": "assistant", "content": "Yo\nthere"}, {"role": "user", "content": ""}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  try {
    const parallm::jinja::CompiledTemplate t(std::string(reinterpret_cast<const char*>(data), size));
    (void)t.render(context);
  } catch (const parallm::InputError&) {
  }
  return 0;
}
