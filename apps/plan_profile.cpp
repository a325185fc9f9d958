// Measurements behind profile_model (plan_profile.h). The shapes are measured
// in rounds, each round one forward of every shape, after a warm-up round; 20
// s of rounds (9 to 101). A shared host's speed wanders over seconds (this
// 2-core VM: 1-token decode steps of 2.1 to 3.0 ms from one second to the
// next, slow episodes of tens of seconds): measured shape by shape, a slow
// second would bend the table at one point, and a short profile sees one
// episode. In rounds every shape sees the same stretch of time, its median is
// its typical time, and the rounds' common factor is the host's slow drift
// (drift_sigma over drift_period_s, one round), apart from the step-to-step
// jitter within a round (noise_sigma). One more shape is the 1-token decode
// while a StreamProbe streams kStreamTokens tokens: the host's cost of
// streaming a token, as the forward sees it (stream_token_us). And one is the
// 128-token prompt chunk after the engine idled kIdlePause (idle_factor):
// serve's prefills of requests that reach a server idle for 300 ms or more
// ran ~6% slower here than right after another step (20-300 ms: ~1%).
#include "plan_profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "stream_probe.h"
#include "util/check.h"

namespace parallm {
namespace {

// Rounds: at least kMinRounds, and more until kMinSeconds have passed (the
// host's slow episodes last seconds: a longer profile averages over more of
// them), at most kMaxRounds.
constexpr int kMinRounds = 9;
constexpr int kMaxRounds = 101;
constexpr double kMinSeconds = 20;
constexpr int64_t kChunk = 16;        // tokens per sequence of the larger forward shapes
constexpr int64_t kFar = 512;         // the far position of the attention probes
constexpr int64_t kPairChunk = 128;   // the prompt chunk of the prefill-attention probe
constexpr int64_t kDecodeSeqs = 4;    // sequences of the decode-attention probe
constexpr int64_t kStreamTokens = 4;  // tokens streamed during the streaming probe's decode, one a stream
constexpr int kHttpThreads = 4;       // the probe's writer threads: serve's --http-threads default
constexpr double kIdlePause = 0.3;    // s idle before the after-idle shape, not counted in kMinSeconds
constexpr double kForwardTokens[] = {1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512};

// A sequence's tokens at `pos0` (`logits`: its last row wants logits).
struct SeqShape {
  int64_t n = 1, pos0 = 0;
  bool logits = false;
};

double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The mean without the smallest and the largest value.
double inner_mean(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (size_t i = 1; i + 1 < v.size(); ++i) sum += v[i];
  return sum / static_cast<double>(v.size() - 2);
}

double stdev_of(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean) / static_cast<double>(v.size() - 1);
  return std::sqrt(var);
}

class Profiler {
 public:
  Profiler(const std::string& path, int threads) : engine_(options(path, threads)) {
    const int64_t bs = engine_.block_size();
    PARALLM_CHECK(engine_.n_kv_blocks() >= (kFar + kPairChunk + bs) / bs * kDecodeSeqs);
    tokens_.assign(static_cast<size_t>(kFar), 3);
  }

  planner::ModelProfile run(const std::string& path, int threads) {
    // The shapes (their indexes, for reading the medians back below).
    const size_t near = add({{kPairChunk, 0, true}}), far = add({{kPairChunk, kFar, true}});
    const size_t dnear = add(std::vector<SeqShape>(kDecodeSeqs, SeqShape{1, 1, true}));
    const size_t dfar = add(std::vector<SeqShape>(kDecodeSeqs, SeqShape{1, kFar + 1, true}));
    const size_t one_logit = add(at_zero(kChunk, false)), all_logits = add(at_zero(kChunk, true));
    std::vector<size_t> forward;
    for (double n : kForwardTokens) forward.push_back(add(at_zero(static_cast<int64_t>(n), false)));
    const size_t streaming = add(at_zero(1, false), kStreamTokens);
    const size_t after_idle = add({{kPairChunk, 0, true}}, 0, kIdlePause);  // `near` after a pause

    // times[shape][round], the warm-up round dropped.
    std::vector<std::vector<double>> times(shapes_.size());
    double pause_per_round = 0;  // sleeping is not the work kMinSeconds asks for
    for (double s : pauses_) pause_per_round += s;
    const auto start = std::chrono::steady_clock::now();
    int rounds = 0;
    for (int round = -1; round < kMaxRounds; ++round) {
      for (size_t k = 0; k < shapes_.size(); ++k) {
        const double t = time_once(k);
        if (round >= 0) times[k].push_back(t);
      }
      rounds = round + 1;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
                             (round + 2) * pause_per_round;  // rounds so far, the warm-up too
      if (rounds >= kMinRounds && elapsed >= kMinSeconds) break;
    }
    std::vector<double> med(shapes_.size());
    for (size_t k = 0; k < shapes_.size(); ++k) med[k] = median_of(times[k]);

    planner::ModelProfile p;
    p.model_path = std::filesystem::absolute(path).lexically_normal().string();
    p.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
    p.threads = threads;
    // Prefill attention: one chunk far into its sequence against the same at 0.
    const double pair_s = std::max(0.0, med[far] - med[near]) / static_cast<double>(kPairChunk * kFar);
    p.prefill_pair_ns = pair_s * 1e9;
    // Decode attention: kDecodeSeqs sequences decoding at kFar against at 1.
    p.decode_kv_token_ns = std::max(0.0, med[dfar] - med[dnear]) / static_cast<double>(kDecodeSeqs * kFar) * 1e9;
    // The output head per logits row: kChunk 1-token sequences, logits on all or one.
    p.logit_row_ms = std::max(0.0, med[all_logits] - med[one_logit]) / static_cast<double>(kChunk - 1) * 1e3;
    for (size_t i = 0; i < forward.size(); ++i) {
      const size_t k = forward[i];
      p.forward_ms_by_tokens.push_back({kForwardTokens[i], std::max(1e-6, (med[k] - pairs_[k] * pair_s) * 1e3)});
    }
    // Forward time never falls with more tokens: a noisy point takes its neighbour's.
    for (size_t i = 1; i < p.forward_ms_by_tokens.size(); ++i)
      p.forward_ms_by_tokens[i].second =
          std::max(p.forward_ms_by_tokens[i].second, p.forward_ms_by_tokens[i - 1].second);
    // Means, not medians: the streaming's cost falls on some forwards more
    // than others, and a request's TPOT is the mean of its steps. Less the
    // slowest and fastest round of each, which have causes of their own.
    p.stream_token_us = std::max(0.0, inner_mean(times[streaming]) - inner_mean(times[forward[0]])) /
                        static_cast<double>(kStreamTokens) * 1e6;
    p.idle_factor = med[after_idle] / med[near];
    p.idle_after_s = kIdlePause;

    // A round's drift: the median over shapes of log(time / the shape's
    // median). What is left of a time after its round's drift is jitter.
    std::vector<double> drift(static_cast<size_t>(rounds)), jitter;
    for (int r = 0; r < rounds; ++r) {
      std::vector<double> logs;
      for (size_t k = 0; k < shapes_.size(); ++k) logs.push_back(std::log(times[k][r] / med[k]));
      drift[static_cast<size_t>(r)] = median_of(logs);
    }
    for (size_t k = 0; k < shapes_.size(); ++k) {
      std::vector<double> rest;
      for (int r = 0; r < rounds; ++r) rest.push_back(std::log(times[k][r] / med[k]) - drift[static_cast<size_t>(r)]);
      jitter.push_back(stdev_of(rest));
    }
    p.noise_sigma = median_of(jitter);
    p.drift_sigma = stdev_of(drift);
    for (double m : med) p.drift_period_s += m;
    p.drift_period_s += pause_per_round;
    return p;
  }

 private:
  static EngineOptions options(const std::string& path, int threads) {
    EngineOptions eo;
    eo.model_path = path;
    eo.threads = threads;
    eo.ctx_size = kFar + kPairChunk + 64;
    eo.kv_blocks = (eo.ctx_size + eo.block_size - 1) / eo.block_size * kDecodeSeqs;
    return eo;
  }

  // `n` tokens at position 0: 1-token sequences up to kChunk, kChunk-token
  // chunks beyond; logits on the first sequence only (or on all: all_logits).
  static std::vector<SeqShape> at_zero(int64_t n, bool all_logits) {
    std::vector<SeqShape> seqs;
    const int64_t per = n <= kChunk ? 1 : kChunk;
    for (int64_t left = n; left > 0; left -= per) seqs.push_back({std::min(per, left), 0, all_logits || seqs.empty()});
    return seqs;
  }

  // A shape to time; `streamed` tokens go through the StreamProbe during it;
  // `pause_s` idle seconds (untimed) before it.
  size_t add(std::vector<SeqShape> seqs, int64_t streamed = 0, double pause_s = 0) {
    double pairs = 0;
    for (const SeqShape& s : seqs) pairs += static_cast<double>(s.n) * static_cast<double>(s.n) / 2;
    shapes_.push_back(std::move(seqs));
    pairs_.push_back(pairs);
    streamed_.push_back(streamed);
    pauses_.push_back(pause_s);
    return shapes_.size() - 1;
  }

  // Seconds of one forward of shape k.
  double time_once(size_t k) {
    const std::vector<SeqShape>& seqs = shapes_[k];
    const int64_t bs = engine_.block_size();
    const int64_t seq_blocks = engine_.n_kv_blocks() / static_cast<int64_t>(seqs.size());
    tables_.resize(seqs.size());
    batch_.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      const SeqShape& s = seqs[i];
      const int64_t need = (s.pos0 + s.n + bs - 1) / bs;
      PARALLM_CHECK(need <= seq_blocks);
      tables_[i].resize(static_cast<size_t>(need));
      for (int64_t b = 0; b < need; ++b) tables_[i][static_cast<size_t>(b)] = static_cast<int32_t>(i * seq_blocks + b);
      batch_.add_sequence_tokens(tokens_.data(), s.n, static_cast<int32_t>(s.pos0), static_cast<int32_t>(i),
                                 tables_[i].data(), bs, s.logits);
    }
    if (pauses_[k] > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pauses_[k]));
    const auto t0 = std::chrono::steady_clock::now();
    if (streamed_[k] > 0) stream_.post(streamed_[k]);  // serve hands a step's tokens over as the next one starts
    engine_.forward(batch_);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stream_.drain();
    return t;
  }

  Engine engine_;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<SeqShape>> shapes_;
  std::vector<double> pairs_;      // each shape's causal pairs at position 0 (n^2 / 2 a sequence)
  std::vector<int64_t> streamed_;  // each shape's tokens streamed meanwhile
  std::vector<double> pauses_;     // each shape's idle seconds before it
  StreamProbe stream_{static_cast<int>(kStreamTokens), kHttpThreads};
  std::vector<std::vector<int32_t>> tables_;
  ForwardBatch batch_;
};

}  // namespace

planner::ModelProfile profile_model(const std::string& model_path, int threads) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec))
    throw InputError("--model " + model_path + ": profiling needs a local model file");
  Profiler profiler(model_path, threads);
  return profiler.run(model_path, threads);
}

}  // namespace parallm
