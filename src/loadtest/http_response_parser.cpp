// Incremental HTTP/1.1 response parser; see http_response_parser.h.
#include "loadtest/http_response_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace parallm::loadtest {
namespace {

constexpr size_t kMaxLineBytes = 16 * 1024;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

void HttpResponseParser::fail(const std::string& message) {
  state_ = State::kError;
  error_ = message;
}

bool HttpResponseParser::take_line(std::string_view& data, std::string& line) {
  const size_t nl = data.find('\n');
  if (nl == std::string_view::npos) {
    line_buf_.append(data);
    data = {};
    if (line_buf_.size() > kMaxLineBytes) fail("HTTP line longer than 16 KiB");
    return false;
  }
  line_buf_.append(data.substr(0, nl));
  data.remove_prefix(nl + 1);
  if (!line_buf_.empty() && line_buf_.back() == '\r') line_buf_.pop_back();
  line.swap(line_buf_);
  line_buf_.clear();
  return true;
}

void HttpResponseParser::on_status_line(const std::string& line) {
  // "HTTP/1.1 200 OK"
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12 || line[8] != ' ') {
    fail("bad HTTP status line: '" + line.substr(0, 80) + "'");
    return;
  }
  http10_ = line[7] == '0';
  const int code = std::atoi(line.c_str() + 9);
  if (code < 100 || code > 999) {
    fail("bad HTTP status code in '" + line.substr(0, 80) + "'");
    return;
  }
  status_ = code;
  state_ = State::kHeaders;
}

void HttpResponseParser::on_header(const std::string& line) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos) {
    fail("bad HTTP header line: '" + line.substr(0, 80) + "'");
    return;
  }
  const std::string name = lower(trim(line.substr(0, colon)));
  const std::string value = trim(line.substr(colon + 1));
  if (name == "content-length") {
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (*end != '\0' || v < 0) {
      fail("bad Content-Length '" + value + "'");
      return;
    }
    content_length_ = v;
  } else if (name == "transfer-encoding") {
    chunked_ = lower(value).find("chunked") != std::string::npos;
  } else if (name == "connection") {
    const std::string v = lower(value);
    if (v.find("close") != std::string::npos) saw_close_ = true;
    if (v.find("keep-alive") != std::string::npos && http10_) http10_ = false;
  } else if (name == "content-type") {
    content_type_ = lower(value);
  }
}

void HttpResponseParser::start_body() {
  if (status_ < 200) {  // 1xx interim response: a real one follows
    *this = HttpResponseParser();
    return;
  }
  keep_alive_ = !saw_close_ && !http10_;
  state_ = State::kBody;
  if (status_ == 204 || status_ == 304) {
    state_ = State::kDone;
  } else if (chunked_) {
    body_mode_ = BodyMode::kChunked;
    chunk_state_ = ChunkState::kSize;
  } else if (content_length_ >= 0) {
    body_mode_ = BodyMode::kLength;
    remaining_ = content_length_;
    if (remaining_ == 0) state_ = State::kDone;
  } else {
    body_mode_ = BodyMode::kUntilClose;
    keep_alive_ = false;
  }
}

HttpResponseParser::State HttpResponseParser::feed(std::string_view data, std::string& body_out) {
  std::string line;
  while (!data.empty() && state_ != State::kDone && state_ != State::kError) {
    switch (state_) {
      case State::kStatusLine:
        if (!take_line(data, line)) break;
        if (!line.empty()) on_status_line(line);  // tolerate stray CRLF before the status line
        break;
      case State::kHeaders:
        if (!take_line(data, line)) break;
        if (line.empty()) {
          start_body();
        } else {
          on_header(line);
        }
        break;
      case State::kBody:
        if (body_mode_ == BodyMode::kUntilClose) {
          body_out.append(data);
          data = {};
        } else if (body_mode_ == BodyMode::kLength) {
          const size_t n = static_cast<size_t>(std::min<int64_t>(remaining_, data.size()));
          body_out.append(data.substr(0, n));
          data.remove_prefix(n);
          remaining_ -= n;
          if (remaining_ == 0) state_ = State::kDone;
        } else if (chunk_state_ == ChunkState::kData) {
          const size_t n = static_cast<size_t>(std::min<int64_t>(remaining_, data.size()));
          body_out.append(data.substr(0, n));
          data.remove_prefix(n);
          remaining_ -= n;
          if (remaining_ == 0) chunk_state_ = ChunkState::kDataEnd;
        } else {
          if (!take_line(data, line)) break;
          if (chunk_state_ == ChunkState::kSize) {
            const std::string size_text = trim(line.substr(0, line.find(';')));
            char* end = nullptr;
            const long long size = std::strtoll(size_text.c_str(), &end, 16);
            if (size_text.empty() || *end != '\0' || size < 0) {
              fail("bad chunk size line '" + line.substr(0, 40) + "'");
              break;
            }
            remaining_ = size;
            chunk_state_ = size == 0 ? ChunkState::kTrailer : ChunkState::kData;
          } else if (chunk_state_ == ChunkState::kDataEnd) {
            if (!line.empty()) {
              fail("chunk data longer than its declared size");
              break;
            }
            chunk_state_ = ChunkState::kSize;
          } else if (line.empty()) {  // kTrailer: the empty line ends the message
            state_ = State::kDone;
          }
        }
        break;
      case State::kDone:
      case State::kError:
        break;
    }
  }
  return state_;
}

HttpResponseParser::State HttpResponseParser::on_eof() {
  if (state_ == State::kBody && body_mode_ == BodyMode::kUntilClose) state_ = State::kDone;
  return state_;
}

}  // namespace parallm::loadtest
