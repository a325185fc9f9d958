// Scheduler without a model: a fake executor whose "next token" is a hash of
// the sequence's tokens so far, so any recompute or mix-up changes the output.
// Asserts exact plans (token ranges, chunking, order), preemption order and
// block reuse, the long-prompt queue, priorities, prefix hits, aborts.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <vector>

namespace parallm {
namespace {

using Ids = std::vector<int32_t>;

int32_t hash_next(const std::vector<int32_t>& t) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : t) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
  return static_cast<int32_t>(3 + (h >> 33) % 40);  // never the stop token 2
}

std::vector<int32_t> prompt(int n, int start) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

struct Harness {
  Harness(const SchedulerOptions& o, int64_t n_blocks, int64_t block_size = 4, bool caching = true)
      : kv(n_blocks, block_size, caching), sched(o, kv, [](int32_t t) { return t == 2; }) {}

  void add(uint64_t id, std::vector<int32_t> p, int64_t max_tokens, int priority = 0, bool ignore_eos = false) {
    tokens[id] = p;
    SeqRequest r{id, std::move(p), max_tokens, priority, ignore_eos};
    ASSERT_EQ(sched.add(std::move(r)).status, Admission::kOk);
  }

  void add_prefill_only(uint64_t id, std::vector<int32_t> p) {
    tokens[id] = p;
    SeqRequest r;
    r.id = id;
    r.prompt = std::move(p);
    r.prefill_only = true;
    ASSERT_EQ(sched.add(std::move(r)).status, Admission::kOk);
  }

  // One step with the fake executor; checks the plan's invariants.
  StepPlan step() {
    const StepPlan& plan = sched.schedule();
    std::vector<int32_t> sampled(plan.seqs.size(), -1);
    const int64_t bs = kv.block_size();
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const ScheduledSeq& e = plan.seqs[i];
      const std::vector<int32_t>& t = tokens.at(e.id);
      EXPECT_GT(e.n_new, 0);
      EXPECT_LE(e.pos0 + e.n_new, static_cast<int64_t>(t.size()));
      EXPECT_GE(e.n_blocks * bs, e.pos0 + e.n_new);
      for (int64_t k = 0; k < e.n_new; ++k) {
        EXPECT_EQ(e.tokens[k], t[static_cast<size_t>(e.pos0 + k)]);
        // A written block is never shared with another sequence.
        EXPECT_EQ(kv.ref_count(e.block_table[(e.pos0 + k) / bs]), 1);
      }
      EXPECT_EQ(e.wants_logits || e.completes_prompt, e.pos0 + e.n_new == static_cast<int64_t>(t.size()));
      EXPECT_FALSE(e.wants_logits && e.prefill_only);
      if (e.wants_logits) sampled[i] = next_token ? next_token(t) : hash_next(t);
    }
    StepPlan copy = plan;
    std::vector<SeqEvent> events;
    sched.update(plan, sampled, &events);
    for (const SeqEvent& ev : events) {
      if (ev.token >= 0) tokens[ev.id].push_back(ev.token);
      if (ev.finish != FinishReason::kNone) finished[ev.id] = ev.finish;
      last_events.push_back(ev);
    }
    return copy;
  }
  void run_to_end(int max_steps = 10000) {
    for (int i = 0; i < max_steps && sched.has_work(); ++i) step();
    ASSERT_FALSE(sched.has_work());
  }

  BlockManager kv;
  Scheduler sched;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, FinishReason> finished;
  std::vector<SeqEvent> last_events;
  std::function<int32_t(const std::vector<int32_t>&)> next_token;
};

SchedulerOptions opts(int64_t budget, int64_t max_seqs = 256, int64_t threshold = 1000, int64_t max_len = 1000) {
  SchedulerOptions o;
  o.max_num_batched_tokens = budget;
  o.max_num_seqs = max_seqs;
  o.long_prompt_threshold = threshold;
  o.max_model_len = max_len;
  return o;
}

struct Range {
  uint64_t id;
  int64_t pos0, n_new;
  bool logits;
  bool operator==(const Range&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Range& r) {
  return os << "{" << r.id << " " << r.pos0 << "+" << r.n_new << (r.logits ? " L" : "") << "}";
}
std::vector<Range> ranges(const StepPlan& p) {
  std::vector<Range> out;
  for (const ScheduledSeq& e : p.seqs) out.push_back({e.id, e.pos0, e.n_new, e.wants_logits});
  return out;
}

TEST(Scheduler, ChunkedPrefillCatchesUpUnderTheBudget) {
  Harness h(opts(8), 64);
  h.add(1, prompt(20, 10), 3);
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 0, 8, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 8, 8, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 16, 4, true}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 20, 1, true}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 21, 1, true}}));
  EXPECT_FALSE(h.sched.has_work());
  EXPECT_EQ(h.finished.at(1), FinishReason::kLength);
  EXPECT_EQ(h.tokens.at(1).size(), 23u);
  EXPECT_EQ(h.last_events.back().n_generated, 3);
  EXPECT_EQ(h.kv.n_used_blocks(), 0);
}

TEST(Scheduler, DecodeTokensGoFirstThenPrefillChunks) {
  Harness h(opts(8), 64);
  h.add(1, prompt(4, 10), 10);
  h.step();
  h.add(2, prompt(20, 50), 10);
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 4, 1, true}, {2, 0, 7, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 5, 1, true}, {2, 7, 7, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 6, 1, true}, {2, 14, 6, true}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 7, 1, true}, {2, 20, 1, true}}));
}

TEST(Scheduler, PriorityThenFcfsUnderMaxNumSeqs) {
  Harness h(opts(64, 1), 64);
  h.add(1, prompt(4, 0), 2);
  h.add(2, prompt(4, 0), 2);
  h.add(3, prompt(4, 0), 2, -1);
  std::vector<uint64_t> order;
  while (h.sched.has_work()) {
    StepPlan p = h.step();
    ASSERT_EQ(p.seqs.size(), 1u);  // max_num_seqs = 1
    if (p.seqs[0].pos0 == 0) order.push_back(p.seqs[0].id);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{3, 1, 2}));
}

// The reference: each request alone in a big pool.
std::vector<int32_t> run_alone(const std::vector<int32_t>& p, int64_t max_tokens) {
  Harness h(opts(64), 1024);
  h.add(1, p, max_tokens);
  h.run_to_end();
  return h.tokens.at(1);
}

TEST(Scheduler, PreemptsTheNewestAndRecomputesIt) {
  Harness h(opts(64), 4);
  h.add(1, prompt(7, 10), 8);
  h.add(2, prompt(7, 30), 8);
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 0, 7, true}, {2, 0, 7, true}}));
  // 1 goes mid-way into the pool; 2 finds no free run of 2 left and takes
  // the head of the free list.
  EXPECT_EQ(h.kv.table(1), (Ids{1, 2}));
  EXPECT_EQ(h.kv.table(2), (Ids{0, 3}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 7, 1, true}, {2, 7, 1, true}}));
  // Position 8 needs a third block for each: 2 (newest) is preempted; its
  // cached blocks went to the tail last-first (3, 0), so 1 takes block 3.
  StepPlan p = h.step();
  EXPECT_EQ(p.preempted, (std::vector<uint64_t>{2}));
  EXPECT_EQ(ranges(p), (std::vector<Range>{{1, 8, 1, true}}));
  EXPECT_EQ(h.kv.table(1), (Ids{1, 2, 3}));
  EXPECT_EQ(h.sched.n_waiting(), 1);
  EXPECT_EQ(h.sched.n_preemptions(), 1u);
  h.run_to_end();
  EXPECT_EQ(h.sched.n_preemptions(), 1u);
  EXPECT_EQ(h.tokens.at(1), run_alone(prompt(7, 10), 8));
  EXPECT_EQ(h.tokens.at(2), run_alone(prompt(7, 30), 8));
  EXPECT_EQ(h.finished.at(2), FinishReason::kLength);
  EXPECT_EQ(h.kv.n_used_blocks(), 0);
}

TEST(Scheduler, RandomLoadOnATinyPoolMatchesEachRequestAlone) {
  std::mt19937 rng(7);
  uint64_t preemptions = 0, hit_tokens = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t budget = 4 + static_cast<int64_t>(rng() % 30);
    Harness h(opts(budget, 1 + rng() % 6, 1 + rng() % 20, 64), 12 + rng() % 8, 4, rng() % 4 != 0);
    std::map<uint64_t, std::pair<std::vector<int32_t>, int64_t>> reqs;
    uint64_t id = 1;
    for (int step = 0; step < 400 && (h.sched.has_work() || id <= 12); ++step) {
      if (id <= 12 && rng() % 3 == 0) {
        // Shared prefixes on purpose, so the prefix cache takes part.
        std::vector<int32_t> p = prompt(8, 100);
        const int extra = 1 + static_cast<int>(rng() % 20);
        for (int k = 0; k < extra; ++k) p.push_back(static_cast<int32_t>(rng() % 50));
        const int64_t max_tokens = 1 + static_cast<int64_t>(rng() % 20);
        reqs[id] = {p, max_tokens};
        h.add(id, p, max_tokens, static_cast<int>(rng() % 3) - 1);
        ++id;
      }
      if (h.sched.has_work()) h.step();
      if (h.sched.has_work() && rng() % 50 == 0) {  // abort a random live one
        const uint64_t victim = 1 + rng() % (id - 1);
        if (!h.finished.count(victim) && h.sched.abort(victim)) h.finished[victim] = FinishReason::kAbort;
      }
    }
    h.run_to_end();
    EXPECT_EQ(h.kv.n_used_blocks(), 0);
    preemptions += h.sched.n_preemptions();
    hit_tokens += h.kv.counters().hit_tokens;
    for (const auto& [rid, r] : reqs) {
      ASSERT_TRUE(h.finished.count(rid)) << rid;
      if (h.finished.at(rid) == FinishReason::kAbort) continue;
      EXPECT_EQ(h.tokens.at(rid), run_alone(r.first, r.second)) << "trial " << trial << " id " << rid;
    }
  }
  EXPECT_GT(preemptions, 20u);  // the load did exercise preemption and the prefix cache
  EXPECT_GT(hit_tokens, 0u);
  std::printf("preemptions %llu, hit tokens %llu\n", (unsigned long long)preemptions, (unsigned long long)hit_tokens);
}

TEST(Scheduler, LongPromptsWaitInTheirOwnQueueAndAlternate) {
  Harness h(opts(8, 256, 8), 64);
  h.add(1, prompt(30, 100), 4);  // long
  h.add(2, prompt(4, 10), 4);    // short, arrived later
  // Step 1 (shorts' turn): the short one first, the long one gets the rest.
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, 0, 4, true}, {1, 0, 4, false}}));
  // Step 2 (long's turn): decodes, then the long chunk before any new short.
  h.add(3, prompt(6, 20), 4);
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, 4, 1, true}, {1, 4, 7, false}}));
  // Step 3 (shorts' turn): the new short is not stuck behind the long prefill.
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, 5, 1, true}, {3, 0, 6, true}, {1, 11, 1, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, 6, 1, true}, {3, 6, 1, true}, {1, 12, 6, false}}));
  h.run_to_end();
  EXPECT_EQ(h.tokens.at(1), run_alone(prompt(30, 100), 4));
}

TEST(Scheduler, LongQueueOnlyOnePrefillAtATime) {
  Harness h(opts(8, 256, 8), 64);
  h.add(1, prompt(20, 100), 2);
  h.add(2, prompt(20, 200), 2);
  // 1 prefills alone (8 + 8 + 4) before 2 starts, even with budget to spare at the end.
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 0, 8, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 8, 8, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{1, 16, 4, true}, {2, 0, 4, false}}));
}

TEST(Scheduler, PrefixHitAdvancesComputedAtAdmission) {
  Harness h(opts(64), 64);
  h.add(1, prompt(9, 10), 1);
  h.step();
  EXPECT_EQ(h.finished.at(1), FinishReason::kLength);
  h.add(2, prompt(9, 10), 1);
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, 8, 1, true}}));
  EXPECT_EQ(h.tokens.at(2), h.tokens.at(1));
  EXPECT_DOUBLE_EQ(h.kv.hit_rate(), 8.0 / 18.0);
}

// Prompt logprobs: the whole prompt is computed (a cached prefix is not
// reused) in chunks of at most kMaxPromptLogitRows; generation then goes on
// as usual, and the request's blocks still serve later plain requests.
TEST(Scheduler, PromptLogitsComputeTheWholePromptInBoundedChunks) {
  const int64_t cap = kMaxPromptLogitRows;
  Harness h(opts(1000, 256, 1000, 2000), 256);
  h.add(1, prompt(static_cast<int>(cap) + 40, 10), 1);
  h.run_to_end();
  SeqRequest r{2, prompt(static_cast<int>(cap) + 40, 10), 2, 0, false};
  r.prompt_logits = true;
  h.tokens[2] = r.prompt;
  ASSERT_EQ(h.sched.add(std::move(r)).status, Admission::kOk);
  StepPlan p = h.step();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_TRUE(p.seqs[0].prompt_logits);
  EXPECT_EQ(ranges(p), (std::vector<Range>{{2, 0, cap, false}}));  // from 0: no prefix hit
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, cap, 40, true}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, cap + 40, 1, true}}));  // decode as usual
  EXPECT_FALSE(h.sched.has_work());
  h.add(3, prompt(static_cast<int>(cap) + 40, 10), 1);
  const StepPlan q = h.step();
  ASSERT_EQ(q.seqs.size(), 1u);
  EXPECT_GT(q.seqs[0].pos0, 0);  // a plain request does hit the cache
  EXPECT_FALSE(q.seqs[0].prompt_logits);
}

TEST(Scheduler, AbortFreesBlocksAtTheNextStep) {
  Harness h(opts(64), 64);
  h.add(1, prompt(9, 10), 10);
  h.add(2, prompt(5, 10), 10);
  h.step();
  h.add(3, prompt(5, 40), 10);
  EXPECT_TRUE(h.sched.abort(1));
  EXPECT_FALSE(h.sched.abort(1));
  EXPECT_TRUE(h.sched.abort(3));  // still waiting
  EXPECT_FALSE(h.sched.abort(99));
  StepPlan p = h.step();
  EXPECT_EQ(p.aborted, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(ranges(p), (std::vector<Range>{{2, 5, 1, true}}));
  EXPECT_TRUE(h.sched.abort(2));
  p = h.step();
  EXPECT_EQ(p.aborted, (std::vector<uint64_t>{2}));
  EXPECT_TRUE(p.seqs.empty());
  EXPECT_EQ(h.kv.n_used_blocks(), 0);
  EXPECT_FALSE(h.sched.has_work());
}

TEST(Scheduler, StopTokenAndIgnoreEos) {
  Harness h(opts(64), 64);
  h.next_token = [](const std::vector<int32_t>& t) { return t.size() == 6 ? 2 : 7; };
  h.add(1, prompt(4, 10), 10);
  h.add(2, prompt(4, 10), 4, 0, true);
  h.run_to_end();
  EXPECT_EQ(h.finished.at(1), FinishReason::kStop);
  EXPECT_EQ(h.tokens.at(1), (Ids{10, 11, 12, 13, 7, 7}));  // the stop token is not appended
  EXPECT_EQ(h.finished.at(2), FinishReason::kLength);
  EXPECT_EQ(h.tokens.at(2), (Ids{10, 11, 12, 13, 7, 7, 2, 7}));
  const SeqEvent& stop = *std::find_if(h.last_events.begin(), h.last_events.end(),
                                       [](const SeqEvent& e) { return e.id == 1 && e.finish != FinishReason::kNone; });
  EXPECT_EQ(stop.token, -1);
  EXPECT_EQ(stop.n_generated, 2);
}

TEST(Scheduler, AdmissionAnswers) {
  SchedulerOptions o = opts(64, 256, 1000, 32);
  o.max_queue = 2;
  BlockManager kv(4, 4, true);
  Scheduler s(o, kv, [](int32_t) { return false; });
  EXPECT_EQ(s.check(0, 4).status, Admission::kNever);
  EXPECT_EQ(s.check(4, 0).status, Admission::kNever);
  EXPECT_EQ(s.check(30, 3).status, Admission::kNever);  // over max_model_len 32
  EXPECT_EQ(s.check(10, 7).status, Admission::kOk);     // 16 slots: the whole pool
  const AdmissionResult pool = s.check(10, 8);
  EXPECT_EQ(pool.status, Admission::kNever);
  EXPECT_NE(pool.reason.find("5 KV blocks"), std::string::npos) << pool.reason;
  EXPECT_EQ(s.add({1, prompt(4, 0), 4}).status, Admission::kOk);
  EXPECT_EQ(s.add({2, prompt(4, 0), 4}).status, Admission::kOk);
  EXPECT_EQ(s.add({3, prompt(4, 0), 4}).status, Admission::kLater);
}

// Embeddings: a prefill-only request is chunked like any prompt, samples
// nothing, finishes (stop, no token) with its last chunk and frees its
// blocks; it never takes a prefix-cache hit (every hidden state is wanted),
// and it may fill max_model_len (no generated token needs room).
TEST(Scheduler, PrefillOnlyFinishesAfterItsPrompt) {
  Harness h(opts(8, 256, 1000, 20), 64);
  h.add(1, prompt(12, 10), 2);
  h.run_to_end();
  h.add_prefill_only(2, prompt(12, 10));  // the same prompt: its blocks are in the prefix cache
  h.add(3, prompt(3, 50), 2);
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, 0, 8, false}}));
  EXPECT_EQ(ranges(h.step()), (std::vector<Range>{{2, 8, 4, false}, {3, 0, 3, true}}));
  EXPECT_EQ(h.finished.at(2), FinishReason::kStop);
  EXPECT_EQ(h.tokens.at(2).size(), 12u);  // nothing appended
  const SeqEvent& done = h.last_events[h.last_events.size() - 2];
  EXPECT_EQ(done.id, 2u);
  EXPECT_EQ(done.token, -1);
  EXPECT_EQ(done.n_prompt, 12);
  h.run_to_end();
  EXPECT_EQ(h.kv.n_free_blocks(), h.kv.n_blocks());
  EXPECT_EQ(h.sched.check(20, 0, true).status, Admission::kOk);
  EXPECT_EQ(h.sched.check(21, 0, true).status, Admission::kNever);
  EXPECT_EQ(h.sched.check(20, 1).status, Admission::kNever);  // a generation needs room for its token
}

// A long prefill-only prompt goes through the long queue and lets the next one start.
TEST(Scheduler, LongPrefillOnlyReleasesTheLongQueue) {
  Harness h(opts(8, 256, 10, 100), 64);
  h.add_prefill_only(1, prompt(16, 10));
  h.add_prefill_only(2, prompt(12, 40));
  h.run_to_end();
  EXPECT_EQ(h.finished.at(1), FinishReason::kStop);
  EXPECT_EQ(h.finished.at(2), FinishReason::kStop);
  EXPECT_EQ(h.kv.n_free_blocks(), h.kv.n_blocks());
}

}  // namespace
}  // namespace parallm
