// `parallm generate`: load a model, tokenize a prompt, generate. stdout holds
// the completion only (the prompt first with --echo) or, with --json, one JSON
// object; stderr holds the load summary and the speeds.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "default_model.h"
#include "engine/generate.h"
#include "engine_cli.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {
namespace {

struct GenerateCli {
  EngineCli engine;
  std::string prompt, dump_logits;
  int64_t n = 128;
  float temperature = 0.8f, top_p = 1.0f, min_p = 0.0f, repeat_penalty = 1.0f, presence = 0.0f, frequency = 0.0f;
  int32_t top_k = 0;
  uint64_t seed = 0;
  bool echo = false, json = false, ignore_eos = false;
};

// Writes the logits of every prompt position as raw little-endian float32
// [n_prompt, n_vocab]: what the NumPy reference and the parallel-layout tests compare.
void dump_prompt_logits(Engine& engine, const std::vector<int32_t>& prompt, const std::string& path) {
  if (static_cast<int64_t>(prompt.size()) > engine.ctx_size())
    throw InputError("the prompt is longer than the context");
  std::vector<int32_t> table(static_cast<size_t>(engine.n_kv_blocks()));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  ForwardBatch batch;
  batch.add_sequence_tokens(prompt.data(), static_cast<int64_t>(prompt.size()), 0, 0, table.data(), engine.block_size(),
                            false);
  for (size_t i = 0; i < prompt.size(); ++i) batch.logit_rows.push_back(static_cast<int32_t>(i));
  const float* logits = engine.forward(batch);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw InputError("cannot write '" + path + "'");
  const size_t n = prompt.size() * static_cast<size_t>(engine.config().n_vocab);
  const bool ok = std::fwrite(logits, sizeof(float), n, f) == n;
  if (std::fclose(f) != 0 || !ok) throw InputError("cannot write '" + path + "'");
}

int run_generate(const GenerateCli& g) {
  CommSession comm_session(g.engine.comm);
  EngineOptions eo = g.engine.to_options();
  if (eo.model_path.empty()) {
    eo.model_path = default_model_path();
    if (eo.ctx_size == 0) eo.ctx_size = kDefaultModelCtxTokens;
  }
  GenerateParams params;
  params.max_new_tokens = g.n;
  params.ignore_eos = g.ignore_eos;
  params.sampling.temperature = g.temperature;
  params.sampling.top_k = g.top_k;
  params.sampling.top_p = g.top_p;
  params.sampling.min_p = g.min_p;
  params.sampling.repetition_penalty = g.repeat_penalty;
  params.sampling.presence_penalty = g.presence;
  params.sampling.frequency_penalty = g.frequency;
  params.sampling.seed = g.seed;
  params.sampling.validate();

  auto t_load = std::chrono::steady_clock::now();
  Engine engine(eo);
  if (!engine.is_driver()) {  // MPI follower: only rank 0 prints
    engine.serve_forever();
    return 0;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  log_info(engine.summary());
  const Tokenizer& tok = engine.tokenizer();
  std::vector<int32_t> prompt = tok.encode(g.prompt, /*add_special=*/true);
  if (!g.dump_logits.empty()) dump_prompt_logits(engine, prompt, g.dump_logits);
  StreamDecoder stream(tok);
  if (!g.json && g.echo) {
    std::fputs(tok.decode(prompt).c_str(), stdout);
    std::fflush(stdout);
  }
  GenerateOutput out = generate_one(engine, prompt, params, [&](int32_t id) {
    if (g.json) return;
    std::fputs(stream.push(id).c_str(), stdout);
    std::fflush(stdout);
  });
  const double prompt_tps = out.prompt_s > 0 ? static_cast<double>(prompt.size()) / out.prompt_s : 0;
  const double gen_tps = out.decode_s > 0 ? static_cast<double>(out.token_ids.size()) / out.decode_s : 0;
  if (g.json) {
    nlohmann::json j;
    j["prompt_token_ids"] = out.prompt_ids;
    j["token_ids"] = out.token_ids;
    j["generated_token_ids"] = out.token_ids;
    // NOTE: streamed like the text output (and the server): decode() of the
    // completion alone would drop its first token's leading space.
    StreamDecoder json_stream(tok);
    std::string text = g.echo ? tok.decode(out.prompt_ids) : std::string();
    for (int32_t id : out.token_ids) text += json_stream.push(id);
    text += json_stream.flush();
    j["text"] = text;
    j["finish_reason"] = out.finish_reason;
    j["timings"] = {{"load_ms", load_s * 1e3},
                    {"prompt_ms", out.prompt_s * 1e3},
                    {"prompt_tokens", out.prompt_ids.size()},
                    {"prompt_tokens_per_s", prompt_tps},
                    {"generation_ms", out.decode_s * 1e3},
                    {"generated_tokens", out.token_ids.size()},
                    {"generation_tokens_per_s", gen_tps}};
    std::cout << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::fputs(stream.flush().c_str(), stdout);
    std::fputs("\n", stdout);
  }
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tokens/s | generation: %zu tokens, %.1f tokens/s (%s)\n",
               prompt.size(), prompt_tps, out.token_ids.size(), gen_tps, out.finish_reason.c_str());
  return 0;
}

const bool registered = register_command(
    {"generate", "Generate text from a prompt", [](CLI::App& sub) -> CommandAction {
       auto g = std::make_shared<GenerateCli>();
       g->engine.add_to(sub, /*model_required=*/false);
       sub.add_option("--prompt,-p", g->prompt, "Prompt text")->required();
       sub.add_option("-n,--n-predict", g->n, "New tokens to generate")->capture_default_str();
       sub.add_option("--temperature,--temp", g->temperature, "Sampling temperature (0 = greedy)")
           ->capture_default_str();
       sub.add_option("--top-k", g->top_k, "Top-k (0 = off)");
       sub.add_option("--top-p", g->top_p, "Top-p / nucleus (1 = off)");
       sub.add_option("--min-p", g->min_p, "Min-p (0 = off)");
       sub.add_option("--repeat-penalty", g->repeat_penalty, "Repetition penalty (1 = off)");
       sub.add_option("--presence-penalty", g->presence, "Presence penalty");
       sub.add_option("--frequency-penalty", g->frequency, "Frequency penalty");
       sub.add_option("--seed,-s", g->seed, "Random seed (same seed, same output)");
       sub.add_flag("--echo", g->echo, "Print the prompt before the completion");
       sub.add_flag("--json", g->json, "Print one JSON object instead of text");
       sub.add_flag("--ignore-eos", g->ignore_eos, "Keep generating past stop tokens");
       sub.add_option("--dump-logits", g->dump_logits, "Write the prompt positions' logits (raw f32) to FILE");
       return [g] { return run_generate(*g); };
     }});

}  // namespace
}  // namespace parallm
