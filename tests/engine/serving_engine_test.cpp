// ServingEngine with real small models (stories260K and a generated "tiny"
// model): concurrent greedy and seeded results equal each request run alone
// with generate_one, and queue and prefill times come with each one's first
// token only; a pool too small for all requests preempts and still produces
// the same tokens; abort frees the blocks; a repeated prompt hits the prefix
// cache (the hit rate and the query / hit token counts); the admission
// answers; a profiled, resized pool (what `serve` does at start) serves on
// every rank; with pp = 2 the lanes of micro-batches give the same tokens;
// embeddings (prefill-only requests) batched with generations equal each
// alone, over tp / pp layouts and a preempting pool too.
#include "engine/serving_engine.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "common/generated_model.h"
#include "engine/generate.h"
#include "util/check.h"

namespace parallm {
namespace {

const std::string kStories = std::string(PARALLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

const std::string& tiny_model_path() { return test::generated_model("tiny", 11); }

std::unique_ptr<Engine> make_engine(const std::string& path, int64_t kv_blocks, int64_t ctx = 256, int pp = 1) {
  EngineOptions o;
  o.model_path = path;
  o.threads = 1;
  o.ctx_size = ctx;
  o.kv_blocks = kv_blocks;
  o.pp = pp;
  return std::make_unique<Engine>(o);
}

// Collects every request's events.
struct Results {
  struct One {
    std::vector<int32_t> tokens;
    std::string finish;
    int64_t completion_tokens = 0;
    int n_timed = 0;  // events with queue_s or prefill_s set (only the first token's may)
    double queue_s = 0, prefill_s = 0;
  };
  std::function<void(const TokenEvent&)> callback(int key) {
    return [this, key](const TokenEvent& ev) {
      std::lock_guard<std::mutex> lk(mu);
      One& o = by_key[key];
      if (ev.token >= 0 && o.tokens.empty()) {
        o.queue_s = ev.queue_s;
        o.prefill_s = ev.prefill_s;
      }
      if (ev.queue_s != 0 || ev.prefill_s != 0) ++o.n_timed;
      if (ev.token >= 0) o.tokens.push_back(ev.token);
      o.completion_tokens = ev.completion_tokens;
      if (ev.finished) {
        o.finish = ev.finish_reason;
        ++n_finished;
        cv.notify_all();
      }
    };
  }
  bool wait(int n, double timeout_s = 60) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::duration<double>(timeout_s), [&] { return n_finished >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, One> by_key;
  int n_finished = 0;
};

std::vector<std::vector<int32_t>> make_prompts(const Engine& e, int n, int min_len, int max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out;
  const int32_t n_vocab = static_cast<int32_t>(e.config().n_vocab);
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p;
    if (e.tokenizer().bos_id() >= 0) p.push_back(e.tokenizer().bos_id());
    const int len = min_len + static_cast<int>(rng() % static_cast<uint64_t>(max_len - min_len + 1));
    while (static_cast<int>(p.size()) < len) p.push_back(3 + static_cast<int32_t>(rng() % (n_vocab - 3)));
    out.push_back(p);
  }
  return out;
}

std::vector<int32_t> alone(Engine& e, const std::vector<int32_t>& prompt, int64_t max_tokens, const SamplingParams& sp,
                           bool ignore_eos) {
  GenerateParams g;
  g.max_new_tokens = max_tokens;
  g.sampling = sp;
  g.ignore_eos = ignore_eos;
  return generate_one(e, prompt, g).token_ids;
}

void wait_idle(const ServingEngine& s) {
  for (int i = 0; i < 500; ++i) {
    const ServingMetrics m = s.metrics();
    if (m.num_requests_running == 0 && m.num_requests_waiting == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// n concurrent requests equal each one alone; half greedy, half seeded sampling.
void check_concurrent_equals_alone(const std::string& model, int n, int64_t kv_blocks, bool ignore_eos,
                                   uint64_t* preemptions, int max_new = 30, int pp = 1) {
  auto ref_engine = make_engine(model, 0);
  auto prompts = make_prompts(*ref_engine, n, 3, 40, 5);
  if (model == kStories) {  // real text for some, so that stories end with a stop token
    const char* texts[] = {"Once upon a time, there was a little girl named Lily.", "One day, a big dog",
                           "Tom and his mom went to the park. They"};
    for (int i = 0; i < n; i += 3) prompts[static_cast<size_t>(i)] = ref_engine->tokenizer().encode(texts[i % 3], true);
  }
  std::vector<SamplingParams> params(static_cast<size_t>(n));
  std::vector<int64_t> max_tokens(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> expect;
  for (int i = 0; i < n; ++i) {
    SamplingParams& sp = params[static_cast<size_t>(i)];
    if (i % 2 == 0) {
      sp.temperature = 0;
    } else {
      sp.temperature = 0.9f;
      sp.top_k = 40;
      sp.seed = 1000 + static_cast<uint64_t>(i);
    }
    max_tokens[static_cast<size_t>(i)] = 8 + (i * 7) % max_new;
    expect.push_back(
        alone(*ref_engine, prompts[static_cast<size_t>(i)], max_tokens[static_cast<size_t>(i)], sp, ignore_eos));
  }
  auto engine = make_engine(model, kv_blocks, 256, pp);
  ServingOptions so;
  so.max_num_batched_tokens = 64;  // several chunks for the longer prompts
  Results res;
  {
    ServingEngine serving(*engine, so);
    for (int i = 0; i < n; ++i) {
      ServingRequest r;
      r.prompt = prompts[static_cast<size_t>(i)];
      r.max_tokens = max_tokens[static_cast<size_t>(i)];
      r.sampling = params[static_cast<size_t>(i)];
      r.ignore_eos = ignore_eos;
      uint64_t id = 0;
      ASSERT_EQ(serving.submit(r, res.callback(i), &id), SubmitStatus::kOk);
    }
    ASSERT_TRUE(res.wait(n));
    wait_idle(serving);
    const ServingMetrics m = serving.metrics();
    EXPECT_EQ(m.num_requests_running, 0);
    EXPECT_DOUBLE_EQ(m.kv_cache_usage, 0.0);
    if (preemptions) *preemptions = m.num_preemptions_total;
    uint64_t generated = 0;
    for (int i = 0; i < n; ++i) generated += expect[static_cast<size_t>(i)].size();
    EXPECT_EQ(m.generation_tokens_total, generated);
  }
  int n_stop = 0;
  for (int i = 0; i < n; ++i) n_stop += res.by_key.at(i).finish == "stop" ? 1 : 0;
  std::printf("%d requests, %d stopped early, preemptions %llu\n", n, n_stop,
              (unsigned long long)(preemptions ? *preemptions : 0));
  for (int i = 0; i < n; ++i) {
    const Results::One& o = res.by_key.at(i);
    EXPECT_EQ(o.tokens, expect[static_cast<size_t>(i)]) << "request " << i;
    const bool full = static_cast<int64_t>(o.tokens.size()) == max_tokens[static_cast<size_t>(i)];
    EXPECT_EQ(o.finish, full ? "length" : "stop") << "request " << i;
    EXPECT_EQ(o.completion_tokens, static_cast<int64_t>(o.tokens.size()));
    // Engine timings on the first token's event only, a preemption's recompute or not.
    EXPECT_EQ(o.n_timed, 1) << "request " << i;
    EXPECT_GE(o.queue_s, 0) << "request " << i;
    EXPECT_GT(o.prefill_s, 0) << "request " << i;
  }
}

// Long enough outputs that some stories end with the stop token.
TEST(ServingEngine, StoriesConcurrentEqualsAlone) {
  check_concurrent_equals_alone(kStories, 12, 256, false, nullptr, 200);
}

TEST(ServingEngine, TinyConcurrentEqualsAlone) {
  check_concurrent_equals_alone(tiny_model_path(), 16, 256, true, nullptr);
}

TEST(ServingEngine, SmallPoolPreemptsAndStillMatches) {
  uint64_t preemptions = 0;
  // 12 requests of up to ~75 tokens (5 blocks each) in 12 blocks.
  check_concurrent_equals_alone(kStories, 12, 12, true, &preemptions);
  EXPECT_GT(preemptions, 0u);
}

// pp = 2: two lanes, each with a step in the pipe, give what each request
// gives alone; and so they do when their halves of a small pool preempt.
TEST(ServingEngine, PipelineLanesEqualAlone) {
  check_concurrent_equals_alone(tiny_model_path(), 16, 256, true, nullptr, 30, /*pp=*/2);
  uint64_t preemptions = 0;
  check_concurrent_equals_alone(kStories, 12, 24, true, &preemptions, 30, /*pp=*/2);
  EXPECT_GT(preemptions, 0u);
}

// With pp = 2 a second request keeps the other lane's steps in the pipe
// while the first is aborted.
void check_abort_frees_blocks(int pp) {
  auto engine = make_engine(kStories, 64, 256, pp);
  ServingEngine serving(*engine, ServingOptions{});
  Results res;
  ServingRequest r;
  r.prompt = make_prompts(*engine, 1, 30, 30, 3)[0];
  r.max_tokens = 200;
  r.ignore_eos = true;
  std::mutex mu;
  std::condition_variable cv;
  bool got_token = false;
  uint64_t id = 0, other = 0;
  auto inner = res.callback(0);
  ASSERT_EQ(serving.submit(
                r,
                [&](const TokenEvent& ev) {
                  inner(ev);
                  std::lock_guard<std::mutex> lk(mu);
                  got_token = true;
                  cv.notify_all();
                },
                &id),
            SubmitStatus::kOk);
  if (pp > 1) {
    ServingRequest r2 = r;
    r2.max_tokens = 40;
    ASSERT_EQ(serving.submit(r2, res.callback(1), &other), SubmitStatus::kOk);
  }
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return got_token; }));
  }
  serving.abort(id);
  ASSERT_TRUE(res.wait(pp > 1 ? 2 : 1));
  EXPECT_EQ(res.by_key.at(0).finish, "abort");
  EXPECT_LT(res.by_key.at(0).tokens.size(), 200u);
  if (pp > 1) {
    EXPECT_EQ(res.by_key.at(1).finish, "length");
    EXPECT_EQ(res.by_key.at(1).tokens.size(), 40u);
  }
  wait_idle(serving);
  const ServingMetrics m = serving.metrics();
  EXPECT_EQ(m.num_requests_running, 0);
  EXPECT_DOUBLE_EQ(m.kv_cache_usage, 0.0);
  EXPECT_EQ(m.kv_blocks_free, m.kv_blocks_total);
  serving.abort(id);  // unknown by now: ignored
}

TEST(ServingEngine, AbortFreesBlocks) {
  check_abort_frees_blocks(1);
  check_abort_frees_blocks(2);
}

TEST(ServingEngine, RepeatedPromptHitsThePrefixCache) {
  auto ref = make_engine(kStories, 0);
  const auto prompt = make_prompts(*ref, 1, 50, 50, 9)[0];
  SamplingParams greedy;
  greedy.temperature = 0;
  const auto expect = alone(*ref, prompt, 10, greedy, true);
  auto engine = make_engine(kStories, 64);
  ServingEngine serving(*engine, ServingOptions{});
  Results res;
  for (int k = 0; k < 2; ++k) {
    ServingRequest r;
    r.prompt = prompt;
    r.max_tokens = 10;
    r.sampling = greedy;
    r.ignore_eos = true;
    uint64_t id = 0;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(serving.submit(r, res.callback(k), &id), SubmitStatus::kOk);
    ASSERT_TRUE(res.wait(k + 1));
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Queue and prefill times come with the first token only, and fit in the request's time.
    const Results::One& o = res.by_key.at(k);
    EXPECT_EQ(o.n_timed, 1) << k;
    EXPECT_GE(o.queue_s, 0) << k;
    EXPECT_GT(o.prefill_s, 0) << k;
    EXPECT_LE(o.queue_s + o.prefill_s, elapsed_s) << k;
  }
  EXPECT_EQ(res.by_key.at(0).tokens, expect);
  EXPECT_EQ(res.by_key.at(1).tokens, expect);
  // The second request found 3 full blocks (48 of its 50 tokens).
  const ServingMetrics m = serving.metrics();
  EXPECT_DOUBLE_EQ(m.prefix_cache_hit_rate, 48.0 / 100.0);
  EXPECT_EQ(m.prefix_cache_queries_total, 100u);
  EXPECT_EQ(m.prefix_cache_hits_total, 48u);
}

TEST(ServingEngine, AdmissionAnswers) {
  auto engine = make_engine(kStories, 8, 256);  // 8 blocks of 16: 128 tokens
  ServingOptions so;
  so.max_model_len = 100;
  ServingEngine serving(*engine, so);
  Results res;
  uint64_t id = 0;
  ServingRequest r;
  r.prompt = make_prompts(*engine, 1, 60, 60, 1)[0];
  r.max_tokens = 41;  // 101 > max_model_len
  EXPECT_EQ(serving.submit(r, res.callback(0), &id), SubmitStatus::kTooLong);
  r.max_tokens = 40;
  EXPECT_EQ(serving.submit(r, res.callback(0), &id), SubmitStatus::kOk);
  r.prompt.clear();
  EXPECT_THROW(serving.submit(r, res.callback(1), &id), InputError);
  r.prompt = {1, 100000};
  EXPECT_THROW(serving.submit(r, res.callback(1), &id), InputError);
  ASSERT_TRUE(res.wait(1));

  ServingOptions none;
  none.max_queue = 0;
  ServingEngine full(*engine, none);
  r.prompt = {1, 5};
  EXPECT_EQ(full.submit(r, res.callback(2), &id), SubmitStatus::kQueueFull);
}

TEST(ServingEngine, DestructorAbortsPendingRequests) {
  auto engine = make_engine(kStories, 64);
  Results res;
  {
    ServingEngine serving(*engine, ServingOptions{});
    ServingRequest r;
    r.prompt = make_prompts(*engine, 1, 10, 10, 2)[0];
    r.max_tokens = 240;
    r.ignore_eos = true;
    uint64_t id = 0;
    for (int k = 0; k < 3; ++k) ASSERT_EQ(serving.submit(r, res.callback(k), &id), SubmitStatus::kOk);
  }
  ASSERT_TRUE(res.wait(3, 1));
  for (int k = 0; k < 3; ++k) EXPECT_EQ(res.by_key.at(k).finish, "abort");
}

// `serve` builds the engine, profiles its largest step and resizes the pool:
// the profile counts at least the residual stream, normed input and
// projection of every token and the logits rows (per rank, tp = 2), and the
// resized pools serve on both ranks: a request lands mid-way into the new
// pool, past the old one's end, and gives the tokens it gives alone.
TEST(ServingEngine, ProfiledStepAndResizedPoolServe) {
  EngineOptions o;
  o.model_path = tiny_model_path();
  o.threads = 1;
  o.ctx_size = 256;
  o.kv_blocks = 16;  // one sequence of the context
  o.tp = 2;
  Engine engine(o);
  const ModelConfig& c = engine.config();
  const int64_t n_tokens = 300, n_seqs = 12;
  const size_t bytes = engine.profile_step(n_tokens, n_seqs);
  // 12 sequences of 25 tokens take 2 blocks each: 16 blocks hold 8 of them.
  const double tokens = 8 * 25;
#if defined(__SANITIZE_THREAD__)
  // NOTE: TSan's allocator keeps its own books (mallinfo2 reads 0), so the
  // profile measures nothing there; the bounds hold in the normal build.
  (void)c;
  (void)tokens;
#else
  EXPECT_GE(static_cast<double>(bytes), tokens * static_cast<double>(c.n_embd) * 4 * 3);
  EXPECT_LT(bytes, size_t{1} << 30);
#endif
  EXPECT_EQ(engine.activation_bytes_per_rank(), bytes);

  engine.resize_kv_pool(96);
  EXPECT_EQ(engine.n_kv_blocks(), 96);
  EXPECT_EQ(engine.rank_kv_blocks(), (std::vector<int64_t>{96, 96}));
  const auto prompt = make_prompts(engine, 1, 40, 40, 9)[0];
  SamplingParams greedy;
  greedy.temperature = 0;
  auto fresh = make_engine(tiny_model_path(), 0);
  const std::vector<int32_t> expect = alone(*fresh, prompt, 20, greedy, true);
  Results res;
  {
    ServingEngine serving(engine, ServingOptions{});
    ServingRequest r;
    r.prompt = prompt;
    r.max_tokens = 20;
    r.sampling = greedy;
    r.ignore_eos = true;
    uint64_t id = 0;
    ASSERT_EQ(serving.submit(r, res.callback(0), &id), SubmitStatus::kOk);
    ASSERT_TRUE(res.wait(1));
  }
  EXPECT_EQ(res.by_key.at(0).tokens, expect);
}

// Embeddings of `prompts`, all submitted at once (with two generations mixed
// in, so steps hold decode tokens, sampled rows and pooled rows together).
std::vector<std::vector<float>> embed_all(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                          int64_t budget, uint64_t* preemptions = nullptr) {
  ServingOptions so;
  so.max_num_batched_tokens = budget;
  ServingEngine serving(engine, so);
  std::mutex mu;
  std::condition_variable cv;
  std::map<size_t, std::vector<float>> out;
  int finished = 0;
  const size_t n_embed = prompts.size();
  for (size_t i = 0; i < n_embed + 2; ++i) {
    ServingRequest r;
    r.prompt = prompts[i % n_embed];
    r.embed = i < n_embed;
    r.max_tokens = 20;
    r.ignore_eos = true;
    uint64_t id = 0;
    const SubmitStatus st = serving.submit(
        r,
        [&, i](const TokenEvent& ev) {
          if (!ev.finished) return;
          std::lock_guard<std::mutex> lk(mu);
          EXPECT_EQ(ev.finish_reason, i < n_embed ? "stop" : "length") << i;
          EXPECT_EQ(ev.embedding.empty(), i >= n_embed) << i;
          if (i < n_embed) out[i] = ev.embedding;
          ++finished;
          cv.notify_all();
        },
        &id);
    EXPECT_EQ(st, SubmitStatus::kOk);
  }
  std::unique_lock<std::mutex> lk(mu);
  EXPECT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return finished == static_cast<int>(n_embed + 2); }));
  if (preemptions) *preemptions = serving.metrics().num_preemptions_total;
  std::vector<std::vector<float>> v;
  for (size_t i = 0; i < n_embed; ++i) v.push_back(out[i]);
  return v;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0;
  for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, std::abs(static_cast<double>(a[j]) - b[j]));
  EXPECT_LE(worst, tol) << what;
}

TEST(ServingEngine, EmbeddingsBatchedEqualAloneOverLayouts) {
  auto alone_engine = make_engine(kStories, 0);
  auto prompts = make_prompts(*alone_engine, 6, 2, 120, 21);
  std::vector<std::vector<float>> ref;
  for (const auto& p : prompts) ref.push_back(embed_all(*alone_engine, {p}, 2048)[0]);
  for (const auto& e : ref) {
    ASSERT_EQ(e.size(), static_cast<size_t>(alone_engine->config().n_embd));
    double norm2 = 0;
    for (float x : e) norm2 += static_cast<double>(x) * x;
    EXPECT_NEAR(norm2, 1.0, 1e-5);
  }
  // Different prompts, different embeddings (the pooled rows are not mixed up).
  expect_close(ref[0], ref[0], 0, "self");
  double diff = 0;
  for (size_t j = 0; j < ref[0].size(); ++j) diff += std::abs(ref[0][j] - ref[1][j]);
  EXPECT_GT(diff, 1e-3);
  struct Layout {
    int tp, pp;
    int64_t budget, kv_blocks;
  };
  // Chunks of 16 tokens; a pool of 10 blocks (160 tokens) that must preempt.
  for (const Layout& l : {Layout{1, 1, 16, 0}, Layout{2, 1, 48, 0}, Layout{1, 2, 32, 0}, Layout{1, 1, 64, 10}}) {
    EngineOptions o;
    o.model_path = kStories;
    o.threads = 1;
    o.ctx_size = 256;
    o.kv_blocks = l.kv_blocks > 0 ? l.kv_blocks : 128;
    o.tp = l.tp;
    o.pp = l.pp;
    Engine engine(o);
    uint64_t preemptions = 0;
    const auto got = embed_all(engine, prompts, l.budget, &preemptions);
    const std::string what = "tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) + " budget " +
                             std::to_string(l.budget) + " blocks " + std::to_string(o.kv_blocks);
    for (size_t i = 0; i < prompts.size(); ++i)
      expect_close(got[i], ref[i], 2e-5, what + " prompt " + std::to_string(i));
    if (l.kv_blocks > 0) {
      EXPECT_GT(preemptions, 0u) << what;
    }
  }
}

TEST(ServingEngine, EmbeddingAdmission) {
  auto engine = make_engine(kStories, 8, 256);  // 8 blocks of 16: 128 tokens
  ServingOptions so;
  so.max_model_len = 100;
  ServingEngine serving(*engine, so);
  ServingRequest r;
  r.embed = true;
  r.max_tokens = 0;  // ignored
  r.prompt = make_prompts(*engine, 1, 100, 100, 1)[0];
  uint64_t id = 0;
  std::atomic<int> done{0};
  EXPECT_EQ(serving.submit(
                r, [&](const TokenEvent& ev) { done += ev.finished ? 1 : 0; }, &id),
            SubmitStatus::kOk);
  r.prompt.push_back(5);  // 101 > max_model_len
  EXPECT_EQ(serving.submit(
                r, [](const TokenEvent&) {}, &id),
            SubmitStatus::kTooLong);
  for (int i = 0; i < 500 && done == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(done, 1);
  wait_idle(serving);
  EXPECT_EQ(serving.metrics().prompt_tokens_total, 100u);
  EXPECT_EQ(serving.metrics().generation_tokens_total, 0u);
}

// PARALLM_STEP_TRACE: one CSV line per step with its shape. One request of a
// 20-token prompt and 5 tokens under a 64-token budget: one prefill step
// (20 tokens, no decode, one sampled row), then 4 one-token decodes.
TEST(ServingEngine, StepTraceWritesEachStepsShape) {
  const std::string path = ::testing::TempDir() + "parallm-step-trace.csv";
  std::remove(path.c_str());
  ::setenv("PARALLM_STEP_TRACE", path.c_str(), 1);
  {
    auto engine = make_engine(tiny_model_path(), 0);
    const auto prompts = make_prompts(*engine, 1, 20, 20, 3);
    ServingOptions so;
    so.max_num_batched_tokens = 64;
    Results res;
    ServingEngine serving(*engine, so);
    ServingRequest r;
    r.prompt = prompts[0];
    r.max_tokens = 5;
    r.ignore_eos = true;
    uint64_t id = 0;
    ASSERT_EQ(serving.submit(r, res.callback(0), &id), SubmitStatus::kOk);
    ASSERT_TRUE(res.wait(1));
  }
  ::unsetenv("PARALLM_STEP_TRACE");
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[256];
  ASSERT_NE(std::fgets(line, sizeof(line), f), nullptr);
  EXPECT_STREQ(line, "start_s,duration_s,forward_s,seqs,tokens,decodes,sampled\n");
  std::vector<std::array<long long, 4>> shapes;
  double last_start = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    double start = 0, duration = 0, forward = 0;
    long long seqs = 0, tokens = 0, decodes = 0, sampled = 0;
    ASSERT_EQ(std::sscanf(line, "%lf,%lf,%lf,%lld,%lld,%lld,%lld", &start, &duration, &forward, &seqs, &tokens,
                          &decodes, &sampled),
              7)
        << line;
    EXPECT_GT(start, last_start);
    EXPECT_GT(forward, 0);
    EXPECT_GE(duration, forward);
    last_start = start;
    shapes.push_back({seqs, tokens, decodes, sampled});
  }
  std::fclose(f);
  ASSERT_EQ(shapes.size(), 5u);
  EXPECT_EQ(shapes[0], (std::array<long long, 4>{1, 20, 0, 1}));
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(shapes[i], (std::array<long long, 4>{1, 1, 1, 1})) << i;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace parallm
