// A CompletionBackend without a model for the HTTP tests: a worker thread
// "generates" a token sequence fixed by the seed (script_token), one token
// every `token_interval`, with a real tokenizer (stories260K's) so text and
// detokenization are real. It counts running requests (and their peak) and aborts, and can be
// told to refuse with kQueueFull, or to report busier steps than it runs
// (`other_step_tokens`: tokens of sequences it pretends share each step).
// For the metrics it reports fixed engine timings on each first token
// (kScriptQueueS, kScriptPrefillS), every prompt token as looked up in the
// prefix cache and half of each prompt (rounded down) as found there.
// With embed_size > 0 an embedding request ends at its first step with
// script_embedding(prompt), resized to embed_size.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/completion_backend.h"
#include "tokenizer/tokenizer.h"

namespace parallm {

constexpr double kScriptQueueS = 0.25, kScriptPrefillS = 0.4;

inline int32_t script_token(uint64_t seed, int64_t i) {
  return static_cast<int32_t>(259 + (seed * 7 + static_cast<uint64_t>(i) * 13) % 250);  // no byte tokens
}

// With logprobs requested: token i's logprob, and k alternatives, the script's
// own token first, then the ids after it with lower logprobs.
inline float script_logprob(uint64_t seed, int64_t i) {
  return -0.25f * static_cast<float>((seed + static_cast<uint64_t>(i)) % 7);
}
inline std::vector<TokenLogprob> script_top(uint64_t seed, int64_t i, int32_t k) {
  std::vector<TokenLogprob> top;
  for (int32_t a = 0; a < k; ++a)
    top.push_back({script_token(seed, i) + a, script_logprob(seed, i) - static_cast<float>(a)});
  return top;
}

inline std::vector<float> script_embedding(const std::vector<int32_t>& prompt, int64_t size) {
  std::vector<float> v = {static_cast<float>(prompt.size()), static_cast<float>(prompt.front()),
                          static_cast<float>(prompt.back()) / 3.0f, -0.125f};
  v.resize(static_cast<size_t>(size), 1.0f / 7.0f);
  return v;
}

class ScriptedBackend : public CompletionBackend {
 public:
  explicit ScriptedBackend(std::chrono::milliseconds token_interval = std::chrono::milliseconds(1))
      : tok_(load_tokenizer(std::string(PARALLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf")),
        interval_(token_interval),
        worker_([this] { loop(); }) {}
  ~ScriptedBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  SubmitStatus submit(ServingRequest r, std::function<void(const TokenEvent&)> cb, uint64_t* id) override {
    if (refuse_) return SubmitStatus::kQueueFull;
    std::lock_guard<std::mutex> lock(mu_);
    *id = next_id_++;
    const uint64_t n_prompt = r.prompt.size();
    prompt_tokens_ += n_prompt;
    prefix_hits_ += n_prompt / 2;
    reqs_[*id] = Req{std::move(r), std::move(cb), 0, false};
    ++submitted;
    peak_running = std::max<int64_t>(peak_running, static_cast<int64_t>(reqs_.size()));
    cv_.notify_all();
    return SubmitStatus::kOk;
  }
  void abort(uint64_t id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reqs_.find(id);
    if (it != reqs_.end()) it->second.aborted = true;
  }
  ServingMetrics metrics() const override {
    std::lock_guard<std::mutex> lock(mu_);
    ServingMetrics m;
    m.num_requests_running = static_cast<int64_t>(reqs_.size());
    m.kv_cache_usage = static_cast<double>(reqs_.size()) / 1000.0;
    m.generation_tokens_total = generated_;
    m.prompt_tokens_total = prompt_tokens_;
    m.prefix_cache_queries_total = prompt_tokens_;
    m.prefix_cache_hits_total = prefix_hits_;
    return m;
  }
  std::vector<DeviceStat> device_stats() const override {
    return {DeviceStat{"cpu:0", metrics().kv_cache_usage, 12345}};
  }
  const Tokenizer& tokenizer() const override { return *tok_; }
  int64_t max_model_len() const override { return 512; }
  int64_t embedding_size() const override { return embed_size; }

  // When set (before requests arrive): every request generates exactly
  // these tokens, then stops (finish_reason "stop").
  std::vector<int32_t> fixed_tokens;
  std::atomic<bool> refuse_{false};
  std::atomic<int64_t> embed_size{0};
  std::atomic<int64_t> other_step_tokens{0};
  std::atomic<int> submitted{0}, aborted{0};
  std::atomic<int64_t> peak_running{0};  // the most requests in flight at once

 private:
  struct Req {
    ServingRequest r;
    std::function<void(const TokenEvent&)> cb;
    int64_t n = 0;
    bool aborted = false;
  };
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (reqs_.empty()) {
        cv_.wait(lock);
        continue;
      }
      int64_t step_tokens = other_step_tokens;
      for (const auto& [id, q] : reqs_) step_tokens += q.aborted ? 0 : 1;
      for (auto it = reqs_.begin(); it != reqs_.end();) {
        Req& q = it->second;
        TokenEvent e;
        e.prompt_tokens = static_cast<int64_t>(q.r.prompt.size());
        e.step_tokens = step_tokens;
        if (q.aborted) {
          e.finished = true;
          e.finish_reason = "abort";
          e.completion_tokens = q.n;
          ++aborted;
        } else if (q.r.embed) {
          e.finished = true;
          e.finish_reason = "stop";
          e.embedding = script_embedding(q.r.prompt, embed_size);
        } else {
          const bool fixed = !fixed_tokens.empty();
          e.token = fixed ? fixed_tokens[static_cast<size_t>(q.n)] : script_token(q.r.sampling.seed, q.n);
          if (q.r.prompt_logprobs >= 0 && q.n == 0) {  // prompt token i: logprob -i/2, no alternatives
            for (size_t i = 0; i < q.r.prompt.size(); ++i) {
              e.prompt_logprobs.push_back({q.r.prompt[i], -0.5f * static_cast<float>(i), {}, i > 0});
            }
          }
          if (q.n == 0) {
            e.queue_s = kScriptQueueS;
            e.prefill_s = kScriptPrefillS;
          }
          if (q.r.logprobs >= 0) {
            e.logprob = script_logprob(q.r.sampling.seed, q.n);
            e.top_logprobs = script_top(q.r.sampling.seed, q.n, q.r.logprobs);
          }
          e.completion_tokens = ++q.n;
          ++generated_;
          if (fixed && q.n >= static_cast<int64_t>(fixed_tokens.size())) {
            e.finished = true;
            e.finish_reason = "stop";
          } else if (q.n >= q.r.max_tokens) {
            e.finished = true;
            e.finish_reason = "length";
          }
        }
        q.cb(e);
        it = e.finished ? reqs_.erase(it) : std::next(it);
      }
      lock.unlock();
      std::this_thread::sleep_for(interval_);
      lock.lock();
    }
    for (auto& [id, q] : reqs_) {
      TokenEvent e;
      e.finished = true;
      e.finish_reason = "abort";
      q.cb(e);
    }
  }

  std::unique_ptr<Tokenizer> tok_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Req> reqs_;
  uint64_t next_id_ = 1;
  uint64_t generated_ = 0;
  uint64_t prompt_tokens_ = 0, prefix_hits_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace parallm
