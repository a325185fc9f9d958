// RequestChannel: the events of one request's choices, from the backend's
// step thread to the request's flow (completion_flow.cpp), and the rule for
// when the step thread wakes the flow.
//
// NOTE: on this kind of host (2 cores, system calls through a hypervisor) a
// wake-up per token costs ~50 us of CPU (futex, the worker's send, the
// client's wake-up), taken from the compute threads: ~2 ms of a 17 ms step at
// 32 streams. So the step thread wakes the flow only when it has something to
// do: the first token (time to first token), every `interval` tokens
// (--stream-interval), and the final event. A request that is neither
// streamed nor has stop strings waits for its final event.
//
// With --stream-interval auto (the default) the interval follows the load: a
// step that gave tokens to n sequences wakes each stream every ceil(n / 4)
// tokens, so a step pays at most ~4 wake-ups whatever the concurrency. Up to
// 4 streams still get every token at once; at 32 the interval is 8, which
// gave 13% more tokens/s than every token (docs/PERFORMANCE.md). The server's
// tick also takes what is there every 100 ms, which bounds the delay.
//
// Each event is stamped when the backend hands it over (on its step thread,
// right after the step that made it), so latency metrics (time to first
// token, inter-token latency) see when tokens were made, not when a grouped
// wake-up let the flow render them.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "engine/serving_api.h"
#include "server/http_server.h"

namespace parallm {

constexpr int64_t kWakesPerStep = 4;

// One event of one choice (several with `n` > 1 or a batch of prompts).
struct ChoiceEvent {
  size_t choice;
  TokenEvent event;
  std::chrono::steady_clock::time_point at;  // when push() received it
};

class RequestChannel {
 public:
  // wake: called (on the step thread) when the flow should run; keep it quick.
  RequestChannel(bool ends_only, int64_t interval, std::function<void()> wake)
      : ends_only_(ends_only), interval_(interval), wake_(std::move(wake)) {}

  void push(size_t choice, const TokenEvent& e) {
    const auto at = std::chrono::steady_clock::now();
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back({choice, e, at});
      if (e.token >= 0) ++tokens_, ++unwoken_;
      wake = e.finished || tokens_ == 1 || (!ends_only_ && unwoken_ >= tokens_per_wake(e));
      if (wake) unwoken_ = 0;
    }
    if (wake) wake_();
  }
  // Everything queued so far.
  std::deque<ChoiceEvent> take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<ChoiceEvent> out;
    out.swap(events_);
    unwoken_ = 0;
    return out;
  }
  bool has_events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !events_.empty();
  }

 private:
  int64_t tokens_per_wake(const TokenEvent& e) const {
    if (interval_ != kStreamIntervalAuto) return interval_;
    return std::max<int64_t>(1, (e.step_tokens + kWakesPerStep - 1) / kWakesPerStep);
  }

  mutable std::mutex mu_;
  std::deque<ChoiceEvent> events_;
  const bool ends_only_;    // wake only for the first and the final events
  const int64_t interval_;  // tokens per wake-up, or kStreamIntervalAuto
  int64_t tokens_ = 0, unwoken_ = 0;
  std::function<void()> wake_;
};

}  // namespace parallm
