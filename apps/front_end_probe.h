// FrontEndProbe: what serve's request path adds to a request's TTFT, timed as
// bench times it. serve's own HttpServer (HTTP parsing, the chat template,
// tokenizing, the SSE stream, its HTTP threads) listens on a loopback port in
// front of a ServingEngine, and bench's own client (loadtest::run_level)
// sends it one streamed chat request at a time. The client's TTFT less the
// engine's forward of that prompt is the front end's share: the request's
// way in, the step loop's wake-up, and the first token's way out
// (ModelProfile::request_overhead_us; plan_profile.cpp measures it).
#pragma once
#include <cstdint>
#include <memory>

namespace parallm {

class Engine;
class ServingEngine;

class FrontEndProbe {
 public:
  // Serves `serving` (over `engine`) on 127.0.0.1, an ephemeral port; both
  // must outlive the probe. Throws InputError when no loopback port binds.
  FrontEndProbe(Engine& engine, ServingEngine& serving);
  ~FrontEndProbe();
  FrontEndProbe(const FrontEndProbe&) = delete;
  FrontEndProbe& operator=(const FrontEndProbe&) = delete;

  struct Result {
    double ttft_s = 0;          // the client's time to first token
    int64_t prompt_tokens = 0;  // the server's count (chat template included)
  };
  // One chat request of `words` prompt words (bench's word prompts, always
  // the same ones) and 2 output tokens. Throws std::runtime_error when the
  // request fails.
  Result request(int64_t words);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parallm
