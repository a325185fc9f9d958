// What the client measured for one request, and the kinds of failure it can
// end in. Plain data: the stream client fills it, stats.cpp aggregates it.
// Times are seconds on CLOCK_MONOTONIC, relative to nothing in particular;
// only differences are meaningful.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parallm::loadtest {

enum class ErrorKind {
  kNone = 0,
  kTimeout,        // no end of stream within --timeout
  kHttp4xx,        // response status 400..499
  kHttp5xx,        // response status 500..599
  kConnection,     // could not connect, or the connection failed before any response byte
  kDroppedStream,  // the connection ended after the response began but before the stream's end
  kStreamError,    // the server sent an error object inside the SSE stream
  kBadResponse,    // unparseable HTTP, non-SSE body, other status codes
};
inline constexpr int kNumErrorKinds = 8;

// Stable names used in the table, the JSON and the HTML report.
std::string_view error_kind_name(ErrorKind kind);

struct RequestRecord {
  int64_t index = 0;                     // order of issue within its level
  double start_s = 0;                    // request began (connect or write on a reused connection)
  double first_token_s = -1;             // first chunk that carried generated text
  double last_token_s = -1;              // last chunk that carried generated text
  double end_s = 0;                      // stream finished or failed
  std::vector<float> itl_ms;             // gaps between successive text-bearing chunks
  int64_t prompt_tokens_sent = 0;        // our estimate of the prompt length (words, or dataset)
  int64_t chunks_with_text = 0;          // text-bearing chunks counted from the stream
  int64_t usage_prompt_tokens = -1;      // from the server's `usage`, -1 if not sent
  int64_t usage_completion_tokens = -1;  // from the server's `usage`, -1 if not sent
  ErrorKind error = ErrorKind::kNone;
  int http_status = 0;
  std::string error_message;  // first ~200 characters, for the report

  bool ok() const { return error == ErrorKind::kNone; }
  int64_t output_tokens() const { return usage_completion_tokens >= 0 ? usage_completion_tokens : chunks_with_text; }
  int64_t input_tokens() const { return usage_prompt_tokens >= 0 ? usage_prompt_tokens : prompt_tokens_sent; }
  double ttft_ms() const { return (first_token_s - start_s) * 1e3; }
  double e2e_ms() const { return (end_s - start_s) * 1e3; }
  // Time per output token after the first; < 0 when fewer than 2 tokens.
  double tpot_ms() const {
    const int64_t n = output_tokens();
    if (n < 2 || first_token_s < 0) return -1;
    return (end_s - first_token_s) * 1e3 / static_cast<double>(n - 1);
  }
};

}  // namespace parallm::loadtest
