// Cost of structured-output masks per generated token, without a model.
//
// What the serving engine does for a constrained sequence, every step:
// TokenConstraint::apply on the step's logits, then accept() of the sampled
// token. Here the logits are random (so the pick is uniform over the allowed
// tokens, as with the random-weight benchmark model, which is the hard case:
// it wanders through every corner of the grammar instead of a few paths),
// `streams` sequences advance in lock step like one batch, and each sequence
// that finishes is replaced until `requests` have run. The number printed is
// the mask's cost per token in microseconds (apply + accept, clock around
// them only), which bench/structured_output_bench.sh compares with the
// engine's own time per token at the same concurrency.
//
//   mask_bench TOKENIZER KIND TEXT [STREAMS] [REQUESTS] [MAX_TOKENS]
//   KIND: json_schema (TEXT is a file), regex, choice, grammar (TEXT inline)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "constrain/compile_cache.h"
#include "constrain/token_mask.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

using namespace parallm;
// The engine thread's CPU time, not wall time: the mask's work is what is
// measured, and a shared machine's other jobs do not land in it.
struct Clock {
  using time_point = std::chrono::duration<double>;
  static time_point now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return time_point(static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec));
  }
};

namespace {

constrain::ConstraintKind parse_kind(const std::string& s) {
  if (s == "json_schema") return constrain::ConstraintKind::kJsonSchema;
  if (s == "regex") return constrain::ConstraintKind::kRegex;
  if (s == "choice") return constrain::ConstraintKind::kChoice;
  if (s == "grammar") return constrain::ConstraintKind::kGrammar;
  throw InputError("unknown kind '" + s + "' (json_schema, regex, choice, grammar)");
}

struct Stream {
  std::unique_ptr<constrain::TokenConstraint> c;
  int64_t tokens = 0;
};

int run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER KIND TEXT [STREAMS] [REQUESTS] [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  const auto tok = load_tokenizer(argv[1]);
  const constrain::ConstraintKind kind = parse_kind(argv[2]);
  std::string text = argv[3];
  if (kind == constrain::ConstraintKind::kJsonSchema) {
    std::ifstream f(text);
    if (!f) throw InputError("cannot read " + text);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  const int streams = argc > 4 ? std::stoi(argv[4]) : 32;
  const int requests = argc > 5 ? std::stoi(argv[5]) : 160;
  const int64_t max_tokens = argc > 6 ? std::stoll(argv[6]) : 128;

  // The serving engine's view of the vocabulary: bytes per id, control tokens empty.
  const int32_t n_vocab = tok->n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (!tok->is_special(id)) pieces[static_cast<size_t>(id)] = tok->token_to_piece(id);
  }
  const constrain::VocabIndex vocab(pieces);
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (tok->is_stop_token(id)) ends.push_back(id);
  }
  const auto t_compile = Clock::now();
  const auto compiled = constrain::compile_constraint(kind, text);
  const double compile_ms = (Clock::now() - t_compile).count() * 1e3;

  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<Stream> live;
  int started = 0, finished = 0, dead_ends = 0;
  int64_t tokens = 0;
  double spent_s = 0;
  std::vector<double> step_us;  // one batch step: every live stream's apply + accept
  auto start = [&] {
    live.push_back({std::make_unique<constrain::TokenConstraint>(compiled, &vocab, ends, max_tokens), 0});
    ++started;
  };
  while (started < std::min(streams, requests)) start();
  while (!live.empty()) {
    double step_s = 0;
    for (size_t i = 0; i < live.size();) {
      Stream& s = live[i];
      for (float& l : logits) l = normal(rng);
      const auto t0 = Clock::now();
      if (!s.c->apply(logits.data(), n_vocab)) {
        ++dead_ends;
        s.c->force_end(logits.data(), n_vocab);
      }
      const auto t1 = Clock::now();
      // The pick is the sampler's work, constrained or not: not timed.
      const int32_t id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      const bool end = std::find(ends.begin(), ends.end(), id) != ends.end();
      const auto t2 = Clock::now();
      if (!end) s.c->accept(id);
      step_s += (t1 - t0).count() + (Clock::now() - t2).count();
      ++tokens;
      if (end || s.c->complete() || ++s.tokens >= max_tokens) {
        ++finished;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        if (started < requests) start();
        continue;
      }
      ++i;
    }
    spent_s += step_s;
    step_us.push_back(step_s * 1e6);
  }
  std::sort(step_us.begin(), step_us.end());
  const constrain::MaskStats st = compiled->stats();
  std::printf(
      "mask_bench: %s, vocab %d, %d streams, %d requests: %lld tokens, %.2f us per token (apply + accept), "
      "batch step p50 %.0f us p99 %.0f us, mask cache %llu hits %llu misses, %d dead ends, compile %.1f ms\n",
      argv[2], n_vocab, streams, finished, static_cast<long long>(tokens), spent_s * 1e6 / static_cast<double>(tokens),
      step_us[step_us.size() / 2], step_us[std::min(step_us.size() - 1, step_us.size() * 99 / 100)],
      static_cast<unsigned long long>(st.hits), static_cast<unsigned long long>(st.misses), dead_ends, compile_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mask_bench: %s\n", e.what());
    return 2;
  }
}
