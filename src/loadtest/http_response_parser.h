// Incremental HTTP/1.1 response parser: feed it bytes as they arrive from a
// non-blocking socket, in any split, and it reports the status, the headers it
// needs and the body bytes (de-chunked). Handles Content-Length, chunked
// transfer coding (RFC 9112 §7.1, extensions and trailers skipped) and bodies
// delimited by connection close. Skips 1xx interim responses.
// NOTE: hand-written rather than cpp-httplib's because httplib's client is
// blocking, one thread per stream, which is what this tool must avoid.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace parallm::loadtest {

class HttpResponseParser {
 public:
  enum class State { kStatusLine, kHeaders, kBody, kDone, kError };

  // Consumes `data`; appends decoded body bytes to `body_out`. Returns the
  // state after consuming. kError sets error(). Bytes after kDone are ignored.
  State feed(std::string_view data, std::string& body_out);
  // The peer closed the connection: ends a close-delimited body (kDone);
  // anything else unfinished is left as is (the caller decides it was cut).
  State on_eof();

  State state() const { return state_; }
  int status() const { return status_; }
  const std::string& content_type() const { return content_type_; }
  bool keep_alive() const { return keep_alive_; }  // connection reusable after kDone
  bool headers_done() const { return state_ == State::kBody || state_ == State::kDone; }
  const std::string& error() const { return error_; }

 private:
  enum class BodyMode { kLength, kChunked, kUntilClose };
  enum class ChunkState { kSize, kData, kDataEnd, kTrailer };

  bool take_line(std::string_view& data, std::string& line);  // false: need more bytes
  void on_status_line(const std::string& line);
  void on_header(const std::string& line);
  void start_body();
  void fail(const std::string& message);

  State state_ = State::kStatusLine;
  std::string line_buf_;
  int status_ = 0;
  bool http10_ = false;
  bool keep_alive_ = true;
  bool saw_close_ = false;
  bool chunked_ = false;
  int64_t content_length_ = -1;
  std::string content_type_;
  BodyMode body_mode_ = BodyMode::kUntilClose;
  ChunkState chunk_state_ = ChunkState::kSize;
  int64_t remaining_ = 0;  // bytes left in the current chunk or the whole body
  std::string error_;
};

}  // namespace parallm::loadtest
