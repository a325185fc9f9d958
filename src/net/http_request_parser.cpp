// The request parser (see http_request_parser.h). Grammar from RFC 9112:
//   request-line = method SP request-target SP HTTP-version
//   field-line   = field-name ":" OWS field-value OWS
//   chunked-body = *chunk last-chunk trailer-section CRLF
// A bare LF ends a line as CRLF does (§2.2 allows it); a CR anywhere else is
// an error.
#include "net/http_request_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace parallm::net {
namespace {

// RFC 9110 §5.6.2 tchar.
bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes a path; false on a malformed escape or an encoded NUL.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return false;
    out->push_back(c);
    i += 2;
  }
  return true;
}

}  // namespace

HttpRequestParser::Status HttpRequestParser::fail(int status, std::string message) {
  phase_ = Phase::kError;
  error_status_ = status;
  error_ = std::move(message);
  return Status::kError;
}

bool HttpRequestParser::take_line(const char* data, size_t n, size_t* pos, size_t limit, int over_status,
                                  const char* what, bool* error) {
  *error = false;
  const char* start = data + *pos;
  const size_t avail = n - *pos;
  const void* nl = std::memchr(start, '\n', avail);
  const size_t seg = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : avail;
  if (line_.size() + seg > limit) {
    fail(over_status, std::string(what) + " is longer than " + std::to_string(limit) + " bytes");
    *error = true;
    return false;
  }
  line_.append(start, seg);
  *pos += seg;
  if (!nl) return false;
  *pos += 1;  // the LF
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  if (line_.find('\r') != std::string::npos) {
    fail(400, std::string("bare CR in the ") + what);
    *error = true;
    return false;
  }
  return true;
}

HttpRequestParser::Status HttpRequestParser::feed(const char* data, size_t n, size_t* consumed) {
  size_t pos = 0;
  auto done = [&](Status s) {
    *consumed = pos;
    return s;
  };
  if (n > 0) started_ = true;
  while (pos < n || phase_ == Phase::kDone) {
    bool error = false;
    switch (phase_) {
      case Phase::kRequestLine: {
        if (!take_line(data, n, &pos, limits_.max_request_line, 414, "request line", &error)) {
          return done(error ? Status::kError : Status::kNeedMore);
        }
        if (line_.empty()) {  // RFC 9112 §2.2: empty lines before a request are ignored
          if (++empty_lines_ > 8) return done(fail(400, "too many empty lines before the request line"));
          continue;
        }
        const Status s = on_request_line();
        line_.clear();
        if (s == Status::kError) return done(s);
        break;
      }
      case Phase::kHeaders: {
        const size_t room = limits_.max_header_bytes > header_bytes_ ? limits_.max_header_bytes - header_bytes_ : 0;
        if (!take_line(data, n, &pos, room, 431, "header section", &error))
          return done(error ? Status::kError : Status::kNeedMore);
        header_bytes_ += line_.size() + 1;  // counted per whole line: the same however the bytes came
        Status s = line_.empty() ? on_headers_done() : on_header_line();
        line_.clear();
        if (s == Status::kError || s == Status::kDone) return done(s);
        if (s == Status::kHeadersDone) return done(s);
        break;
      }
      case Phase::kBody: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(body_left_, n - pos));
        req_.body.append(data + pos, take);
        pos += take;
        body_left_ -= take;
        if (body_left_ == 0) {
          phase_ = Phase::kDone;
          return done(Status::kDone);
        }
        break;
      }
      case Phase::kChunkSize: {
        if (!take_line(data, n, &pos, 4096, 400, "chunk size line", &error)) {
          return done(error ? Status::kError : Status::kNeedMore);
        }
        const Status s = on_chunk_size_line();
        line_.clear();
        if (s == Status::kError) return done(s);
        break;
      }
      case Phase::kChunkData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(body_left_, n - pos));
        req_.body.append(data + pos, take);
        pos += take;
        body_left_ -= take;
        if (body_left_ == 0) phase_ = Phase::kChunkDataEnd;
        break;
      }
      case Phase::kChunkDataEnd: {
        if (!take_line(data, n, &pos, 2, 400, "end of a chunk", &error))
          return done(error ? Status::kError : Status::kNeedMore);
        if (!line_.empty()) return done(fail(400, "chunk data is longer than its size line says"));
        phase_ = Phase::kChunkSize;
        break;
      }
      case Phase::kTrailers: {
        const size_t room = limits_.max_header_bytes > header_bytes_ ? limits_.max_header_bytes - header_bytes_ : 0;
        if (!take_line(data, n, &pos, room, 431, "trailer section", &error))
          return done(error ? Status::kError : Status::kNeedMore);
        header_bytes_ += line_.size() + 1;
        if (line_.empty()) {
          phase_ = Phase::kDone;
          return done(Status::kDone);
        }
        const Status s = on_trailer_line();
        line_.clear();
        if (s == Status::kError) return done(s);
        break;
      }
      case Phase::kDone:
        return done(Status::kDone);
      case Phase::kError:
        return done(Status::kError);
    }
  }
  return done(Status::kNeedMore);
}

HttpRequestParser::Status HttpRequestParser::on_request_line() {
  const std::string_view line = line_;
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "malformed request line (want: METHOD SP TARGET SP HTTP/1.1)");
  }
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed method in the request line");
  if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && std::isdigit(static_cast<unsigned char>(version[5])) &&
      version[6] == '.' && std::isdigit(static_cast<unsigned char>(version[7]))) {
    // A later 1.x is answered as 1.1 (RFC 9112 §2.3). Another major version
    // is refused with a 400, not RFC 9110's optional 505: nothing a client
    // sends should earn it a 5xx, which monitoring counts as the server's fault.
    if (version[5] != '1') {
      return fail(400, "HTTP version " + std::string(version.substr(5)) + " is not supported (HTTP/1.0 and 1.1 are)");
    }
  } else {
    return fail(400, "malformed HTTP version in the request line");
  }
  if (target.empty()) return fail(400, "empty request target");
  for (unsigned char c : target) {
    if (c <= 0x20 || c >= 0x7f) return fail(400, "the request target has a character that must be percent-encoded");
  }
  req_.method = std::string(method);
  req_.target = std::string(target);
  req_.version_minor = version[7] == '0' ? 0 : 1;
  std::string_view origin = target;
  if (target == "*") {
    if (method != "OPTIONS") return fail(400, "the '*' request target is only for OPTIONS");
    origin = "/";
  } else if (target.front() != '/') {
    // absolute-form (RFC 9112 §3.2.2: servers must accept it): take its path.
    const size_t scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos || scheme_end == 0) return fail(400, "malformed request target");
    const size_t slash = target.find('/', scheme_end + 3);
    origin = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  const size_t q = origin.find('?');
  const std::string_view raw_path = origin.substr(0, q);
  if (q != std::string_view::npos) req_.query = std::string(origin.substr(q + 1));
  if (!percent_decode(raw_path, &req_.path)) return fail(400, "malformed percent-encoding in the request path");
  phase_ = Phase::kHeaders;
  return Status::kNeedMore;
}

HttpRequestParser::Status HttpRequestParser::on_header_line() {
  const std::string_view line = line_;
  if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete line folding in a header");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(400, "a header line without ':'");
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name)) return fail(400, "malformed header name (no whitespace before ':')");
  const std::string_view value = trim_ows(line.substr(colon + 1));
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\t') || c == 0x7f)
      return fail(400, "a control character in header '" + std::string(name) + "'");
  }
  if (++header_count_ > limits_.max_headers) {
    return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
  }
  req_.headers.emplace_back(std::string(name), std::string(value));
  return Status::kNeedMore;
}

HttpRequestParser::Status HttpRequestParser::on_headers_done() {
  size_t hosts = 0;
  bool have_length = false, have_te = false;
  uint64_t length = 0;
  std::string te;
  for (const auto& [name, value] : req_.headers) {
    if (header_name_equal(name, "Host")) {
      ++hosts;
    } else if (header_name_equal(name, "Content-Length")) {
      // A list of equal values is allowed (RFC 9110 §8.6); anything else is not.
      std::string_view rest = value;
      while (true) {
        const size_t comma = rest.find(',');
        const std::string_view item = trim_ows(rest.substr(0, comma));
        if (item.empty() || item.find_first_not_of("0123456789") != std::string_view::npos) {
          return fail(400, "Content-Length must be a non-negative decimal number");
        }
        uint64_t v = 0;
        if (item.size() > 19)
          return fail(
              413, "Content-Length is larger than " + std::to_string(limits_.max_body_bytes) + " bytes (--max-body)");
        for (char c : item) v = v * 10 + static_cast<uint64_t>(c - '0');
        if (have_length && v != length) return fail(400, "differing Content-Length values");
        have_length = true;
        length = v;
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
      }
    } else if (header_name_equal(name, "Transfer-Encoding")) {
      have_te = true;
      if (!te.empty()) te += ",";
      te += value;
    } else if (header_name_equal(name, "Expect")) {
      if (!header_name_equal(trim_ows(value), "100-continue"))
        return fail(417, "only 'Expect: 100-continue' is understood");
      expects_continue_ = req_.version_minor >= 1;  // HTTP/1.0 clients do not wait for it
    }
  }
  if (req_.version_minor >= 1 && hosts != 1) {
    return fail(400, hosts == 0 ? "HTTP/1.1 requests need a Host header" : "more than one Host header");
  }
  if (have_te) {
    if (have_length) return fail(400, "both Content-Length and Transfer-Encoding (ambiguous framing)");
    if (req_.version_minor == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (!header_name_equal(trim_ows(te), "chunked")) {
      // 400 rather than RFC 9112's suggested 501, for the reason above.
      return fail(400, "transfer coding '" + te + "' is not supported (only 'chunked')");
    }
    chunked_ = true;
    phase_ = Phase::kChunkSize;
    return Status::kHeadersDone;
  }
  if (have_length) {
    if (length > limits_.max_body_bytes) {
      return fail(413, "the body has " + std::to_string(length) + " bytes; this server accepts at most " +
                           std::to_string(limits_.max_body_bytes) + " (--max-body)");
    }
    if (length > 0) {
      body_left_ = length;
      req_.body.reserve(static_cast<size_t>(length));
      phase_ = Phase::kBody;
      return Status::kHeadersDone;
    }
  } else if (req_.method == "POST" || req_.method == "PUT" || req_.method == "PATCH") {
    return fail(411, "a " + req_.method + " request needs Content-Length (or chunked Transfer-Encoding)");
  }
  expects_continue_ = false;  // nothing to continue with
  phase_ = Phase::kDone;
  return Status::kDone;
}

HttpRequestParser::Status HttpRequestParser::on_chunk_size_line() {
  std::string_view line = line_;
  // chunk-size = 1*HEXDIG, then optional whitespace before extensions (ignored).
  const size_t semi = line.find(';');
  std::string_view digits = line.substr(0, semi);
  while (!digits.empty() && (digits.back() == ' ' || digits.back() == '\t')) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 15) return fail(400, "malformed chunk size");
  uint64_t size = 0;
  for (char c : digits) {
    const int h = hex_value(c);
    if (h < 0) return fail(400, "malformed chunk size");
    size = size * 16 + static_cast<uint64_t>(h);
  }
  if (req_.body.size() + size > limits_.max_body_bytes) {
    return fail(413, "the chunked body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes (--max-body)");
  }
  if (size == 0) {
    phase_ = Phase::kTrailers;
  } else {
    body_left_ = size;
    phase_ = Phase::kChunkData;
  }
  return Status::kNeedMore;
}

HttpRequestParser::Status HttpRequestParser::on_trailer_line() {
  // Trailers are read (bounded like headers) and dropped: nothing here uses them.
  const std::string_view line = line_;
  if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete line folding in a trailer");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return fail(400, "malformed trailer line");
  if (++header_count_ > limits_.max_headers)
    return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
  return Status::kNeedMore;
}

HttpRequest HttpRequestParser::take_request() {
  HttpRequest r = std::move(req_);
  req_ = HttpRequest{};
  phase_ = Phase::kRequestLine;
  line_.clear();
  header_bytes_ = header_count_ = empty_lines_ = 0;
  body_left_ = 0;
  chunked_ = expects_continue_ = started_ = false;
  return r;
}

}  // namespace parallm::net
