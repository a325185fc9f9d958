// The request parser against RFC 9112's framing rules: what is accepted
// (and parsed the same whether the bytes come at once or one by one), what
// is refused and with which status, and where one pipelined request ends.
#include "net/http_request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace parallm::net {
namespace {

struct Outcome {
  HttpRequestParser::Status status;
  HttpRequest request;
  int error_status = 0;
  std::string error;
  size_t consumed = 0;
  bool saw_headers_done = false;
  bool expects_continue = false;
};

// Feeds `bytes` in pieces of `step` (0 = all at once) until a request is
// complete or an error; the rest of the input is left (pipelining).
Outcome parse(const std::string& bytes, size_t step = 0, HttpLimits limits = {}) {
  HttpRequestParser p(limits);
  Outcome o;
  size_t pos = 0;
  while (true) {
    const size_t n = step == 0 ? bytes.size() - pos : std::min(step, bytes.size() - pos);
    size_t used = 0;
    const auto st = p.feed(bytes.data() + pos, n, &used);
    pos += used;
    if (st == HttpRequestParser::Status::kHeadersDone) {
      o.saw_headers_done = true;
      o.expects_continue = p.expects_continue();
      continue;
    }
    if (st == HttpRequestParser::Status::kNeedMore && pos < bytes.size()) continue;
    o.status = st;
    o.consumed = pos;
    if (st == HttpRequestParser::Status::kDone) o.request = p.take_request();
    if (st == HttpRequestParser::Status::kError) {
      o.error_status = p.error_status();
      o.error = p.error_message();
    }
    return o;
  }
}

const std::string kPost =
    "POST /v1/completions?x=1 HTTP/1.1\r\nHost: localhost:8000\r\nContent-Type: application/json\r\n"
    "Content-Length: 13\r\n\r\n{\"prompt\":1}\n";

TEST(HttpRequestParser, ParsesARequestTheSameInAnyPieces) {
  for (size_t step : {0, 1, 2, 7, 64}) {
    Outcome o = parse(kPost, step);
    ASSERT_EQ(o.status, HttpRequestParser::Status::kDone) << "step " << step << ": " << o.error;
    EXPECT_EQ(o.request.method, "POST");
    EXPECT_EQ(o.request.path, "/v1/completions");
    EXPECT_EQ(o.request.query, "x=1");
    EXPECT_EQ(o.request.version_minor, 1);
    EXPECT_EQ(o.request.header("content-type"), "application/json");  // case-insensitive names
    EXPECT_EQ(o.request.body, "{\"prompt\":1}\n");
    EXPECT_TRUE(o.request.keep_alive());
    EXPECT_EQ(o.consumed, kPost.size());
  }
}

TEST(HttpRequestParser, StopsAtTheEndOfOneRequestForPipelining) {
  const std::string two = kPost + "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  Outcome o = parse(two);
  ASSERT_EQ(o.status, HttpRequestParser::Status::kDone);
  EXPECT_EQ(o.consumed, kPost.size());
  Outcome second = parse(two.substr(o.consumed));
  ASSERT_EQ(second.status, HttpRequestParser::Status::kDone);
  EXPECT_EQ(second.request.path, "/health");
}

TEST(HttpRequestParser, DechunksBodiesAndDropsTrailers) {
  const std::string req =
      "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: y\r\n\r\n";
  for (size_t step : {0, 1, 3}) {
    Outcome o = parse(req, step);
    ASSERT_EQ(o.status, HttpRequestParser::Status::kDone) << o.error;
    EXPECT_EQ(o.request.body, "hello world");
    EXPECT_EQ(o.consumed, req.size());
    EXPECT_TRUE(o.saw_headers_done);
  }
}

TEST(HttpRequestParser, AcceptsBareLfAbsoluteFormAndHttp10) {
  Outcome lf = parse("GET /health HTTP/1.1\nHost: a\n\n");
  ASSERT_EQ(lf.status, HttpRequestParser::Status::kDone) << lf.error;
  Outcome abs = parse("GET http://example.com:8000/v1/models?a=b HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_EQ(abs.status, HttpRequestParser::Status::kDone);
  EXPECT_EQ(abs.request.path, "/v1/models");
  EXPECT_EQ(abs.request.query, "a=b");
  Outcome old = parse("GET /health HTTP/1.0\r\n\r\n");  // no Host needed
  ASSERT_EQ(old.status, HttpRequestParser::Status::kDone);
  EXPECT_EQ(old.request.version_minor, 0);
  EXPECT_FALSE(old.request.keep_alive());
  Outcome old_ka = parse("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_TRUE(old_ka.request.keep_alive());
  Outcome close = parse("GET /health HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n");
  EXPECT_FALSE(close.request.keep_alive());
  Outcome later = parse("GET /health HTTP/1.2\r\nHost: a\r\n\r\n");  // answered as 1.1 (RFC 9112 2.3)
  ASSERT_EQ(later.status, HttpRequestParser::Status::kDone);
  EXPECT_EQ(later.request.version_minor, 1);
  Outcome decoded = parse("GET /v1/models/a%2Fb HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(decoded.request.path, "/v1/models/a/b");
}

TEST(HttpRequestParser, ExpectContinueIsReportedAtTheHeaders) {
  Outcome o = parse("POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
  ASSERT_EQ(o.status, HttpRequestParser::Status::kDone);
  EXPECT_TRUE(o.saw_headers_done);
  EXPECT_TRUE(o.expects_continue);
  EXPECT_EQ(o.request.body, "hi");
}

struct Refusal {
  const char* name;
  std::string bytes;
  int status;
};

TEST(HttpRequestParser, RefusesAmbiguousOrOversizedFramingWithItsStatus) {
  HttpLimits small;
  small.max_body_bytes = 100;
  small.max_request_line = 64;
  small.max_header_bytes = 256;
  small.max_headers = 5;
  const std::string h = "Host: a\r\n";
  const std::vector<Refusal> cases = {
      {"CL and TE", "POST /x HTTP/1.1\r\n" + h + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"TE then CL", "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
      {"differing CLs", "POST /x HTTP/1.1\r\n" + h + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
      {"CL list differing", "POST /x HTTP/1.1\r\n" + h + "Content-Length: 3, 4\r\n\r\nabcd", 400},
      {"negative CL", "POST /x HTTP/1.1\r\n" + h + "Content-Length: -1\r\n\r\n", 400},
      {"hex CL", "POST /x HTTP/1.1\r\n" + h + "Content-Length: 0x10\r\n\r\n", 400},
      {"empty CL", "POST /x HTTP/1.1\r\n" + h + "Content-Length: \r\n\r\n", 400},
      {"CL + sign", "POST /x HTTP/1.1\r\n" + h + "Content-Length: +3\r\n\r\nabc", 400},
      {"huge CL", "POST /x HTTP/1.1\r\n" + h + "Content-Length: 99999999999999999999999\r\n\r\n", 413},
      {"CL over the limit", "POST /x HTTP/1.1\r\n" + h + "Content-Length: 101\r\n\r\n", 413},
      {"chunked over the limit", "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n65\r\n", 413},
      {"malformed chunk size", "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"chunk size after a space",
       "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n 1\r\na\r\n0\r\n\r\n", 400},
      {"chunk size 0x", "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n0x1\r\na\r\n0\r\n\r\n", 400},
      {"chunk longer than said", "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
      {"gzip coding", "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: gzip\r\n\r\n", 400},
      {"gzip, chunked", "POST /x HTTP/1.1\r\n" + h + "Transfer-Encoding: gzip, chunked\r\n\r\n", 400},
      {"TE in HTTP/1.0", "POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST without length", "POST /x HTTP/1.1\r\n" + h + "\r\n", 411},
      {"no Host", "GET /x HTTP/1.1\r\n\r\n", 400},
      {"two Hosts", "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"HTTP/2.0", "GET /x HTTP/2.0\r\n" + h + "\r\n", 400},
      {"HTTP/0.9", "GET /x HTTP/0.9\r\n" + h + "\r\n", 400},
      {"garbage version", "GET /x HTTQ/1.1\r\n" + h + "\r\n", 400},
      {"no version", "GET /x\r\n" + h + "\r\n", 400},
      {"two spaces", "GET  /x HTTP/1.1\r\n" + h + "\r\n", 400},
      {"bad method", "G(T /x HTTP/1.1\r\n" + h + "\r\n", 400},
      {"long request line", "GET /" + std::string(100, 'a') + " HTTP/1.1\r\n" + h + "\r\n", 414},
      {"header without colon", "GET /x HTTP/1.1\r\n" + h + "Nonsense\r\n\r\n", 400},
      {"space before colon", "GET /x HTTP/1.1\r\n" + h + "X-A : b\r\n\r\n", 400},
      {"obs-fold", "GET /x HTTP/1.1\r\n" + h + "X-A: b\r\n  c\r\n\r\n", 400},
      {"NUL in a value", "GET /x HTTP/1.1\r\n" + h + std::string("X-A: b\0c\r\n\r\n", 13), 400},
      {"bare CR", "GET /x HTTP/1.1\r\n" + h + "X-A: b\rc\r\n\r\n", 400},
      {"too many headers", "GET /x HTTP/1.1\r\n" + h + "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n", 431},
      {"header section too large", "GET /x HTTP/1.1\r\n" + h + "X-A: " + std::string(300, 'a') + "\r\n\r\n", 431},
      {"unknown Expect", "POST /x HTTP/1.1\r\n" + h + "Expect: magic\r\nContent-Length: 1\r\n\r\na", 417},
      {"bad percent escape", "GET /a%zz HTTP/1.1\r\n" + h + "\r\n", 400},
      {"encoded NUL", "GET /a%00 HTTP/1.1\r\n" + h + "\r\n", 400},
      {"non-ASCII target", "GET /\xc3\xa9 HTTP/1.1\r\n" + h + "\r\n", 400},
      {"'*' for GET", "GET * HTTP/1.1\r\n" + h + "\r\n", 400},
      {"relative target", "GET x HTTP/1.1\r\n" + h + "\r\n", 400},
  };
  for (const Refusal& c : cases) {
    for (size_t step : {0, 1}) {
      Outcome o = parse(c.bytes, step, small);
      EXPECT_EQ(o.status, HttpRequestParser::Status::kError) << c.name;
      EXPECT_EQ(o.error_status, c.status) << c.name << ": " << o.error;
      EXPECT_FALSE(o.error.empty()) << c.name;
    }
  }
}

TEST(HttpRequestParser, BoundsTheLinesItHoldsWhateverTheInput) {
  // A header line that never ends: refused once it passes the limit, not
  // buffered without end.
  HttpLimits l;
  l.max_header_bytes = 1024;
  HttpRequestParser p(l);
  const std::string start = "GET /x HTTP/1.1\r\nX-Long: ";
  size_t used = 0;
  ASSERT_EQ(p.feed(start.data(), start.size(), &used), HttpRequestParser::Status::kNeedMore);
  const std::string chunk(100, 'a');
  HttpRequestParser::Status st = HttpRequestParser::Status::kNeedMore;
  int fed = 0;
  while (st == HttpRequestParser::Status::kNeedMore && fed < 1000) {
    st = p.feed(chunk.data(), chunk.size(), &used);
    ++fed;
  }
  EXPECT_EQ(st, HttpRequestParser::Status::kError);
  EXPECT_EQ(p.error_status(), 431);
  EXPECT_LE(fed, 11);
}

}  // namespace
}  // namespace parallm::net
