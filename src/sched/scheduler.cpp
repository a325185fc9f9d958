// Scheduler: see scheduler.h for the token-budget rule, the long-prompt
// policy and preemption.
#include "sched/scheduler.h"

#include <algorithm>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "";
}

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager& kv, StopPredicate is_stop)
    : options_(options), kv_(kv), is_stop_(std::move(is_stop)) {
  PARALLM_CHECK(options_.max_num_seqs > 0 && options_.max_num_batched_tokens > 0 && options_.max_model_len > 0);
  long_threshold_ =
      options_.long_prompt_threshold > 0 ? options_.long_prompt_threshold : options_.max_num_batched_tokens;
}

AdmissionResult Scheduler::check(int64_t n_prompt, int64_t max_tokens, bool prefill_only) const {
  if (n_prompt < 1) return {Admission::kNever, "the prompt is empty"};
  if (prefill_only) {
    if (n_prompt > options_.max_model_len) {
      return {Admission::kNever, strfmt("the input has %lld tokens, more than max_model_len %lld", (long long)n_prompt,
                                        (long long)options_.max_model_len)};
    }
    if (kv_.blocks_for_slots(n_prompt) > kv_.n_blocks()) {
      return {
          Admission::kNever,
          strfmt("the input needs %lld KV blocks but the pool holds %lld: shorten it or give the KV cache more memory",
                 (long long)kv_.blocks_for_slots(n_prompt), (long long)kv_.n_blocks())};
    }
    return {};
  }
  if (max_tokens < 1) return {Admission::kNever, "max_tokens must be at least 1"};
  if (n_prompt + max_tokens > options_.max_model_len) {
    return {Admission::kNever,
            strfmt("the prompt has %lld tokens and max_tokens is %lld, together more than max_model_len %lld",
                   (long long)n_prompt, (long long)max_tokens, (long long)options_.max_model_len)};
  }
  // The last generated token is never fed back, so it needs no KV slot.
  const int64_t n_slots = n_prompt + max_tokens - 1;
  if (kv_.blocks_for_slots(n_slots) > kv_.n_blocks()) {
    return {Admission::kNever,
            strfmt("the request needs %lld KV blocks but the pool holds %lld: shorten it or give the KV cache "
                   "more memory",
                   (long long)kv_.blocks_for_slots(n_slots), (long long)kv_.n_blocks())};
  }
  return {};
}

AdmissionResult Scheduler::add(SeqRequest request) {
  if (request.prefill_only) request.max_tokens = 0;
  AdmissionResult r = check(static_cast<int64_t>(request.prompt.size()), request.max_tokens, request.prefill_only);
  if (r.status != Admission::kOk) return r;
  if (n_waiting() >= options_.max_queue) {
    return {Admission::kLater, strfmt("%lld requests are waiting (max_queue)", (long long)n_waiting())};
  }
  PARALLM_CHECK(seqs_.count(request.id) == 0);
  auto s = std::make_unique<Sequence>();
  s->id = request.id;
  s->n_prompt = static_cast<int64_t>(request.prompt.size());
  s->tokens = std::move(request.prompt);
  s->tokens.reserve(static_cast<size_t>(s->n_prompt + request.max_tokens));
  s->max_tokens = request.max_tokens;
  s->priority = request.priority;
  s->ignore_eos = request.ignore_eos;
  s->prompt_logits = request.prompt_logits;
  s->prefill_only = request.prefill_only;
  s->stop_ids = std::move(request.stop_ids);
  s->arrival = next_arrival_++;
  Sequence& ref = *s;
  seqs_.emplace(ref.id, std::move(s));
  enqueue(ref);
  return {};
}

bool Scheduler::abort(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end() || it->second->aborted) return false;
  it->second->aborted = true;
  pending_aborts_.push_back(id);
  return true;
}

void Scheduler::enqueue(Sequence& s) {
  s.running = false;
  s.n_computed = 0;
  s.is_long = static_cast<int64_t>(s.tokens.size()) > long_threshold_;
  queue_of(s).insert(key(s));
}

void Scheduler::remove(Sequence& s) {
  kv_.free(s.id);
  if (s.running) {
    running_.erase(std::find(running_.begin(), running_.end(), &s));
  } else {
    queue_of(s).erase(key(s));
  }
  if (long_prefill_ == &s) long_prefill_ = nullptr;
  seqs_.erase(s.id);
}

void Scheduler::add_to_plan(Sequence& s, int64_t n_new) {
  ScheduledSeq e;
  e.id = s.id;
  e.pos0 = s.n_computed;
  e.n_new = n_new;
  e.tokens = s.tokens.data() + s.n_computed;
  const bool catches_up = s.n_computed + n_new == static_cast<int64_t>(s.tokens.size());
  e.wants_logits = catches_up && !s.prefill_only;
  e.prompt_logits = s.prompt_logits;
  e.prefill_only = s.prefill_only;
  e.completes_prompt = catches_up && s.prefill_only;
  s.plan_index = static_cast<int64_t>(plan_.seqs.size());
  plan_.seqs.push_back(e);
  plan_.n_tokens += n_new;
  budget_ -= n_new;
}

int64_t Scheduler::chunk(const Sequence& s, int64_t want) const {
  if (s.prompt_logits && s.n_computed < s.n_prompt) return std::min(want, kMaxPromptLogitRows);
  return want;
}

void Scheduler::preempt(Sequence& v) {
  if (v.plan_index >= 0) {  // already scheduled this step: take it back out
    const size_t at = static_cast<size_t>(v.plan_index);
    budget_ += plan_.seqs[at].n_new;
    plan_.n_tokens -= plan_.seqs[at].n_new;
    plan_.seqs.erase(plan_.seqs.begin() + static_cast<long>(at));
    for (size_t j = at; j < plan_.seqs.size(); ++j) seqs_.at(plan_.seqs[j].id)->plan_index = static_cast<int64_t>(j);
    v.plan_index = -1;
  }
  kv_.free(v.id);
  running_.erase(std::find(running_.begin(), running_.end(), &v));
  if (long_prefill_ == &v) long_prefill_ = nullptr;
  enqueue(v);  // n_computed = 0; generated tokens stay in v.tokens
  plan_.preempted.push_back(v.id);
  ++n_preemptions_;
  preempted_this_step_ = true;
}

bool Scheduler::reserve(Sequence& s, int64_t n_new) {
  while (!kv_.grow(s.id, s.n_computed + n_new)) {
    Sequence* newest = *std::max_element(running_.begin(), running_.end(),
                                         [](const Sequence* a, const Sequence* b) { return key(*a) < key(*b); });
    preempt(*newest);
    if (newest == &s) return false;
  }
  return true;
}

bool Scheduler::admit_head(std::set<QueueKey>& queue) {
  if (queue.empty() || budget_ <= 0 || n_running() >= options_.max_num_seqs) return false;
  Sequence& s = *seqs_.at(std::get<2>(*queue.begin()));
  const int64_t n_tokens = static_cast<int64_t>(s.tokens.size());
  kv_.lookup(s.tokens.data(), n_tokens, &hit_);
  // Every prompt position must be computed for its logits or hidden state.
  if (s.prompt_logits || s.prefill_only) hit_.clear();
  const int64_t n_cached = static_cast<int64_t>(hit_.blocks.size()) * kv_.block_size();
  const int64_t n_new = chunk(s, std::min(n_tokens - n_cached, budget_));
  if (!kv_.allocate(s.id, hit_, n_cached + n_new, n_tokens)) return false;
  queue.erase(queue.begin());
  s.n_computed = n_cached;
  s.running = true;
  running_.push_back(&s);
  add_to_plan(s, n_new);
  return true;
}

void Scheduler::schedule_long() {
  if (budget_ <= 0) return;
  if (long_prefill_ != nullptr) {
    Sequence& s = *long_prefill_;
    const int64_t n_new = chunk(s, std::min(s.remaining(), budget_));
    if (s.plan_index < 0 && n_new > 0 && reserve(s, n_new)) add_to_plan(s, n_new);
    // Its last chunk is in: the next long prompt may start with what is left.
    if (long_prefill_ == nullptr || s.plan_index < 0) return;
    const ScheduledSeq& last = plan_.seqs[static_cast<size_t>(s.plan_index)];
    if (!last.wants_logits && !last.completes_prompt) return;
    long_prefill_ = nullptr;
  }
  if (preempted_this_step_ || long_queue_.empty()) return;
  const uint64_t head = std::get<2>(*long_queue_.begin());
  if (admit_head(long_queue_)) {
    Sequence& s = *seqs_.at(head);
    if (s.remaining() > plan_.seqs.back().n_new) long_prefill_ = &s;  // more chunks to come
  }
}

const StepPlan& Scheduler::schedule() {
  plan_.clear();
  for (uint64_t id : pending_aborts_) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) continue;
    plan_.aborted.push_back(id);
    remove(*it->second);
  }
  pending_aborts_.clear();
  budget_ = options_.max_num_batched_tokens;
  preempted_this_step_ = false;

  // 1. decode tokens, then 2. prefill chunks of running short sequences. A
  // snapshot, because preemption removes entries from running_.
  snapshot_.assign(running_.begin(), running_.end());
  for (int pass = 0; pass < 2; ++pass) {
    for (Sequence* s : snapshot_) {
      if (budget_ <= 0) break;
      if (!s->running || s->plan_index >= 0 || s == long_prefill_) continue;
      const bool decode = s->remaining() == 1;
      if (decode != (pass == 0) || s->remaining() <= 0) continue;
      const int64_t n_new = chunk(*s, std::min(s->remaining(), budget_));
      if (reserve(*s, n_new)) add_to_plan(*s, n_new);
    }
  }

  // 3. new short sequences and the long work, alternating which goes first.
  const bool long_work = long_prefill_ != nullptr || !long_queue_.empty();
  const bool long_first = long_work && long_turn_;
  if (long_work) long_turn_ = !long_turn_;
  if (long_first) schedule_long();
  while (!preempted_this_step_ && admit_head(short_queue_)) {
  }
  if (!long_first) schedule_long();

  for (ScheduledSeq& e : plan_.seqs) {
    const std::vector<int32_t>& t = kv_.table(e.id);
    e.block_table = t.data();
    e.n_blocks = static_cast<int64_t>(t.size());
  }
  return plan_;
}

void Scheduler::update(const StepPlan& plan, const std::vector<int32_t>& sampled, std::vector<SeqEvent>* events) {
  PARALLM_CHECK(sampled.size() == plan.seqs.size());
  events->clear();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& e = plan.seqs[i];
    Sequence& s = *seqs_.at(e.id);
    PARALLM_CHECK(s.running && s.n_computed == e.pos0);
    s.n_computed += e.n_new;
    s.plan_index = -1;
    PARALLM_CHECK(s.n_computed <= static_cast<int64_t>(s.tokens.size()));
    kv_.cache_full_blocks(s.id, s.tokens.data(), s.n_computed);
    if (e.completes_prompt) {  // prefill only: done, nothing sampled
      SeqEvent ev;
      ev.id = s.id;
      ev.n_prompt = s.n_prompt;
      ev.finish = FinishReason::kStop;
      events->push_back(ev);
      remove(s);
      continue;
    }
    if (!e.wants_logits) continue;
    if (long_prefill_ == &s) long_prefill_ = nullptr;
    const int32_t tok = sampled[i];
    PARALLM_CHECK(tok >= 0);
    SeqEvent ev;
    ev.id = s.id;
    ev.n_prompt = s.n_prompt;
    const bool own_stop = std::find(s.stop_ids.begin(), s.stop_ids.end(), tok) != s.stop_ids.end();
    if ((!s.ignore_eos && is_stop_(tok)) || own_stop) {
      ev.finish = FinishReason::kStop;
    } else {
      s.tokens.push_back(tok);
      ev.token = tok;
      const int64_t n_tokens = static_cast<int64_t>(s.tokens.size());
      if (n_tokens - s.n_prompt >= s.max_tokens || n_tokens >= options_.max_model_len) {
        ev.finish = FinishReason::kLength;
      }
    }
    ev.n_generated = static_cast<int64_t>(s.tokens.size()) - s.n_prompt;
    events->push_back(ev);
    if (ev.finish != FinishReason::kNone) remove(s);
  }
}

}  // namespace parallm
