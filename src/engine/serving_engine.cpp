// ServingEngine: the executor of the serving step loop (see serving_engine.h).
// One background thread owns the Scheduler, the BlockManager and each live
// request's Sampler; other threads only touch the inbox (new requests and
// aborts) and the published metrics, both under mutexes. Each step:
//   schedule() -> one ForwardBatch (each sequence's tokens contiguous, logits
//   for the sequences whose computed count catches up) -> Engine::forward ->
//   one sample per such sequence -> update() -> events to the callbacks.
// Idle, the thread sleeps on a condition variable.
#include "engine/serving_engine.h"

#include <algorithm>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "kv/block_manager.h"
#include "sched/scheduler.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

SchedulerOptions scheduler_options(const Engine& engine, const ServingOptions& o) {
  SchedulerOptions s;
  s.max_num_seqs = o.max_num_seqs;
  s.max_num_batched_tokens = o.max_num_batched_tokens;
  s.max_model_len = o.max_model_len > 0 ? std::min(o.max_model_len, engine.ctx_size()) : engine.ctx_size();
  s.long_prompt_threshold = o.long_prompt_threshold;
  // NOTE: submit() enforces --max-queue (the HTTP thread must answer 429 at once);
  // the scheduler's own limit is off so a request that passed it is never refused later.
  s.max_queue = INT64_MAX;
  return s;
}

}  // namespace

struct ServingEngine::Impl {
  struct Incoming {
    uint64_t id;
    ServingRequest request;
    std::function<void(const TokenEvent&)> on_event;
  };
  struct Live {
    std::function<void(const TokenEvent&)> on_event;
    Sampler sampler;
    int64_t n_prompt = 0;
    int32_t logprobs = -1;  // ServingRequest::logprobs
    // This step's logprobs of the sampled token, filled in the sampling region.
    float logprob = 0.0f;
    std::vector<TokenLogprob> top;
    // Prompt logprobs (ServingRequest::prompt_logprobs): filled chunk by chunk,
    // handed over with the first event. A recompute after preemption does not
    // compute a position twice: prompt.size() is the next one wanted.
    bool prompt_logprobs = false;
    std::vector<int32_t> prompt_tokens;  // only with prompt_logprobs
    std::vector<TokenLogprobs> prompt;   // [0, prompt.size()) reported or computed so far
    bool prompt_sent = false;
  };
  // A logits row at a prompt position: it predicts the prompt's next token.
  struct PromptRow {
    Live* live;
    int64_t logit_row;   // its row in the step's logits
    int64_t target_pos;  // the prompt position it predicts
  };

  Impl(Engine& e, const ServingOptions& o)
      : engine(e),
        kv(e.n_kv_blocks(), e.block_size(), o.enable_prefix_caching),
        sched(scheduler_options(e, o), kv, [&e](int32_t id) { return e.tokenizer().is_stop_token(id); }),
        n_vocab(static_cast<int32_t>(e.config().n_vocab)),
        max_queue(o.max_queue) {
    for (int32_t id = 0; id < n_vocab; ++id) {
      if (e.tokenizer().is_stop_token(id)) stop_ids.push_back(id);
    }
    publish_metrics();
  }

  void loop();
  void step();
  void emit_final(uint64_t id, const char* reason, const std::string& error);
  void publish_metrics();

  Engine& engine;
  BlockManager kv;       // loop thread only
  Scheduler sched;       // loop thread only
  const int32_t n_vocab;
  const int64_t max_queue;
  std::vector<int32_t> stop_ids;  // the tokenizer's stop tokens (min_tokens keeps them out)
  // Each token's bytes for JSON mode (control tokens empty), built at the first
  // request that needs it.
  std::vector<std::string> token_bytes_;
  const std::vector<std::string>& token_bytes() {
    if (token_bytes_.empty()) {
      const Tokenizer& tok = engine.tokenizer();
      token_bytes_.resize(static_cast<size_t>(n_vocab));
      for (int32_t id = 0; id < n_vocab && id < tok.n_vocab(); ++id) {
        if (!tok.is_special(id)) token_bytes_[static_cast<size_t>(id)] = tok.token_to_piece(id);
      }
    }
    return token_bytes_;
  }
  std::unordered_map<uint64_t, Live> live;  // loop thread only

  std::mutex mu;  // guards everything below up to metrics_mu
  std::condition_variable cv;
  bool stop = false;
  std::deque<Incoming> inbox;
  std::vector<uint64_t> abort_inbox;
  int64_t n_waiting_published = 0;  // scheduler's waiting count after the last step
  uint64_t next_id = 1;

  mutable std::mutex metrics_mu;
  ServingMetrics metrics;
  uint64_t prompt_tokens_total = 0, generation_tokens_total = 0;  // loop thread

  // Scratch reused every step (no per-token allocations).
  ForwardBatch batch;
  std::vector<int32_t> sampled;
  std::vector<SeqEvent> events;
  std::vector<size_t> sample_rows;   // plan.seqs indices that sample this step
  std::vector<Live*> sample_lives;   // their requests, in the same order
  std::vector<int64_t> sample_logit_rows;  // their rows of the logits
  std::vector<PromptRow> prompt_rows;      // logits rows at prompt positions (prompt logprobs)
  std::deque<Incoming> taken;
  std::vector<uint64_t> aborts_taken;
  std::thread thread;
};

void ServingEngine::Impl::emit_final(uint64_t id, const char* reason, const std::string& error) {
  auto it = live.find(id);
  if (it == live.end()) return;
  TokenEvent ev;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = it->second.n_prompt;
  auto cb = std::move(it->second.on_event);
  live.erase(it);
  if (cb) cb(ev);
}

void ServingEngine::Impl::publish_metrics() {
  const int64_t waiting = sched.n_waiting();
  {
    std::lock_guard<std::mutex> lk(mu);
    n_waiting_published = waiting;
  }
  std::lock_guard<std::mutex> lk(metrics_mu);
  metrics.num_requests_running = sched.n_running();
  metrics.num_requests_waiting = waiting;
  metrics.kv_cache_usage = kv.usage();
  metrics.prefix_cache_hit_rate = kv.hit_rate();
  metrics.num_preemptions_total = sched.n_preemptions();
  metrics.prompt_tokens_total = prompt_tokens_total;
  metrics.generation_tokens_total = generation_tokens_total;
  metrics.kv_blocks_total = kv.n_blocks();
  metrics.kv_blocks_free = kv.n_free_blocks();
}

void ServingEngine::Impl::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return stop || !inbox.empty() || !abort_inbox.empty() || sched.has_work(); });
      if (stop) return;
      taken.swap(inbox);
      aborts_taken.swap(abort_inbox);
    }
    for (Incoming& in : taken) {
      SeqRequest r;
      r.id = in.id;
      r.prompt = std::move(in.request.prompt);
      r.max_tokens = in.request.max_tokens;
      r.priority = in.request.priority;
      r.ignore_eos = in.request.ignore_eos;
      const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
      r.prompt_logits = in.request.prompt_logprobs && in.request.logprobs >= 0;
      r.stop_ids = in.request.stop_token_ids;
      Live l{std::move(in.on_event), Sampler(in.request.sampling), n_prompt, in.request.logprobs, 0.0f, {}, false, {}, {},
             false};
      l.prompt_logprobs = r.prompt_logits;
      if (l.prompt_logprobs) {
        l.prompt_tokens = r.prompt;
        l.prompt.reserve(static_cast<size_t>(n_prompt));
        l.prompt.push_back({r.prompt[0], 0.0f, {}, /*has_logprob=*/false});
      }
      for (int32_t t : r.prompt) l.sampler.add_prompt_token(t);
      if (in.request.sampling.json_object) {
        std::vector<int32_t> ends = r.stop_ids;
        ends.insert(ends.end(), stop_ids.begin(), stop_ids.end());
        l.sampler.constrain_json(&token_bytes(), std::move(ends));
      }
      if (in.request.sampling.min_tokens > 0) {  // the tokens that would end it early
        std::vector<int32_t> ban = r.stop_ids;
        if (!r.ignore_eos) ban.insert(ban.end(), stop_ids.begin(), stop_ids.end());
        l.sampler.ban_until_min_tokens(std::move(ban));
      }
      const AdmissionResult a = sched.add(std::move(r));
      live.emplace(in.id, std::move(l));
      if (a.status != Admission::kOk) {  // raced past submit()'s checks: report, never drop silently
        emit_final(in.id, "error", a.reason);
        continue;
      }
      prompt_tokens_total += static_cast<uint64_t>(n_prompt);
    }
    taken.clear();
    for (uint64_t id : aborts_taken) sched.abort(id);
    aborts_taken.clear();
    step();
    publish_metrics();
  }
}

void ServingEngine::Impl::step() {
  const StepPlan& plan = sched.schedule();
  for (uint64_t id : plan.aborted) emit_final(id, "abort", "");
  if (plan.seqs.empty()) return;
  const int64_t bs = engine.block_size();
  batch.clear();
  sample_rows.clear();
  sample_lives.clear();
  sample_logit_rows.clear();
  prompt_rows.clear();
  // Logits rows: each sampling sequence's last token, and (prompt logprobs)
  // the prompt positions of this chunk not reported yet.
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& e = plan.seqs[i];
    const int32_t first_row = static_cast<int32_t>(batch.n_tokens());
    batch.add_sequence_tokens(e.tokens, e.n_new, static_cast<int32_t>(e.pos0), static_cast<int32_t>(i),
                              e.block_table, bs, /*want_last_logits=*/false);
    if (e.prompt_logits) {
      Live& l = live.at(e.id);
      for (int64_t t = 0; t < e.n_new; ++t) {
        const int64_t target_pos = e.pos0 + t + 1;
        // Past the prompt, or computed (and maybe sent) before a preemption.
        if (l.prompt_sent || target_pos >= l.n_prompt || target_pos < static_cast<int64_t>(l.prompt.size())) continue;
        prompt_rows.push_back({&l, static_cast<int64_t>(batch.logit_rows.size()), target_pos});
        batch.logit_rows.push_back(first_row + static_cast<int32_t>(t));
      }
    }
    if (e.wants_logits) {
      sample_rows.push_back(i);
      sample_lives.push_back(&live.at(e.id));
      sample_logit_rows.push_back(static_cast<int64_t>(batch.logit_rows.size()));
      batch.logit_rows.push_back(first_row + static_cast<int32_t>(e.n_new) - 1);
    }
  }
  for (const PromptRow& pr : prompt_rows) pr.live->prompt.resize(static_cast<size_t>(pr.target_pos) + 1);
  sampled.assign(plan.seqs.size(), -1);
  try {
    const float* logits = engine.forward(batch);  // [n_logit_rows, n_vocab]
    // Sequences sample independently (each has its own generator), so the
    // driver's threads share them: at 32 streams a softmax over the vocabulary
    // per sequence is otherwise a serial tail of every step. Prompt rows
    // (prompt logprobs) are shared out after them.
    const int64_t n_sample = static_cast<int64_t>(sample_rows.size());
    const int64_t n_work = n_sample + static_cast<int64_t>(prompt_rows.size());
    engine.driver_pool().run([&](int ti, int nt) {
      int64_t b, e;
      ThreadPool::split(n_work, 1, ti, nt, &b, &e);
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(n_vocab));
      auto row_of = [&](int64_t r) { return logits + static_cast<size_t>(r) * static_cast<size_t>(n_vocab); };
      for (int64_t k = b; k < e; ++k) {
        if (k >= n_sample) {
          const PromptRow& pr = prompt_rows[static_cast<size_t>(k - n_sample)];
          const float* lg = row_of(pr.logit_row);
          Live& l = *pr.live;
          TokenLogprobs& out = l.prompt[static_cast<size_t>(pr.target_pos)];
          out.token = l.prompt_tokens[static_cast<size_t>(pr.target_pos)];
          const float lse = log_sum_exp(lg, n_vocab, &row);
          out.logprob = lg[out.token] - lse;
          top_logprobs(lg, n_vocab, l.logprobs, lse, &out.top);
          continue;
        }
        const float* lg = row_of(sample_logit_rows[static_cast<size_t>(k)]);
        Live& l = *sample_lives[static_cast<size_t>(k)];
        std::copy(lg, lg + n_vocab, row.begin());
        const int32_t tok = l.sampler.sample(row.data(), n_vocab);
        sampled[sample_rows[static_cast<size_t>(k)]] = tok;
        if (l.logprobs >= 0) {
          const float lse = log_sum_exp(lg, n_vocab, &row);
          l.logprob = lg[tok] - lse;
          top_logprobs(lg, n_vocab, l.logprobs, lse, &l.top);
        }
      }
    });
  } catch (const std::exception& ex) {
    // The step failed as a whole: its requests end with "error"; the loop goes on.
    log_warn(strfmt("serving step failed: %s", ex.what()));
    for (const ScheduledSeq& e : plan.seqs) {
      sched.abort(e.id);
      emit_final(e.id, "error", ex.what());
    }
    return;
  }
  sched.update(plan, sampled, &events);
  int64_t step_tokens = 0;
  for (const SeqEvent& se : events) step_tokens += se.token >= 0 ? 1 : 0;
  for (const SeqEvent& se : events) {
    auto it = live.find(se.id);
    PARALLM_CHECK(it != live.end());
    TokenEvent ev;
    ev.token = se.token;
    ev.prompt_tokens = se.n_prompt;
    ev.completion_tokens = se.n_generated;
    ev.step_tokens = step_tokens;
    if (it->second.prompt_logprobs && !it->second.prompt_sent) {
      ev.prompt_logprobs = std::move(it->second.prompt);
      it->second.prompt_sent = true;
    }
    if (se.token >= 0) {
      it->second.sampler.add_output_token(se.token);
      ++generation_tokens_total;
      if (it->second.logprobs >= 0) {
        ev.logprob = it->second.logprob;
        ev.top_logprobs = it->second.top;
      }
    }
    if (se.finish != FinishReason::kNone) {
      ev.finished = true;
      ev.finish_reason = finish_reason_name(se.finish);
      auto cb = std::move(it->second.on_event);
      live.erase(it);
      if (cb) cb(ev);
    } else if (it->second.on_event) {
      it->second.on_event(ev);
    }
  }
}

ServingEngine::ServingEngine(Engine& engine, const ServingOptions& options)
    : engine_(engine), options_(options), impl_(std::make_unique<Impl>(engine, options)) {
  if (options_.max_num_seqs < 1 || options_.max_num_batched_tokens < 1) {
    throw InputError("--max-num-seqs and --max-num-batched-tokens must be >= 1");
  }
  impl_->thread = std::thread([this] { impl_->loop(); });
}

ServingEngine::~ServingEngine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  // Pending requests end with "abort": those still in the inbox, then the live ones.
  for (Impl::Incoming& in : impl_->inbox) {
    TokenEvent ev;
    ev.finished = true;
    ev.finish_reason = "abort";
    ev.prompt_tokens = static_cast<int64_t>(in.request.prompt.size());
    if (in.on_event) in.on_event(ev);
  }
  std::vector<uint64_t> ids;
  for (const auto& [id, l] : impl_->live) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) impl_->emit_final(id, "abort", "");
}

SubmitStatus ServingEngine::submit(ServingRequest request, std::function<void(const TokenEvent&)> on_event,
                                   uint64_t* id) {
  if (request.prompt.empty()) throw InputError("the prompt is empty (no tokens after tokenization)");
  if (request.max_tokens < 1) throw InputError("max_tokens must be at least 1");
  const int32_t n_vocab = impl_->n_vocab;
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= n_vocab) throw InputError(strfmt("token id %d is outside the vocabulary (%d)", t, n_vocab));
  }
  request.sampling.validate();
  const AdmissionResult a = impl_->sched.check(static_cast<int64_t>(request.prompt.size()), request.max_tokens);
  if (a.status == Admission::kNever) return SubmitStatus::kTooLong;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->stop) return SubmitStatus::kQueueFull;
    if (impl_->n_waiting_published + static_cast<int64_t>(impl_->inbox.size()) >= impl_->max_queue) {
      return SubmitStatus::kQueueFull;
    }
    const uint64_t new_id = impl_->next_id++;
    if (id != nullptr) *id = new_id;
    impl_->inbox.push_back({new_id, std::move(request), std::move(on_event)});
  }
  impl_->cv.notify_one();
  return SubmitStatus::kOk;
}

void ServingEngine::abort(uint64_t id) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->abort_inbox.push_back(id);
  }
  impl_->cv.notify_one();
}

ServingMetrics ServingEngine::metrics() const {
  std::lock_guard<std::mutex> lk(impl_->metrics_mu);
  ServingMetrics m = impl_->metrics;
  {
    std::lock_guard<std::mutex> lk2(impl_->mu);
    m.num_requests_waiting += static_cast<int64_t>(impl_->inbox.size());
  }
  return m;
}

}  // namespace parallm
