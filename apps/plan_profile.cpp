// Measurements behind profile_model (plan_profile.h). Every shape runs kReps
// times after a warm-up; a shape's time is the median (the simulator prices
// typical steps), and the spread of its log times is the host's jitter.
#include "plan_profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <vector>

#include "engine/engine.h"
#include "util/check.h"

namespace parallm {
namespace {

constexpr int kReps = 9;
constexpr int64_t kChunk = 16;       // tokens per sequence of the larger forward shapes
constexpr int64_t kFar = 512;        // the far position of the attention probes
constexpr int64_t kPairChunk = 128;  // the prompt chunk of the prefill-attention probe
constexpr int64_t kDecodeSeqs = 4;   // sequences of the decode-attention probe
constexpr double kForwardTokens[] = {1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512};

// A sequence's tokens at `pos0` (`logits`: its last row wants logits).
struct SeqShape {
  int64_t n = 1, pos0 = 0;
  bool logits = false;
};

class Profiler {
 public:
  Profiler(const std::string& path, int threads) : engine_(options(path, threads)) {
    const int64_t bs = engine_.block_size();
    PARALLM_CHECK(engine_.n_kv_blocks() >= (kFar + kPairChunk + bs) / bs * kDecodeSeqs);
    tokens_.assign(static_cast<size_t>(kFar), 3);
  }

  // Median seconds of one forward of `seqs`; its log spread goes to sigmas_.
  double time(const std::vector<SeqShape>& seqs) {
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
    engine_.forward(batch_);  // warm-up
    std::vector<double> t(kReps);
    for (double& x : t) {
      const auto t0 = std::chrono::steady_clock::now();
      engine_.forward(batch_);
      x = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::sort(t.begin(), t.end());
    double mean = 0, var = 0;
    for (double x : t) mean += std::log(x) / kReps;
    for (double x : t) var += (std::log(x) - mean) * (std::log(x) - mean) / (kReps - 1);
    sigmas_.push_back(std::sqrt(var));
    return t[kReps / 2];
  }

  // `n` tokens at position 0: 1-token sequences up to kChunk, kChunk-token
  // chunks beyond; logits on the first sequence only (or on all: all_logits).
  double forward_at_zero(int64_t n, bool all_logits, double* pairs) {
    std::vector<SeqShape> seqs;
    const int64_t per = n <= kChunk ? 1 : kChunk;
    for (int64_t left = n; left > 0; left -= per) seqs.push_back({std::min(per, left), 0, all_logits || seqs.empty()});
    *pairs = 0;
    for (const SeqShape& s : seqs) *pairs += static_cast<double>(s.n) * static_cast<double>(s.n) / 2;
    return time(seqs);
  }

  planner::ModelProfile run(const std::string& path, int threads) {
    planner::ModelProfile p;
    p.model_path = std::filesystem::absolute(path).lexically_normal().string();
    p.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
    p.threads = threads;
    // Prefill attention: one chunk far into its sequence against the same at 0.
    const double near = time({{kPairChunk, 0, true}}), far = time({{kPairChunk, kFar, true}});
    const double pair_s = std::max(0.0, far - near) / static_cast<double>(kPairChunk * kFar);
    p.prefill_pair_ns = pair_s * 1e9;
    // Decode attention: kDecodeSeqs sequences decoding at kFar against at 1.
    std::vector<SeqShape> dnear(kDecodeSeqs, SeqShape{1, 1, true}), dfar(kDecodeSeqs, SeqShape{1, kFar + 1, true});
    const double t_dnear = time(dnear), t_dfar = time(dfar);
    p.decode_kv_token_ns = std::max(0.0, t_dfar - t_dnear) / static_cast<double>(kDecodeSeqs * kFar) * 1e9;
    // The output head per logits row: kChunk 1-token sequences, logits on all or one.
    double pairs = 0;
    const double one = forward_at_zero(kChunk, false, &pairs), all = forward_at_zero(kChunk, true, &pairs);
    p.logit_row_ms = std::max(0.0, all - one) / static_cast<double>(kChunk - 1) * 1e3;
    for (double n : kForwardTokens) {
      const double t = forward_at_zero(static_cast<int64_t>(n), false, &pairs);
      p.forward_ms_by_tokens.push_back({n, std::max(1e-6, (t - pairs * pair_s) * 1e3)});
    }
    // Forward time never falls with more tokens: a noisy point takes its neighbour's.
    for (size_t i = 1; i < p.forward_ms_by_tokens.size(); ++i)
      p.forward_ms_by_tokens[i].second =
          std::max(p.forward_ms_by_tokens[i].second, p.forward_ms_by_tokens[i - 1].second);
    std::vector<double> s = sigmas_;
    std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(s.size() / 2), s.end());
    p.noise_sigma = s[s.size() / 2];
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

  Engine engine_;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<int32_t>> tables_;
  ForwardBatch batch_;
  std::vector<double> sigmas_;
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
