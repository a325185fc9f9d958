#include "engine/generate.h"

#include <chrono>
#include <numeric>
#include <vector>

#include "util/check.h"
#include "util/log.h"

namespace parallm {

GenerateOutput generate_one(Engine& engine, const std::vector<int32_t>& prompt, const GenerateParams& params,
                            const std::function<void(int32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  GenerateOutput out;
  out.prompt_ids = prompt;
  if (prompt.empty()) throw InputError("the prompt is empty (no tokens after tokenization)");
  const int64_t ctx = engine.ctx_size();
  if (static_cast<int64_t>(prompt.size()) >= ctx) {
    throw InputError(strfmt("the prompt has %zu tokens but the context holds %lld (raise --ctx-size or shorten it)",
                            prompt.size(), (long long)ctx));
  }
  if (params.max_new_tokens < 0) throw InputError("-n must be >= 0");
  params.sampling.validate();
  const int64_t bs = engine.block_size();
  PARALLM_CHECK(engine.n_kv_blocks() * bs >= ctx);
  std::vector<int32_t> table(static_cast<size_t>(engine.n_kv_blocks()));
  std::iota(table.begin(), table.end(), 0);
  const Tokenizer& tok = engine.tokenizer();
  const int32_t n_vocab = static_cast<int32_t>(engine.config().n_vocab);
  Sampler sampler(params.sampling);
  for (int32_t id : prompt) sampler.add_prompt_token(id);

  ForwardBatch batch;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  auto t0 = clock::now();
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  for (int64_t p0 = 0; p0 < n_prompt; p0 += params.prefill_chunk) {
    const int64_t n = std::min(params.prefill_chunk, n_prompt - p0);
    batch.clear();
    batch.add_sequence_tokens(prompt.data() + p0, n, static_cast<int32_t>(p0), 0, table.data(), bs, p0 + n == n_prompt);
    const float* lg = engine.forward(batch);
    if (p0 + n == n_prompt) std::copy(lg, lg + n_vocab, logits.begin());
  }
  auto t1 = clock::now();
  out.prompt_s = std::chrono::duration<double>(t1 - t0).count();
  out.finish_reason = "length";
  int64_t pos = n_prompt;
  while (static_cast<int64_t>(out.token_ids.size()) < params.max_new_tokens) {
    const int32_t id = sampler.sample(logits.data(), n_vocab);
    if (!params.ignore_eos && tok.is_stop_token(id)) {
      out.finish_reason = "stop";
      break;
    }
    out.token_ids.push_back(id);
    sampler.add_output_token(id);
    if (on_token) on_token(id);
    if (static_cast<int64_t>(out.token_ids.size()) >= params.max_new_tokens) break;
    if (pos >= ctx) break;  // context full: "length"
    batch.clear();
    batch.add_sequence_tokens(&id, 1, static_cast<int32_t>(pos), 0, table.data(), bs, true);
    const float* lg = engine.forward(batch);
    std::copy(lg, lg + n_vocab, logits.begin());
    ++pos;
    ++out.decode_steps;
  }
  out.decode_s = std::chrono::duration<double>(clock::now() - t1).count();
  return out;
}

}  // namespace parallm
