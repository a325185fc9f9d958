// libFuzzer target: the server's SSE framing (server/sse_writer) read back by
// an independent parser, the load tester's (loadtest/sse_parser, written from
// the WHATWG event-stream grammar). The input is split at 0xFF bytes into
// payloads (any bytes: CR, LF, CRLF, NUL, "data:", ":" ...); each is framed
// as one event, with comments between some, and the stream is fed to the
// parser in pieces of a size chosen by the first byte. Invariants: exactly
// one event per payload, in order, each equal to its payload with its line
// breaks (CRLF, CR, LF) written as LF (the only form SSE can carry), so a
// payload can never inject an event or a field; comments add nothing; the
// parser is left with nothing pending; the [DONE] marker parses as "[DONE]".
// FUZZ_SOURCES: src/server/sse_writer.cpp src/loadtest/sse_parser.cpp
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "loadtest/sse_parser.h"
#include "server/sse_writer.h"

namespace {

// What an SSE client can receive for `payload`: its line breaks as LF.
std::string as_received(const std::string& payload) {
  std::string out;
  for (size_t i = 0; i < payload.size(); ++i) {
    if (payload[i] == '\r') {
      out += '\n';
      if (i + 1 < payload.size() && payload[i + 1] == '\n') ++i;
    } else {
      out += payload[i];
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 17;
  std::vector<std::string> payloads(1);
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0xFF) {
      payloads.emplace_back();
    } else {
      payloads.back() += static_cast<char>(data[i]);
    }
  }
  std::string stream;
  for (size_t k = 0; k < payloads.size(); ++k) {
    stream += parallm::sse_event(payloads[k]);
    if (k % 3 == 1) stream += parallm::sse_comment(payloads[k]);  // heartbeats between events
  }
  stream += parallm::sse_done();

  parallm::loadtest::SseParser parser;
  std::vector<std::string> events;
  for (size_t pos = 0; pos < stream.size(); pos += step) {
    parser.feed(std::string_view(stream).substr(pos, step), events);
  }
  if (events.size() != payloads.size() + 1) std::abort();
  for (size_t k = 0; k < payloads.size(); ++k) {
    if (events[k] != as_received(payloads[k])) std::abort();
  }
  if (events.back() != "[DONE]") std::abort();
  if (parser.pending_bytes() != 0) std::abort();
  return 0;
}
