// libFuzzer target: tool calls in model output (server/tool_calls), Hermes or
// Llama JSON by the first byte's top bit.
// Any text, streamed in pieces of any size, must split and parse without a
// crash; the content streamed plus the kept rest is the whole text.
// FUZZ_SOURCES: src/server/tool_calls.cpp src/server/stop_matcher.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 7;
  const auto format = data[0] & 0x80 ? parallm::ToolCallFormat::kLlamaJson : parallm::ToolCallFormat::kHermes;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  parallm::ToolCallSplitter s(format);
  std::string content;
  for (size_t i = 0; i < text.size(); i += step) content += s.push(text.substr(i, step));
  content += s.flush();
  if (content + s.kept() != text) std::abort();
  if (s.started()) (void)parallm::parse_tool_calls(format, s.kept());
  (void)parallm::parse_tool_calls(parallm::ToolCallFormat::kLlamaJson, text);
  (void)parallm::parse_tool_calls(parallm::ToolCallFormat::kHermes, text);
  return 0;
}
