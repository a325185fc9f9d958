// Server-Sent Events framing (WHATWG HTML, "Server-sent events", the
// event-stream format) for the streaming routes: one event per payload,
// each line of the payload its own `data:` line, so that a payload holding
// line breaks (CR, LF or CRLF) comes back, joined with LF, as the one event
// it was, never as extra events or fields. JSON payloads (what the routes
// send) hold no raw line breaks; the framing does not rely on it.
#pragma once
#include <string>
#include <string_view>

namespace parallm {

// `data: <line>\n` per line of `payload`, then the blank line that ends the event.
std::string sse_event(std::string_view payload);
// A comment line (`: text`, ignored by clients; keeps proxies from timing
// out), then a blank line. Line breaks in `text` become spaces.
std::string sse_comment(std::string_view text);
// OpenAI's end-of-stream marker: the event whose data is `[DONE]`.
inline std::string sse_done() { return sse_event("[DONE]"); }

}  // namespace parallm
