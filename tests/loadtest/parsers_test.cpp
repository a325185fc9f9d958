// Unit tests of the byte-level parsers and option parsers of parallm bench:
// HTTP/1.1 responses fed in every possible split, SSE framing, URLs, ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loadtest/bench_options.h"
#include "loadtest/http_response_parser.h"
#include "loadtest/sse_parser.h"
#include "loadtest/workload.h"
#include "util/check.h"

namespace parallm::loadtest {
namespace {

using State = HttpResponseParser::State;

const std::string kChunked =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    "d\r\ndata: hello\n\n\r\n"
    "1c;ext=1\r\ndata: {\"a\":1}\r\ndata: two\r\n\r\n\r\n"
    "0\r\nX-Trailer: t\r\n\r\n";

TEST(HttpResponseParser, ChunkedBodyInEverySplit) {
  for (size_t cut1 = 0; cut1 <= kChunked.size(); cut1 += 1) {
    for (size_t cut2 = cut1; cut2 <= kChunked.size(); cut2 += 7) {
      HttpResponseParser p;
      std::string body;
      p.feed(std::string_view(kChunked).substr(0, cut1), body);
      p.feed(std::string_view(kChunked).substr(cut1, cut2 - cut1), body);
      const State s = p.feed(std::string_view(kChunked).substr(cut2), body);
      ASSERT_EQ(s, State::kDone) << cut1 << " " << cut2;
      EXPECT_EQ(body, "data: hello\n\ndata: {\"a\":1}\r\ndata: two\r\n\r\n");
      EXPECT_EQ(p.status(), 200);
      EXPECT_TRUE(p.keep_alive());
      EXPECT_EQ(p.content_type(), "text/event-stream");
    }
  }
}

TEST(HttpResponseParser, ContentLengthCloseAnd1xx) {
  HttpResponseParser p;
  std::string body;
  EXPECT_EQ(
      p.feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcdeXYZ",
             body),
      State::kDone);
  EXPECT_EQ(p.status(), 503);
  EXPECT_EQ(body, "abcde");
  EXPECT_FALSE(p.keep_alive());

  HttpResponseParser q;  // no length: the body runs to the end of the connection
  body.clear();
  EXPECT_EQ(q.feed("HTTP/1.0 200 OK\r\n\r\npartial", body), State::kBody);
  EXPECT_EQ(q.on_eof(), State::kDone);
  EXPECT_EQ(body, "partial");
  EXPECT_FALSE(q.keep_alive());
}

TEST(HttpResponseParser, CutChunkedStreamIsNotDone) {
  HttpResponseParser p;
  std::string body;
  p.feed(kChunked.substr(0, 100), body);
  EXPECT_EQ(p.on_eof(), State::kBody);  // the caller reports a dropped stream
}

TEST(HttpResponseParser, RejectsGarbage) {
  for (const char* bad :
       {"SSH-2.0-OpenSSH\r\n", "HTTP/1.1 abc\r\n", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n", "HTTP/1.1 200 OK\r\nbroken header\r\n\r\n"}) {
    HttpResponseParser p;
    std::string body;
    EXPECT_EQ(p.feed(bad, body), State::kError) << bad;
    EXPECT_FALSE(p.error().empty());
  }
}

TEST(SseParser, EventsAcrossSplitsAndLineEndings) {
  const std::string stream = ": ping\n\ndata: a\r\n\r\ndata:b\rdata: c\r\revent: x\nid: 3\ndata: [DONE]\n\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser p;
    std::vector<std::string> events;
    p.feed(std::string_view(stream).substr(0, cut), events);
    p.feed(std::string_view(stream).substr(cut), events);
    ASSERT_EQ(events.size(), 3u) << cut;
    EXPECT_EQ(events[0], "a");
    EXPECT_EQ(events[1], "b\nc");
    EXPECT_EQ(events[2], "[DONE]");
    EXPECT_EQ(p.pending_bytes(), 0u);
  }
}

TEST(HttpUrl, ParsesAndBuildsEndpointPaths) {
  HttpUrl u = parse_http_url("http://127.0.0.1:8000");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8000);
  EXPECT_EQ(endpoint_path(u, true), "/v1/chat/completions");
  EXPECT_EQ(endpoint_path(u, false), "/v1/completions");
  EXPECT_EQ(models_path(u), "/v1/models");
  u = parse_http_url("http://localhost:9/proxy/v1/");
  EXPECT_EQ(endpoint_path(u, true), "/proxy/v1/chat/completions");
  EXPECT_EQ(models_path(u), "/proxy/v1/models");
  u = parse_http_url("http://[::1]:81/v1/completions");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.authority(), "[::1]:81");
  EXPECT_EQ(endpoint_path(u, true), "/v1/completions");  // given in full: used as is
  EXPECT_EQ(models_path(u), "/v1/models");
  EXPECT_EQ(parse_http_url("http://example").port, 80);
  for (const char* bad : {"https://x", "x:80", "http://", "http://h:0", "http://h:99999", "http://h:8/a?b"}) {
    EXPECT_THROW(parse_http_url(bad), InputError) << bad;
  }
}

TEST(BenchOptions, RangesListsAndEndpoints) {
  const IntRange r = parse_int_range("16:64", "--input-len");
  EXPECT_EQ(r.min, 16);
  EXPECT_EQ(r.max, 64);
  EXPECT_EQ(parse_int_range("7", "--output-len").max, 7);
  try {
    parse_int_range("5:2", "--input-len");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--input-len '5:2'"), std::string::npos);
  }
  for (const char* bad : {"0", "-3", "a", "1:2:3", "4:", "", "2.5"}) {
    EXPECT_THROW(parse_int_range(bad, "--input-len"), InputError) << bad;
  }
  EXPECT_EQ(parse_int_list("1,8,32", "--concurrency"), (std::vector<int64_t>{1, 8, 32}));
  EXPECT_THROW(parse_int_list("1,,2", "--concurrency"), InputError);
  EXPECT_TRUE(parse_rate_list("inf").empty());
  EXPECT_EQ(parse_rate_list("2,4.5"), (std::vector<double>{2, 4.5}));
  EXPECT_THROW(parse_rate_list("0"), InputError);
  EXPECT_THROW(parse_rate_list("fast"), InputError);
  EXPECT_EQ(parse_endpoint("completions"), Endpoint::kCompletions);
  EXPECT_THROW(parse_endpoint("embeddings"), InputError);

  BenchOptions o;
  o.find_capacity = true;
  EXPECT_THROW(validate_options(o), InputError);  // no SLO to break
  o.tpot_slo_ms = 10;
  validate_options(o);
  EXPECT_EQ(o.num_requests, 100);
  EXPECT_EQ(o.concurrency, (std::vector<int64_t>{1}));
  BenchOptions p;
  p.peak_qps = 10;
  EXPECT_THROW(validate_options(p), InputError);  // planning needs a measured capacity
}

TEST(Workload, SeededPromptsOfTheAskedLength) {
  BenchOptions o;
  o.url = parse_http_url("http://127.0.0.1:1");
  o.input_len = {20, 40};
  o.output_len = {5, 9};
  o.seed = 7;
  const Workload w(o, "m");
  std::set<int64_t> lengths;
  for (int64_t i = 0; i < 200; ++i) {
    int64_t est = 0, max_tokens = 0;
    const auto body = w.body(0, i, &est, &max_tokens);
    const std::string prompt = body["messages"][0]["content"];
    const int64_t words = std::count(prompt.begin(), prompt.end(), ' ') + 1;
    EXPECT_EQ(words, est);
    EXPECT_GE(est, 20);
    EXPECT_LE(est, 40);
    EXPECT_GE(max_tokens, 5);
    EXPECT_LE(max_tokens, 9);
    EXPECT_EQ(body["max_tokens"], max_tokens);
    EXPECT_EQ(body["model"], "m");
    EXPECT_EQ(body["stream"], true);
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
    EXPECT_FALSE(body.contains("ignore_eos"));
    lengths.insert(est);
    int64_t est2 = 0, max2 = 0;
    EXPECT_EQ(w.body(0, i, &est2, &max2), body);  // reproducible
  }
  EXPECT_GT(lengths.size(), 15u);  // the range is actually used
  const PreparedRequest req = w.make(0, 3);
  EXPECT_EQ(req.http_bytes.rfind("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:1\r\n", 0), 0u);
  const size_t split = req.http_bytes.find("\r\n\r\n");
  EXPECT_NE(req.http_bytes.find("Content-Length: " + std::to_string(req.http_bytes.size() - split - 4)),
            std::string::npos);
}

}  // namespace
}  // namespace parallm::loadtest
