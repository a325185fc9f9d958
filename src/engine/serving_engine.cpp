// ServingEngine: the executor of the serving step loop (see serving_engine.h).
// One background thread owns the Schedulers, the BlockManagers and each live
// request's Sampler; other threads only touch the inbox (new requests and
// aborts) and the published metrics, both under mutexes. Each step:
//   schedule() -> one ForwardBatch (each sequence's tokens contiguous, logits
//   for the sequences whose computed count catches up) -> Engine::submit /
//   collect -> one sample per such sequence -> update() -> events.
// With pp pipeline stages the requests are spread over pp lanes, each a
// Scheduler over its own share of the KV blocks (vLLM's "virtual engines"):
// a lane has at most one step in flight, so up to pp micro-batches are in
// the pipe at once and no stage waits for the others; since a lane plans its
// next step only after its last one's results, each lane's scheduler runs
// unchanged. Idle, the thread sleeps on a condition variable.
#include "engine/serving_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "comm/comm_error.h"
#include "kv/block_manager.h"
#include "sched/scheduler.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

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
    Clock::time_point arrival;  // in submit()
  };
  struct Lane;
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
    int32_t prompt_top = 0;              // alternatives per prompt position (ServingRequest::prompt_logprobs)
    std::vector<int32_t> prompt_tokens;  // only with prompt_logprobs
    std::vector<TokenLogprobs> prompt;   // [0, prompt.size()) reported or computed so far
    bool prompt_sent = false;
    // Embeddings (ServingRequest::embed): the sum of the final-norm rows of
    // positions [0, n_pooled), in double across chunks. A recompute after a
    // preemption skips the positions already added.
    bool embed = false;
    int64_t n_pooled = 0;
    std::vector<double> pooled_sum = {};  // [n_embd]
    Lane* lane = nullptr;
    // TokenEvent::queue_s / prefill_s: submit(), the first step that scheduled
    // it (kept across a preemption's recompute), whether its first token is out.
    Clock::time_point arrival{};
    Clock::time_point first_scheduled{};
    bool scheduled = false, first_token_sent = false;
  };
  // A logits row at a prompt position: it predicts the prompt's next token.
  struct PromptRow {
    Live* live;
    int64_t logit_row;   // its row in the step's logits
    int64_t target_pos;  // the prompt position it predicts
  };
  // A pooled row of the step (embeddings): the sum over its range of a chunk.
  struct PoolRow {
    Live* live;
    int64_t n_pooled_after;  // Live::n_pooled once it is added
  };

  // One lane: a scheduler over blocks [first_block, first_block + its pool),
  // with the scratch of its step, which lives until the step's results are in.
  struct Lane {
    Lane(const Engine& e, const ServingOptions& o, int64_t first, int64_t n_blocks, int64_t max_seqs)
        : first_block(first),
          kv(n_blocks, e.block_size(), o.enable_prefix_caching),
          sched(lane_options(e, o, max_seqs), kv, [&e](int32_t id) { return e.tokenizer().is_stop_token(id); }) {}
    static SchedulerOptions lane_options(const Engine& e, const ServingOptions& o, int64_t max_seqs) {
      SchedulerOptions s = scheduler_options(e, o);
      s.max_num_seqs = max_seqs;
      return s;
    }
    const int64_t first_block;
    BlockManager kv;
    Scheduler sched;
    int64_t n_live = 0;  // requests given to this lane and not finished
    bool in_flight = false;
    const StepPlan* plan = nullptr;
    ForwardBatch batch;
    std::vector<std::vector<int32_t>> tables;  // the plan's block tables in pool ids
    std::vector<int32_t> sampled;
    std::vector<size_t> sample_rows;             // plan.seqs indices that sample this step
    std::vector<Live*> sample_lives;             // their requests, in the same order
    std::vector<int64_t> sample_logit_rows;      // their rows of the logits
    std::vector<PromptRow> prompt_rows;          // logits rows at prompt positions (prompt logprobs)
    std::vector<PoolRow> pool_rows;              // the step's pooled rows, in batch.pool_ranges order
    Clock::time_point submitted{}, collected{};  // the step in flight's submit and forward end (step trace)
  };

  Impl(Engine& e, const ServingOptions& o)
      : engine(e),
        n_vocab(static_cast<int32_t>(e.config().n_vocab)),
        n_embd(e.config().n_embd),
        max_queue(o.max_queue) {
    for (int32_t id = 0; id < n_vocab; ++id) {
      if (e.tokenizer().is_stop_token(id)) stop_ids.push_back(id);
    }
    // pp lanes (fewer when fewer sequences may run), each with an equal share
    // of the blocks and of max_num_seqs.
    const int64_t n_lanes = std::max<int64_t>(1, std::min<int64_t>(e.options().pp, o.max_num_seqs));
    const int64_t blocks = e.n_kv_blocks();
    for (int64_t k = 0, first = 0; k < n_lanes; ++k) {
      const int64_t n = blocks / n_lanes + (k < blocks % n_lanes ? 1 : 0);
      const int64_t seqs = o.max_num_seqs / n_lanes + (k < o.max_num_seqs % n_lanes ? 1 : 0);
      lanes.push_back(std::make_unique<Lane>(e, o, first, n, seqs));
      first += n;
    }
    publish_metrics();
    if (const char* path = std::getenv("PARALLM_STEP_TRACE"); path != nullptr && *path != '\0') {
      step_trace = std::fopen(path, "w");
      if (step_trace == nullptr) throw InputError(strfmt("PARALLM_STEP_TRACE '%s': cannot open for writing", path));
      std::fprintf(step_trace, "start_s,duration_s,forward_s,seqs,tokens,decodes,sampled\n");
    }
  }
  ~Impl() {
    if (step_trace != nullptr) std::fclose(step_trace);
  }

  void loop();
  void step();
  void submit_step(Lane& lane);
  void finish_step(Lane& lane);
  void fail_step(Lane& lane, const std::exception& ex);
  void emit_final(uint64_t id, const char* reason, const std::string& error);
  void publish_metrics();
  Lane& least_loaded_lane(int64_t n_prompt, int64_t max_tokens, bool prefill_only);
  static std::vector<float> mean_normalized(const Live& l);
  bool has_work() const {
    for (const auto& l : lanes) {
      if (l->sched.has_work() || l->in_flight) return true;
    }
    return false;
  }

  Engine& engine;
  std::vector<std::unique_ptr<Lane>> lanes;  // loop thread only (check() is const and may run anywhere)
  std::deque<Lane*> in_flight;               // lanes with a step in the pipe, oldest first
  size_t next_lane = 0;                      // round robin for submitting
  const int32_t n_vocab;
  const int64_t n_embd;
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
  std::unique_ptr<constrain::VocabIndex> vocab_index_;  // structured outputs: built at the first constrained request
  const constrain::VocabIndex* vocab_index() {
    if (!vocab_index_) vocab_index_ = std::make_unique<constrain::VocabIndex>(token_bytes());
    return vocab_index_.get();
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
  std::string failure;  // under metrics_mu: set once a step failed in communication
  ServingMetrics metrics;
  uint64_t prompt_tokens_total = 0, generation_tokens_total = 0;  // loop thread

  // Scratch reused every step (no per-token allocations).
  std::vector<SeqEvent> events;
  std::deque<Incoming> taken;
  std::vector<uint64_t> aborts_taken;
  // PARALLM_STEP_TRACE=FILE: one CSV line per step (start since t0, duration,
  // its shape), to compare the real step loop with `parallm simulate`'s.
  std::FILE* step_trace = nullptr;
  const Clock::time_point t0 = Clock::now();
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
  if (it->second.lane != nullptr) --it->second.lane->n_live;
  auto cb = std::move(it->second.on_event);
  live.erase(it);
  if (cb) cb(ev);
}

// The lane with the fewest live requests among those whose share of the pool
// can ever hold this one (shares differ by a block at most).
ServingEngine::Impl::Lane& ServingEngine::Impl::least_loaded_lane(int64_t n_prompt, int64_t max_tokens,
                                                                  bool prefill_only) {
  Lane* best = nullptr;
  for (const auto& l : lanes) {
    if (l->sched.check(n_prompt, max_tokens, prefill_only).status == Admission::kNever) continue;
    if (best == nullptr || l->n_live < best->n_live) best = l.get();
  }
  return best != nullptr ? *best : *lanes[0];
}

void ServingEngine::Impl::publish_metrics() {
  int64_t waiting = 0, running = 0, blocks = 0, free_blocks = 0;
  uint64_t preemptions = 0, queried = 0, hits = 0;
  for (const auto& l : lanes) {
    waiting += l->sched.n_waiting();
    running += l->sched.n_running();
    blocks += l->kv.n_blocks();
    free_blocks += l->kv.n_free_blocks();
    preemptions += l->sched.n_preemptions();
    queried += l->kv.counters().queried_tokens;
    hits += l->kv.counters().hit_tokens;
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    n_waiting_published = waiting;
  }
  std::lock_guard<std::mutex> lk(metrics_mu);
  metrics.num_requests_running = running;
  metrics.num_requests_waiting = waiting;
  metrics.kv_cache_usage = blocks > 0 ? static_cast<double>(blocks - free_blocks) / static_cast<double>(blocks) : 0.0;
  metrics.prefix_cache_hit_rate = queried > 0 ? static_cast<double>(hits) / static_cast<double>(queried) : 0.0;
  metrics.prefix_cache_queries_total = queried;
  metrics.prefix_cache_hits_total = hits;
  metrics.num_preemptions_total = preemptions;
  metrics.prompt_tokens_total = prompt_tokens_total;
  metrics.generation_tokens_total = generation_tokens_total;
  metrics.kv_blocks_total = blocks;
  metrics.kv_blocks_free = free_blocks;
}

void ServingEngine::Impl::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return stop || !inbox.empty() || !abort_inbox.empty() || has_work(); });
      if (stop) {
        lk.unlock();
        // Steps still in the pipe are drained (their results dropped), so the
        // engine is left with none in flight.
        for (; !in_flight.empty(); in_flight.pop_front()) {
          try {
            engine.collect();
          } catch (const std::exception& ex) {
            log_warn(strfmt("draining a serving step: %s", ex.what()));
          }
        }
        return;
      }
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
      r.prompt_logits = in.request.prompt_logprobs >= 0;
      r.stop_ids = in.request.stop_token_ids;
      r.prefill_only = in.request.embed;
      if (r.prefill_only) r.prompt_logits = false;
      Live l{std::move(in.on_event),
             Sampler(in.request.sampling),
             n_prompt,
             in.request.logprobs,
             0.0f,
             {},
             false,
             0,
             {},
             {},
             false};
      l.prompt_logprobs = r.prompt_logits;
      l.prompt_top = std::max<int32_t>(0, in.request.prompt_logprobs);
      l.arrival = in.arrival;
      l.embed = r.prefill_only;
      if (l.embed) l.pooled_sum.assign(static_cast<size_t>(n_embd), 0.0);
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
      if (in.request.sampling.constraint) {
        std::vector<int32_t> ends = r.stop_ids;
        ends.insert(ends.end(), stop_ids.begin(), stop_ids.end());
        l.sampler.constrain(vocab_index(), std::move(ends), r.max_tokens);
      }
      if (in.request.sampling.min_tokens > 0) {  // the tokens that would end it early
        std::vector<int32_t> ban = r.stop_ids;
        if (!r.ignore_eos) ban.insert(ban.end(), stop_ids.begin(), stop_ids.end());
        l.sampler.ban_until_min_tokens(std::move(ban));
      }
      Lane& lane = least_loaded_lane(n_prompt, r.max_tokens, r.prefill_only);
      l.lane = &lane;
      ++lane.n_live;
      const AdmissionResult a = lane.sched.add(std::move(r));
      live.emplace(in.id, std::move(l));
      if (a.status != Admission::kOk) {  // raced past submit()'s checks: report, never drop silently
        emit_final(in.id, "error", a.reason);
        continue;
      }
      prompt_tokens_total += static_cast<uint64_t>(n_prompt);
    }
    taken.clear();
    for (uint64_t id : aborts_taken) {
      auto it = live.find(id);
      if (it != live.end()) it->second.lane->sched.abort(id);
    }
    aborts_taken.clear();
    step();
    publish_metrics();
  }
}

// Fills the pipe (each lane at most one step in flight, lanes in turn), then
// takes the oldest step's results. With pp = 1 that is plan, forward, sample.
void ServingEngine::Impl::step() {
  const int pipe = engine.options().pp;
  for (size_t tried = 0; tried < lanes.size() && engine.steps_in_flight() < pipe; ++tried) {
    Lane& lane = *lanes[next_lane];
    next_lane = (next_lane + 1) % lanes.size();
    if (!lane.in_flight && lane.sched.has_work()) submit_step(lane);
  }
  if (in_flight.empty()) return;
  Lane& lane = *in_flight.front();
  in_flight.pop_front();
  finish_step(lane);
}

void ServingEngine::Impl::submit_step(Lane& lane) {
  const StepPlan& plan = lane.sched.schedule();
  for (uint64_t id : plan.aborted) emit_final(id, "abort", "");
  if (plan.seqs.empty()) return;
  const int64_t bs = engine.block_size();
  ForwardBatch& batch = lane.batch;
  batch.clear();
  lane.sample_rows.clear();
  lane.sample_lives.clear();
  lane.sample_logit_rows.clear();
  lane.prompt_rows.clear();
  lane.pool_rows.clear();
  if (lane.tables.size() < plan.seqs.size()) lane.tables.resize(plan.seqs.size());
  const Clock::time_point now = Clock::now();
  // Logits rows: each sampling sequence's last token, and (prompt logprobs)
  // the prompt positions of this chunk not reported yet.
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& e = plan.seqs[i];
    auto lit = live.find(e.id);
    PARALLM_CHECK(lit != live.end());
    Live& l = lit->second;
    if (!l.scheduled) {
      l.scheduled = true;
      l.first_scheduled = now;
    }
    const int32_t first_row = static_cast<int32_t>(batch.n_tokens());
    // The lane's block ids -> the pool's.
    std::vector<int32_t>& table = lane.tables[i];
    table.assign(e.block_table, e.block_table + (e.pos0 + e.n_new + bs - 1) / bs);
    for (int32_t& b : table) b += static_cast<int32_t>(lane.first_block);
    batch.add_sequence_tokens(e.tokens, e.n_new, static_cast<int32_t>(e.pos0), static_cast<int32_t>(i), table.data(),
                              bs, /*want_last_logits=*/false);
    if (e.prompt_logits) {
      for (int64_t t = 0; t < e.n_new; ++t) {
        const int64_t target_pos = e.pos0 + t + 1;
        // Past the prompt, or computed (and maybe sent) before a preemption.
        if (l.prompt_sent || target_pos >= l.n_prompt || target_pos < static_cast<int64_t>(l.prompt.size())) continue;
        lane.prompt_rows.push_back({&l, static_cast<int64_t>(batch.logit_rows.size()), target_pos});
        batch.logit_rows.push_back(first_row + static_cast<int32_t>(t));
      }
    }
    if (e.prefill_only) {
      // Positions not added before (a recompute after preemption repeats some).
      const int64_t from = std::max(e.pos0, l.n_pooled), to = e.pos0 + e.n_new;
      if (from < to) {
        batch.pool_ranges.push_back(first_row + static_cast<int32_t>(from - e.pos0));
        batch.pool_ranges.push_back(first_row + static_cast<int32_t>(e.n_new));
        lane.pool_rows.push_back({&l, to});
      }
    }
    if (e.wants_logits) {
      lane.sample_rows.push_back(i);
      lane.sample_lives.push_back(&l);
      lane.sample_logit_rows.push_back(static_cast<int64_t>(batch.logit_rows.size()));
      batch.logit_rows.push_back(first_row + static_cast<int32_t>(e.n_new) - 1);
    }
  }
  for (const PromptRow& pr : lane.prompt_rows) pr.live->prompt.resize(static_cast<size_t>(pr.target_pos) + 1);
  lane.sampled.assign(plan.seqs.size(), -1);
  lane.plan = &plan;
  lane.submitted = now;
  try {
    engine.submit(batch);
  } catch (const std::exception& ex) {
    fail_step(lane, ex);
    return;
  }
  lane.in_flight = true;
  in_flight.push_back(&lane);
}

// The step failed as a whole: its requests end with "error"; the loop goes on.
void ServingEngine::Impl::fail_step(Lane& lane, const std::exception& ex) {
  log_warn(strfmt("serving step failed: %s", ex.what()));
  if (dynamic_cast<const CommError*>(&ex) != nullptr) {
    std::lock_guard<std::mutex> lk(metrics_mu);
    if (failure.empty()) failure = ex.what();
  }
  lane.in_flight = false;
  for (const ScheduledSeq& e : lane.plan->seqs) {
    lane.sched.abort(e.id);
    emit_final(e.id, "error", ex.what());
  }
}

void ServingEngine::Impl::finish_step(Lane& lane) {
  const StepPlan& plan = *lane.plan;
  std::vector<int32_t>& sampled = lane.sampled;
  try {
    const float* logits = engine.collect();  // [n_logit_rows, n_vocab]
    lane.collected = Clock::now();
    lane.in_flight = false;
    // Sequences sample independently (each has its own generator), so the
    // driver's threads share them: at 32 streams a softmax over the vocabulary
    // per sequence is otherwise a serial tail of every step. Prompt rows
    // (prompt logprobs) are shared out after them.
    const int64_t n_sample = static_cast<int64_t>(lane.sample_rows.size());
    const int64_t n_work = n_sample + static_cast<int64_t>(lane.prompt_rows.size());
    engine.driver_pool().run([&](int ti, int nt) {
      int64_t b, e;
      ThreadPool::split(n_work, 1, ti, nt, &b, &e);
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(n_vocab));
      auto row_of = [&](int64_t r) { return logits + static_cast<size_t>(r) * static_cast<size_t>(n_vocab); };
      for (int64_t k = b; k < e; ++k) {
        if (k >= n_sample) {
          const PromptRow& pr = lane.prompt_rows[static_cast<size_t>(k - n_sample)];
          const float* lg = row_of(pr.logit_row);
          Live& l = *pr.live;
          TokenLogprobs& out = l.prompt[static_cast<size_t>(pr.target_pos)];
          out.token = l.prompt_tokens[static_cast<size_t>(pr.target_pos)];
          const float lse = log_sum_exp(lg, n_vocab, &row);
          out.logprob = lg[out.token] - lse;
          top_logprobs(lg, n_vocab, l.prompt_top, lse, &out.top);
          const float own = lg[out.token];
          out.rank = 1 + static_cast<int32_t>(std::count_if(lg, lg + n_vocab, [own](float x) { return x > own; }));
          continue;
        }
        const float* lg = row_of(lane.sample_logit_rows[static_cast<size_t>(k)]);
        Live& l = *lane.sample_lives[static_cast<size_t>(k)];
        std::copy(lg, lg + n_vocab, row.begin());
        const int32_t tok = l.sampler.sample(row.data(), n_vocab);
        sampled[lane.sample_rows[static_cast<size_t>(k)]] = tok;
        if (l.logprobs >= 0) {
          const float lse = log_sum_exp(lg, n_vocab, &row);
          l.logprob = lg[tok] - lse;
          top_logprobs(lg, n_vocab, l.logprobs, lse, &l.top);
        }
      }
    });
    const float* pooled = logits + lane.batch.logit_rows.size() * static_cast<size_t>(n_vocab);  // [n_pooled, n_embd]
    for (size_t k = 0; k < lane.pool_rows.size(); ++k) {
      Live& l = *lane.pool_rows[k].live;
      const float* row = pooled + k * static_cast<size_t>(n_embd);
      for (int64_t j = 0; j < n_embd; ++j) l.pooled_sum[static_cast<size_t>(j)] += row[j];
      l.n_pooled = lane.pool_rows[k].n_pooled_after;
    }
  } catch (const std::exception& ex) {
    fail_step(lane, ex);
    return;
  }
  const Clock::time_point step_done = Clock::now();
  if (step_trace != nullptr) {
    int64_t n_tokens = 0, n_decode = 0;
    for (const ScheduledSeq& e : plan.seqs) {
      n_tokens += e.n_new;
      n_decode += e.n_new == 1 && e.wants_logits && e.pos0 > 0 ? 1 : 0;
    }
    std::fprintf(step_trace, "%.6f,%.6f,%.6f,%zu,%lld,%lld,%zu\n", seconds(lane.submitted - t0),
                 seconds(step_done - lane.submitted), seconds(lane.collected - lane.submitted), plan.seqs.size(),
                 static_cast<long long>(n_tokens), static_cast<long long>(n_decode), lane.sample_rows.size());
  }
  lane.sched.update(plan, sampled, &events);
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
    if (se.token >= 0 && !it->second.first_token_sent) {
      it->second.first_token_sent = true;
      ev.queue_s = seconds(it->second.first_scheduled - it->second.arrival);
      ev.prefill_s = seconds(step_done - it->second.first_scheduled);
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
      if (it->second.embed) ev.embedding = mean_normalized(it->second);
      // A structured output that is a complete match when max_tokens ends it
      // (the constraint closed it in time) finished, it was not cut.
      if (se.finish == FinishReason::kLength && it->second.sampler.constraint_matched()) ev.finish_reason = "stop";
      --lane.n_live;
      auto cb = std::move(it->second.on_event);
      live.erase(it);
      if (cb) cb(ev);
    } else if (it->second.on_event) {
      it->second.on_event(ev);
    }
  }
}

// llama-server's --embedding with mean pooling and its default L2 norm
// (embd_normalize 2): the mean of the prompt's final-norm rows, scaled to
// unit length (a zero vector stays zero).
std::vector<float> ServingEngine::Impl::mean_normalized(const Live& l) {
  PARALLM_CHECK(l.n_pooled == l.n_prompt && l.n_pooled > 0);
  std::vector<double> mean(l.pooled_sum.size());
  double norm2 = 0;
  for (size_t j = 0; j < mean.size(); ++j) {
    mean[j] = l.pooled_sum[j] / static_cast<double>(l.n_pooled);
    norm2 += mean[j] * mean[j];
  }
  const double inv = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0;
  std::vector<float> out(mean.size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(mean[j] * inv);
  return out;
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
  if (request.embed) request.max_tokens = 0;
  if (request.max_tokens < 1 && !request.embed) throw InputError("max_tokens must be at least 1");
  const int32_t n_vocab = impl_->n_vocab;
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= n_vocab) throw InputError(strfmt("token id %d is outside the vocabulary (%d)", t, n_vocab));
  }
  request.sampling.validate();
  const Clock::time_point arrival = Clock::now();
  const AdmissionResult a =
      impl_->lanes[0]->sched.check(static_cast<int64_t>(request.prompt.size()), request.max_tokens, request.embed);
  if (a.status == Admission::kNever) return SubmitStatus::kTooLong;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->stop) return SubmitStatus::kQueueFull;
    if (impl_->n_waiting_published + static_cast<int64_t>(impl_->inbox.size()) >= impl_->max_queue) {
      return SubmitStatus::kQueueFull;
    }
    const uint64_t new_id = impl_->next_id++;
    if (id != nullptr) *id = new_id;
    impl_->inbox.push_back({new_id, std::move(request), std::move(on_event), arrival});
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

std::string ServingEngine::failure() const {
  std::lock_guard<std::mutex> lk(impl_->metrics_mu);
  return impl_->failure;
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
