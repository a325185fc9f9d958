// SSE framing (see sse_writer.h). The event-stream grammar ends a line at
// CRLF, LF or CR; a parser joins an event's data lines with LF and strips
// one space after "data:", which the writer always puts there, so a line
// that starts with a space keeps it.
#include "server/sse_writer.h"

namespace parallm {

std::string sse_event(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  size_t begin = 0;
  for (;;) {
    size_t end = begin;
    while (end < payload.size() && payload[end] != '\n' && payload[end] != '\r') ++end;
    out += "data: ";
    out.append(payload.substr(begin, end - begin));
    out += '\n';
    if (end == payload.size()) break;
    // CRLF is one line break; a lone CR or LF is one too.
    begin = end + (payload[end] == '\r' && end + 1 < payload.size() && payload[end + 1] == '\n' ? 2 : 1);
  }
  out += '\n';
  return out;
}

std::string sse_comment(std::string_view text) {
  std::string out = ": ";
  for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
  out += "\n\n";
  return out;
}

}  // namespace parallm
