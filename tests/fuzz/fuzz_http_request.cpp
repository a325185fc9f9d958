// libFuzzer target: HTTP/1.x request framing (net/http_request_parser), the
// bytes of untrusted clients. The input is fed in pieces of a size chosen by
// the first byte, and parsed as pipelined requests until it ends or an error.
// Invariants: no crash or sanitizer report; every error has a 4xx/5xx status
// and a message; consumption never exceeds the input; a request parsed in
// pieces equals the same request parsed whole (the framing does not depend on
// how TCP split the bytes); bodies stay within the limit.
// FUZZ_SOURCES: src/net/http_request_parser.cpp src/net/http_message.cpp
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/http_request_parser.h"

namespace {

using parallm::net::HttpLimits;
using parallm::net::HttpRequest;
using parallm::net::HttpRequestParser;

struct Parsed {
  std::vector<HttpRequest> requests;
  int error_status = 0;
};

Parsed parse_all(const std::string& in, size_t step, const HttpLimits& limits) {
  Parsed out;
  HttpRequestParser p(limits);
  size_t pos = 0;
  while (pos < in.size() && out.requests.size() < 64) {
    const size_t n = step == 0 ? in.size() - pos : std::min(step, in.size() - pos);
    size_t used = 0;
    const HttpRequestParser::Status st = p.feed(in.data() + pos, n, &used);
    if (used > n) std::abort();
    pos += used;
    if (st == HttpRequestParser::Status::kError) {
      out.error_status = p.error_status();
      if (out.error_status < 400 || out.error_status > 599 || p.error_message().empty()) std::abort();
      return out;
    }
    if (st == HttpRequestParser::Status::kDone) {
      out.requests.push_back(p.take_request());
      if (out.requests.back().body.size() > limits.max_body_bytes) std::abort();
    } else if (st == HttpRequestParser::Status::kNeedMore && used < n) {
      std::abort();  // NeedMore means everything given was taken
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 13;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  HttpLimits limits;
  limits.max_body_bytes = 4096;
  limits.max_request_line = 512;
  limits.max_header_bytes = 2048;
  limits.max_headers = 20;
  const Parsed whole = parse_all(in, 0, limits);
  const Parsed pieces = parse_all(in, step, limits);
  if (whole.requests.size() != pieces.requests.size() || whole.error_status != pieces.error_status) std::abort();
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    const HttpRequest& a = whole.requests[i];
    const HttpRequest& b = pieces.requests[i];
    if (a.method != b.method || a.path != b.path || a.query != b.query || a.body != b.body || a.headers != b.headers ||
        a.version_minor != b.version_minor) {
      std::abort();
    }
    (void)a.keep_alive();
  }
  return 0;
}
