// Measurements behind profile_model (plan_profile.h). The shapes are measured
// in rounds, each round one forward of every shape, after a warm-up round; 20
// s of rounds (9 to 101). A shared host's speed wanders over seconds (this
// 2-core VM: slow episodes of tens of seconds): measured shape by shape, a
// slow second would bend the table at one point, and a short profile sees one
// episode. In rounds every shape sees the same stretch of time, its median is
// its typical time, and the rounds' common factor is the host's slow drift
// (drift_sigma over drift_period_s, one round), apart from the step-to-step
// jitter within a round (noise_sigma). One more shape is the 128-token
// prompt chunk after the engine idled kIdlePause (idle_factor): serve's
// prefills of requests that reach a server idle for 300 ms or more ran ~6%
// slower here than right after another step (20-300 ms: ~1%); the simulator
// charges it on the whole busy period such a pause begins.
// A round's order matters. On this host a decode step right after a prefill
// runs up to 1.8 ms slower than the same step warm, fading over 3-12 steps
// (ColdDecode in model_profile.h), and a 16-token forward is enough to start
// it. Timed after whatever shape came before, the 1-token forward read 2.3
// to 4.1 ms in calibrations minutes apart while serve's decode steps held
// 2.33-2.46. So each round begins with the cold probes: a prefill of the
// front-end probe's prompt, then 24 decode steps of 1 and of 4 sequences,
// each step's time less the last 4's (warm again) being the cold extra.
// The decode-sized forwards follow, now warm, as serve's back-to-back
// decode steps run, then the serving bursts, the decode-attention ladder
// (4 sequences at 5 positions, each after two untimed runs of itself: the
// steady state of steps that read that much KV), and the prefill-sized
// shapes, whose order does not matter.
// The serving bursts: serve's own step loop (ServingEngine: scheduler,
// sampling, events) runs 1 and then 4 requests whose tokens a StreamProbe
// streams to a reader as serve's HTTP threads and bench would, and the mean
// step while all of them decode, less the same round's bare forward of that
// many tokens, is what serving adds to a step: step_overhead_us + tokens x
// stream_token_us. Timed in the forward alone (the StreamProbe's tokens
// posted as it began, the first design), streaming cost 220-700 us a token
// at one stream, while serve's loop at one stream runs -180..+100 us from
// the bare forward: serve wakes its HTTP thread between steps, when one core
// is free, and the forward sees less of that work.
// Last in each round, one chat request of bench's default 128 words goes
// through serve's own HTTP server with bench's own client (FrontEndProbe):
// its TTFT less the same round's forward of that prompt, less the step
// terms, is request_overhead_us, what serve's front end adds to a request.
// The planner's 0.5 ms constant it replaces was a guess: here the front end
// added about 2 ms (bench's TTFT against the prefill step in serve's step
// trace), and the probe measures 0.9-2.3 ms.
#include "plan_profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/serving_engine.h"
#include "front_end_probe.h"
#include "stream_probe.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {
namespace {

// Rounds: at least kMinRounds, and more until kMinSeconds have passed (the
// host's slow episodes last seconds: a longer profile averages over more of
// them), at most kMaxRounds.
constexpr int kMinRounds = 9;
constexpr int kMaxRounds = 101;
constexpr double kMinSeconds = 20;
constexpr int64_t kChunk = 16;       // tokens per sequence of the larger forward shapes
constexpr int64_t kFar = 512;        // the far position of the attention probes
constexpr int64_t kPairChunk = 128;  // the prompt chunk of the prefill-attention probe
constexpr int64_t kDecodeSeqs = 4;   // sequences of the decode-attention probe
constexpr int64_t kBurstPrompt = 8;  // prompt tokens of a serving burst's request (under a KV block: no cache hits)
constexpr int64_t kBurstSteps = 16;  // decode steps of each request of a burst
constexpr int64_t kBurstWide = 4;    // requests of the wider burst (the other has 1): up to 4 serve wakes each token
constexpr int kHttpThreads = 4;      // the StreamProbe's writer threads: serve's --http-threads default
constexpr int64_t kKvPositions[] = {32, 96, 192, 320, kFar + 1};  // of the decode-attention shapes
constexpr int kKvWarmups = 2;                                     // their untimed runs first
constexpr int64_t kColdSeqs[] = {1, kDecodeSeqs};                 // sequences of the cold decode probes
constexpr int64_t kColdSteps = 24;                                // decode steps timed after the prompt
constexpr int64_t kColdTail = 4;                                  // the last of them: warm again
constexpr double kIdlePause = 0.3;    // s idle before the after-idle shape, not counted in kMinSeconds
constexpr int64_t kFrontWords = 128;  // prompt words of the front-end probe's request: bench's default
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
    // The front-end probe's prompt, as the server counts it (chat template
    // included); every round sends the same one (no prefix cache here).
    int64_t front_prompt = 0;
    try {
      front_prompt = front_.request(kFrontWords).prompt_tokens;
    } catch (const std::exception& ex) {  // e.g. a chat template longer than the profile's context
      log_warn(strfmt("model profile: no front-end timing (%s); simulate uses the planner's per-request constant",
                      ex.what()));
    }
    // The prompt after which decode steps are timed cold: the probe's, as
    // serve sees bench's default requests.
    const int64_t cold_prompt = front_prompt > 0 ? std::min(front_prompt, kFar) : kPairChunk;
    // The shapes (their indexes, for reading the medians back below). The
    // warm ones first: they are timed right after the cold decode steps
    // have rebuilt the caches, in the state of serve's back-to-back decode
    // steps, and the rest after the serving bursts.
    std::vector<size_t> forward;
    for (double n : kForwardTokens)
      if (n <= kChunk) forward.push_back(add(at_zero(static_cast<int64_t>(n), false)));
    const size_t dnear = add(std::vector<SeqShape>(kDecodeSeqs, SeqShape{1, 1, true}));
    const size_t one_logit = add(at_zero(kChunk, false)), all_logits = add(at_zero(kChunk, true));
    const size_t n_warm = shapes_.size();
    // Decode attention by context, ascending, each shape timed after two
    // untimed runs of it: the steady state of steps that read that much KV.
    std::vector<size_t> kv;
    for (int64_t pos : kKvPositions)
      kv.push_back(add(std::vector<SeqShape>(kDecodeSeqs, SeqShape{1, pos, true}), 0, kKvWarmups));
    const size_t dfar = kv.back();
    for (double n : kForwardTokens)
      if (n > kChunk) forward.push_back(add(at_zero(static_cast<int64_t>(n), false)));
    const size_t near = add({{kPairChunk, 0, true}}), far = add({{kPairChunk, kFar, true}});
    const size_t after_idle = add({{kPairChunk, 0, true}}, kIdlePause);  // `near` after a pause
    // The front-end probe's prompt as one prefill (a dummy 1-token shape without one).
    const size_t front_forward = add({{std::max<int64_t>(front_prompt, 1), 0, true}});

    // times[shape][round], the warm-up round dropped.
    std::vector<std::vector<double>> times(shapes_.size());
    std::vector<double> burst1, burst_wide;  // a burst's mean step, s (each round)
    std::vector<double> front_extra;         // the probe's TTFT less the round's forward of its prompt, s
    // cold[i][round][k]: the k-th decode step's extra over its round's warm
    // steps, for kColdSeqs[i] sequences, s.
    std::vector<std::vector<std::vector<double>>> cold(std::size(kColdSeqs));
    double pause_per_round = 0;  // sleeping is not the work kMinSeconds asks for
    for (double s : pauses_) pause_per_round += s;
    const auto start = std::chrono::steady_clock::now();
    int rounds = 0;
    for (int round = -1; round < kMaxRounds; ++round) {
      for (size_t i = 0; i < std::size(kColdSeqs); ++i) {
        const std::vector<double> t = decode_after_prompt(cold_prompt, kColdSeqs[i]);
        const double warm = std::accumulate(t.end() - kColdTail, t.end(), 0.0) / kColdTail;
        if (round >= 0) cold[i].emplace_back();
        for (size_t k = 0; round >= 0 && k + kColdTail < t.size(); ++k) cold[i].back().push_back(t[k] - warm);
      }
      auto time_shapes = [&](size_t from, size_t to) {
        for (size_t k = from; k < to; ++k) {
          const double t = time_once(k);
          if (round >= 0) times[k].push_back(t);
        }
      };
      time_shapes(0, n_warm);
      const double b1 = serve_burst(1), bw = serve_burst(kBurstWide);
      if (round >= 0) {
        burst1.push_back(b1);
        burst_wide.push_back(bw);
      }
      time_shapes(n_warm, shapes_.size());
      if (front_prompt > 0) {
        const double ttft = front_.request(kFrontWords).ttft_s;
        if (round >= 0) front_extra.push_back(ttft - times[front_forward].back());
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
    // The same by context, above the 4 sequences at position 1 (never falling).
    for (size_t i = 0; i < kv.size(); ++i) {
      const double ms = std::max(0.0, (med[kv[i]] - med[dnear]) * 1e3);
      p.decode_kv_ms_by_ctx.push_back({static_cast<double>(kDecodeSeqs * (kKvPositions[i] + 1)),
                                       i == 0 ? ms : std::max(ms, p.decode_kv_ms_by_ctx.back().second)});
    }
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
    // Serving's share of a step, round by round against the same round's bare
    // forward of as many 1-token sequences (the host's drift cancels), less
    // what the profile prices apart: the other sampled rows' logits and the
    // bursts' context (decoding at kBurstPrompt..+kBurstSteps, not at 0).
    // Means, not medians: a request's TPOT is the mean of its steps. Less the
    // slowest and fastest round, which have causes of their own.
    const double burst_ctx = static_cast<double>(kBurstPrompt) + static_cast<double>(kBurstSteps) / 2;
    auto serving_share = [&](const std::vector<double>& burst, int64_t n) {
      const size_t k = forward[static_cast<size_t>(
          std::find(std::begin(kForwardTokens), std::end(kForwardTokens), static_cast<double>(n)) -
          std::begin(kForwardTokens))];
      std::vector<double> extra;
      for (size_t r = 0; r < burst.size(); ++r) extra.push_back(burst[r] - times[k][r]);
      const double dn = static_cast<double>(n);
      return inner_mean(extra) - (dn - 1) * p.logit_row_ms * 1e-3 -
             (planner::profile_decode_kv_s(p, dn * burst_ctx) - planner::profile_decode_kv_s(p, dn));
    };
    const double one = serving_share(burst1, 1), wide = serving_share(burst_wide, kBurstWide);
    // step + n x token through the two points: -400..+30 us and 0..120 us
    // here, against the warm forwards (-1,200..+200 us a step when the table
    // was timed after whatever shape came before, some of it cold). A token
    // never costs less than nothing: then one mean step term.
    double token_s = (wide - one) / static_cast<double>(kBurstWide - 1), step_s = one - token_s;
    if (token_s < 0) {
      token_s = 0;
      step_s = (one + wide) / 2;
    }
    // Never more than half of the 1-token forward off (calibration.cpp checks the same).
    p.step_overhead_us = std::max(step_s, -0.5 * p.forward_ms_by_tokens[0].second * 1e-3) * 1e6;
    p.stream_token_us = token_s * 1e6;
    p.idle_factor = med[after_idle] / med[near];
    // The front end: the rest of the probe's TTFT once the prefill step the
    // simulator prices (the forward, and the step terms just fitted) is out.
    // The median: a request now and then waits out a slow thread wake-up.
    if (!front_extra.empty())
      p.request_overhead_us = std::max(0.0, median_of(front_extra) * 1e6 - p.step_overhead_us - p.stream_token_us);
    p.idle_after_s = kIdlePause;
    // The cold decode steps: the median extra of each step over rounds, up
    // to the first that is not above its round's warm steps.
    p.cold_decode.prompt_tokens = static_cast<double>(cold_prompt);
    for (size_t i = 0; i < std::size(kColdSeqs); ++i) {
      std::vector<double> extra_ms;
      for (size_t k = 0; k < cold[i].front().size(); ++k) {
        std::vector<double> at_k;
        for (const std::vector<double>& r : cold[i]) at_k.push_back(r[k]);
        const double ms = median_of(at_k) * 1e3;
        if (!(ms > 0)) break;
        extra_ms.push_back(ms);
      }
      p.cold_decode.extra_ms.push_back({static_cast<double>(kColdSeqs[i] * (cold_prompt + 1)), extra_ms});
    }

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
  // serve's, but no prefix cache: the bare forwards write the KV pool behind
  // the scheduler's back, and the probe's request repeats its prompt.
  static ServingOptions serving_options() {
    ServingOptions so;
    so.enable_prefix_caching = false;
    return so;
  }

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

  // A shape to time; `pause_s` idle seconds (untimed) before it, after
  // `warmups` untimed runs of it.
  size_t add(std::vector<SeqShape> seqs, double pause_s = 0, int warmups = 0) {
    warmups_.push_back(warmups);
    double pairs = 0;
    for (const SeqShape& s : seqs) pairs += static_cast<double>(s.n) * static_cast<double>(s.n) / 2;
    shapes_.push_back(std::move(seqs));
    pairs_.push_back(pairs);
    pauses_.push_back(pause_s);
    return shapes_.size() - 1;
  }

  // Seconds of each of kColdSteps decode steps of `n` sequences at position
  // `prompt` onwards, right after a `prompt`-token prefill of the first.
  std::vector<double> decode_after_prompt(int64_t prompt, int64_t n) {
    time_seqs({{prompt, 0, true}});
    std::vector<double> t;
    for (int64_t k = 0; k < kColdSteps; ++k)
      t.push_back(time_seqs(std::vector<SeqShape>(static_cast<size_t>(n), SeqShape{1, prompt + k, true})));
    return t;
  }

  // Seconds of one forward of shape k, after its pause.
  double time_once(size_t k) {
    for (int i = 0; i < warmups_[k]; ++i) time_seqs(shapes_[k]);
    if (pauses_[k] > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pauses_[k]));
    return time_seqs(shapes_[k]);
  }

  // Seconds of one forward of `seqs` (sequence i in the i-th n-th of the KV pool).
  double time_seqs(const std::vector<SeqShape>& seqs) {
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
    const auto t0 = std::chrono::steady_clock::now();
    engine_.forward(batch_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Seconds per step of `n` requests served together by serve's step loop,
  // each token streamed through the probe: the mean step of the stretch in
  // which all of them decode. The first request's first event (on the step
  // thread) submits the others, so they join the very next step whatever the
  // threads' timing (submitted from here, a small model's first request could
  // finish before the others arrive).
  double serve_burst(int64_t n) {
    using Clock = std::chrono::steady_clock;
    std::vector<std::vector<Clock::time_point>> at(static_cast<size_t>(n));
    for (auto& a : at) a.reserve(kBurstSteps + 2);
    std::mutex mu;
    std::condition_variable cv;
    int64_t finished = 0;
    std::function<void(int64_t)> submit = [&](int64_t i) {
      ServingRequest r;
      r.prompt.assign(static_cast<size_t>(kBurstPrompt), 3);
      r.max_tokens = kBurstSteps + 1;
      r.ignore_eos = true;
      uint64_t id = 0;
      const SubmitStatus status = serving_.submit(
          std::move(r),
          [&, i](const TokenEvent& e) {  // on the step thread, as serve's RequestChannel::push
            if (e.token >= 0) {
              std::vector<Clock::time_point>& mine = at[static_cast<size_t>(i)];
              mine.push_back(Clock::now());
              stream_.post(i);
              if (i == 0 && mine.size() == 1)
                for (int64_t k = 1; k < n; ++k) submit(k);
            }
            if (e.finished) {
              std::lock_guard<std::mutex> lock(mu);
              ++finished;
              cv.notify_all();
            }
          },
          &id);
      PARALLM_CHECK(status == SubmitStatus::kOk);
    };
    submit(0);
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return finished == n; });
    }
    stream_.drain();
    Clock::time_point from = at[0].front(), to = at[0].back();
    for (const auto& a : at) {
      PARALLM_CHECK(a.size() == static_cast<size_t>(kBurstSteps + 1));
      from = std::max(from, a.front());
      to = std::min(to, a.back());
    }
    int64_t steps = 0;
    for (const Clock::time_point t : at[0]) steps += t > from && t <= to ? 1 : 0;
    PARALLM_CHECK(steps > 0);
    return std::chrono::duration<double>(to - from).count() / static_cast<double>(steps);
  }

  Engine engine_;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<SeqShape>> shapes_;
  std::vector<double> pairs_;   // each shape's causal pairs at position 0 (n^2 / 2 a sequence)
  std::vector<double> pauses_;  // each shape's idle seconds before it
  std::vector<int> warmups_;    // each shape's untimed runs before it
  StreamProbe stream_{static_cast<int>(kBurstWide), kHttpThreads};
  ServingEngine serving_{engine_, serving_options()};  // after stream_: its callbacks post there
  FrontEndProbe front_{engine_, serving_};             // after serving_: its server submits there
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
