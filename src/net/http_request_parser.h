// HttpRequestParser: an incremental, strict HTTP/1.0 and 1.1 request parser
// (RFC 9112) for bytes from untrusted clients. It is fed whatever the socket
// gave, keeps at most one line in memory besides the body, and stops at the
// end of one request so that pipelined bytes stay for the next.
//
// Strict where leniency lets requests be smuggled past a proxy or hold the
// server: Content-Length and Transfer-Encoding together, differing
// Content-Lengths, transfer codings other than chunked, obs-fold lines,
// whitespace before a colon, bare CR, NUL and other controls are errors.
// Every size is bounded (HttpLimits); an error carries the status to answer
// with (400, 411, 413, 414, 417, 431: never a 5xx, a client's bytes are never
// the server's fault) and a message that names what was wrong. After an error the connection must be closed: its
// framing is unknown.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "net/http_message.h"

namespace parallm::net {

struct HttpLimits {
  size_t max_request_line = 8 * 1024;   // 414 past it
  size_t max_header_bytes = 32 * 1024;  // all header lines together (431)
  size_t max_headers = 100;             // header fields (431)
  size_t max_body_bytes = 8u << 20;     // declared or de-chunked body (413)
};

class HttpRequestParser {
 public:
  enum class Status {
    kNeedMore,     // everything given was consumed; the request is not complete
    kHeadersDone,  // headers complete, a body follows (returned once; see expects_continue())
    kDone,         // one whole request: take it with take_request()
    kError,        // error_status() / error_message(); close the connection
  };

  explicit HttpRequestParser(const HttpLimits& limits) : limits_(limits) {}

  // Consumes bytes of data[0, n) (*consumed of them) until the request is
  // complete, an error is found, or the headers end.
  Status feed(const char* data, size_t n, size_t* consumed);

  // Any byte of the current request seen (for the header deadline).
  bool started() const { return started_; }
  bool in_body() const {
    return phase_ == Phase::kBody || phase_ == Phase::kChunkSize || phase_ == Phase::kChunkData ||
           phase_ == Phase::kChunkDataEnd || phase_ == Phase::kTrailers;
  }
  // The client sent "Expect: 100-continue" and waits for an interim answer.
  bool expects_continue() const { return expects_continue_; }
  // Valid once the headers are done.
  const HttpRequest& request() const { return req_; }
  // The complete request; the parser is reset for the next one.
  HttpRequest take_request();

  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_; }

 private:
  enum class Phase { kRequestLine, kHeaders, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone, kError };

  Status fail(int status, std::string message);
  // Takes bytes into line_ up to a line end; false when the line is not complete.
  // Returns via *error when the line would exceed `limit`.
  bool take_line(const char* data, size_t n, size_t* pos, size_t limit, int over_status, const char* what, bool* error);
  Status on_request_line();
  Status on_header_line();
  Status on_headers_done();
  Status on_chunk_size_line();
  Status on_trailer_line();

  HttpLimits limits_;
  Phase phase_ = Phase::kRequestLine;
  HttpRequest req_;
  std::string line_;         // the line being read (without its end)
  size_t header_bytes_ = 0;  // header (and trailer) bytes so far
  size_t header_count_ = 0;
  size_t empty_lines_ = 0;  // before the request line (tolerated, bounded)
  uint64_t body_left_ = 0;  // Content-Length bytes, or the current chunk's
  bool chunked_ = false;
  bool expects_continue_ = false;
  bool started_ = false;
  int error_status_ = 0;
  std::string error_;
};

}  // namespace parallm::net
