// `parallm bench-model`: prompt and decode speed of the engine on one model,
// each set against this machine's limit measured in the same run:
//   decode:  tokens/s from an empty context (as llama-bench's tg test) ÷
//            (memory bandwidth / bytes streamed per token), where
//            the bytes are every weight the ranks hold except the token
//            embedding table (read one row per token)
//   prefill: achieved FLOP/s ÷ measured FP32 FMA peak, with the FLOPs the
//            forward runs: 2 × parameters of the layers × tokens + 2 × the
//            output matrix's parameters (logits of the last token only) +
//            causal attention FLOPs
// With --tp/--pp/--ep it also reports each rank's bytes sent per token and its
// time in communication versus compute.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "command_registry.h"
#include "core/device.h"
#include "default_model.h"
#include "engine/engine.h"
#include "engine_cli.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/roofline.h"
#include "sampling/sampler.h"
#include "util/check.h"
#include "util/log.h"

#if PARALLM_HAVE_CUDA
#include "kernels/cuda/probe.h"
#endif

namespace parallm {
namespace {

struct BenchModelCli {
  EngineCli engine;
  int64_t prompt_len = 128, gen_len = 64;
  int repetitions = 3;
  int64_t batch = 0;  // > 0: also decode this many sequences together (batched decode)
  bool json = false;
  std::string synthetic;  // PRESET[:DTYPE]: weights filled on the device, no file
};

int run_bench_model(const BenchModelCli& b) {
  CommSession comm_session(b.engine.comm);
  EngineOptions eo = b.engine.to_options();
  if (!b.synthetic.empty()) {
    if (!eo.model_path.empty()) throw InputError("--synthetic replaces --model: give one of them");
    eo.synthetic = b.synthetic;
  } else if (eo.model_path.empty()) {
    eo.model_path = ensure_benchmark_model();
  }
  if (b.prompt_len < 1 || b.gen_len < 1 || b.repetitions < 1) {
    throw InputError("--prompt-len, --gen-len and --repetitions must be >= 1");
  }
  if (eo.ctx_size == 0) eo.ctx_size = b.prompt_len + b.gen_len + 1;
  if (eo.ctx_size < b.prompt_len + b.gen_len + 1)
    throw InputError("--ctx-size is smaller than --prompt-len + --gen-len");
  if (b.batch < 0 || b.batch > 4096) throw InputError("--batch must be in [0, 4096]");
  const int64_t blocks_per_seq = (eo.ctx_size + eo.block_size - 1) / eo.block_size;
  if (b.batch > 0 && eo.kv_blocks == 0) eo.kv_blocks = blocks_per_seq * b.batch;
  Engine engine(eo);
  if (!engine.is_driver()) {
    engine.serve_forever();
    return 0;
  }
  log_info(engine.summary());
  const ModelConfig& c = engine.config();
  const int threads = eo.threads > 0 ? eo.threads : std::max(1, default_thread_count() / engine.world_size());

  // A fixed pseudo-random prompt (token ids are all that matter for speed).
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(c.n_vocab - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(b.prompt_len));
  for (auto& t : prompt) t = pick(rng);
  std::vector<int32_t> table(static_cast<size_t>(engine.n_kv_blocks()));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  const int64_t bs = engine.block_size();
  using clock = std::chrono::steady_clock;
  // Probe passes (~10 ms each) before each headline decode run and after the
  // last: 24 with the default 3 repetitions, as many as the stand-alone probe.
  const int kProbePasses = std::max(1, 24 / (b.repetitions + 1));

  // Prefill: the whole prompt in one forward, best of prefill_runs, each
  // after a pass of the FMA probe on the same threads (and the last passes
  // after them), so that the peak and the prefill see the same moments of a
  // shared host, as the bandwidth probe and decode do below. NOTE: with the
  // probe run once after the decode runs, F16 prefill fractions of one build
  // spread over 0.56-0.68 in a noisy phase of the Ice Lake host.
  // NOTE: at least kMinPrefillRuns runs (a 128-token prompt is ~0.1 s): on
  // the shared Ice Lake host the best of 3 put one F16 build at 0.52-0.64 of
  // the FMA peak within half an hour, and the best of 10 at 0.63-0.67; a
  // neighbour's burst on the shared cache slows the GEMM more than the FMA
  // probe, which runs in registers.
  constexpr int kMinPrefillRuns = 10;
  const int prefill_runs = std::max(b.repetitions, kMinPrefillRuns);
  cpu::FmaProbe fma_probe(engine.driver_pool());
  ForwardBatch batch;
  double prefill_s = 1e30;
  for (int r = 0; r < prefill_runs; ++r) {
    fma_probe.run(1);
    batch.clear();
    batch.add_sequence_tokens(prompt.data(), b.prompt_len, 0, 0, table.data(), bs, true);
    auto t0 = clock::now();
    engine.forward(batch);
    prefill_s = std::min(prefill_s, std::chrono::duration<double>(clock::now() - t0).count());
  }
  fma_probe.run(std::max(1, cpu::FmaProbe::kPasses - prefill_runs));
  // Decode: gen_len single-token steps, greedy, best of --repetitions. As in
  // llama-bench's tg test, the headline number starts from an empty context
  // (the weights dominate); the same steps after the prompt are reported too,
  // as decode_after_prompt_tokens_per_s, where attention over the prompt adds.
  auto decode_run = [&](int64_t pos0, cpu::BandwidthProbe* probe) {
    double best = 1e30;
    for (int r = 0; r < b.repetitions; ++r) {
      if (probe) probe->run(kProbePasses);
      int32_t tok = prompt.back();
      auto t0 = clock::now();
      for (int64_t i = 0; i < b.gen_len; ++i) {
        batch.clear();
        batch.add_sequence_tokens(&tok, 1, static_cast<int32_t>(pos0 + i), 0, table.data(), bs, true);
        const float* logits = engine.forward(batch);
        tok = argmax(logits, static_cast<int32_t>(c.n_vocab));
      }
      best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
    }
    if (probe) probe->run(kProbePasses);
    return best;
  };
  const double decode_after_prompt_s = decode_run(b.prompt_len, nullptr);

  // Batched decode (--batch N): N sequences, each with its own prompt already
  // in its own KV blocks, take gen_len steps of N tokens together: the
  // serving engine's steady state at concurrency N, without HTTP.
  double batch_decode_s = 0, min_step_s = 1e30;
  if (b.batch > 0) {
    if (engine.n_kv_blocks() < blocks_per_seq * b.batch) throw InputError("not enough KV blocks for --batch");
    const int64_t n = b.batch;
    for (int64_t s = 0; s < n; ++s) {
      batch.clear();
      batch.add_sequence_tokens(prompt.data(), b.prompt_len, 0, 0, table.data() + s * blocks_per_seq, bs, true);
      engine.forward(batch);
    }
    std::vector<int32_t> toks(static_cast<size_t>(n), prompt.back());
    batch_decode_s = 1e30;
    for (int r = 0; r < b.repetitions; ++r) {
      auto t0 = clock::now();
      for (int64_t i = 0; i < b.gen_len; ++i) {
        batch.clear();
        for (int64_t s = 0; s < n; ++s) {
          batch.add_sequence_tokens(&toks[static_cast<size_t>(s)], 1, static_cast<int32_t>(b.prompt_len + i),
                                    static_cast<int32_t>(s), table.data() + s * blocks_per_seq, bs, true);
        }
        const auto ts = clock::now();
        const float* logits = engine.forward(batch);
        min_step_s = std::min(min_step_s, std::chrono::duration<double>(clock::now() - ts).count());
        for (int64_t s = 0; s < n; ++s)
          toks[static_cast<size_t>(s)] = argmax(logits + s * c.n_vocab, static_cast<int32_t>(c.n_vocab));
      }
      batch_decode_s = std::min(batch_decode_s, std::chrono::duration<double>(clock::now() - t0).count());
    }
  }
  // This machine's limits, with the same thread count as one rank. NOTE: the
  // bandwidth probe's passes run between the headline decode runs (on the
  // driver's own threads, so no other pool spins beside them): on a shared
  // host the bandwidth drifts by 10-20% within seconds, and a probe run after
  // decode compared two different moments (fractions from 0.5 to 1.1 of the
  // same build).
  cpu::BandwidthProbe probe(engine.driver_pool());
  engine.reset_stats();
  const double decode_s = decode_run(0, &probe);
  const std::vector<RankStats> stats = engine.rank_stats();
  const double decode_steps = static_cast<double>(b.gen_len * b.repetitions);
  double bandwidth = probe.best_gb_per_s();
  double fma_peak = fma_probe.best_gflops() * engine.world_size();
  // GPU ranks are set against their device's own limits, measured in this
  // run (kernels/cuda/probe.h): read bandwidth and tensor-core GEMM FLOP/s,
  // and the cost of one kernel launch.
  nlohmann::json device_probes;
  const std::vector<DeviceId> ids = eo.devices.empty() ? std::vector<DeviceId>{} : parse_device_list(eo.devices);
  if (!ids.empty() && ids[0].kind == DeviceId::Kind::kCuda) {
#if PARALLM_HAVE_CUDA
    const cuda::DeviceProbes p = cuda::measure_device_probes(ids[0].index);
    bandwidth = p.read_gb_per_s;
    fma_peak = p.gemm_tflops_bf16 * 1e3 * engine.world_size();
    device_probes = {{"device", p.device_name},
                     {"read_gb_per_s", p.read_gb_per_s},
                     {"gemm_tflops_bf16", p.gemm_tflops_bf16},
                     {"launch_us", p.launch_us}};
#endif
  }

  size_t streamed = 0;
  for (size_t w : engine.rank_weight_bytes()) streamed += w;
  // Ranks of one process share the machine's memory bus; MPI ranks on other hosts would not.
  const double ranks_per_bus = static_cast<double>(engine.rank_weight_bytes().size());
  const double bytes_per_token = static_cast<double>(streamed);
  const double decode_tps = static_cast<double>(b.gen_len) / decode_s;
  const double roofline_tps = bandwidth * 1e9 / bytes_per_token;
  // Parameters every token multiplies (layers), and the output matrix's,
  // which the prefill applies to the last token only (its logits).
  double layer_params = 0, output_params = 0;
  for (const auto& [name, t] : engine.model_file().tensors()) {
    if (t.shape.size() < 2) continue;
    double n = 1;
    for (int64_t d : t.shape) n *= static_cast<double>(d);
    if (name == "output.weight" || (name == "token_embd.weight" && c.tied_embeddings)) {
      output_params += n;
      continue;
    }
    if (name == "token_embd.weight") continue;  // read one row per token
    // An MoE token runs only n_expert_used of the n_expert experts.
    if (c.is_moe() && name.find("_exps") != std::string::npos) n *= static_cast<double>(c.n_expert_used) / c.n_expert;
    layer_params += n;
  }
  const double T = static_cast<double>(b.prompt_len);
  const double attn_flops = 4.0 * c.n_layer * c.n_head * c.head_dim * T * (T + 1) / 2;
  // NOTE: until 2026-11-30 the output matrix was counted for every prompt
  // token (2 x all parameters x tokens), FLOPs the forward does not run: on
  // llama-110m that overstated the prefill fraction by 1.29x. The old count
  // stays in the JSON as prefill_peak_fraction_all_logits, for comparisons
  // with numbers computed that way.
  const double prefill_flops = 2.0 * layer_params * T + 2.0 * output_params + attn_flops;
  const double all_logits_flops = 2.0 * (layer_params + output_params) * T + attn_flops;
  const double prefill_gflops = prefill_flops / prefill_s / 1e9;
  const double prompt_tps = T / prefill_s;

  nlohmann::json j;
  j["model"] = engine.model_file().path;
  j["isa"] = cpu::isa_name(cpu::active_isa());
  j["threads_per_rank"] = threads;
  j["layout"] = {{"tp", eo.tp}, {"pp", eo.pp}, {"ep", eo.ep}};
  j["prompt_len"] = b.prompt_len;
  j["gen_len"] = b.gen_len;
  j["prefill_runs"] = prefill_runs;
  j["prompt_tokens_per_s"] = prompt_tps;
  j["decode_tokens_per_s"] = decode_tps;
  j["decode_after_prompt_tokens_per_s"] = static_cast<double>(b.gen_len) / decode_after_prompt_s;
  j["bandwidth_gb_per_s"] = bandwidth;
  j["bandwidth_one_stream_gb_per_s"] = probe.best_one_stream_gb_per_s();
  j["fma_peak_gflops"] = fma_peak;
  j["bytes_per_token"] = bytes_per_token;
  j["decode_roofline_tokens_per_s"] = roofline_tps;
  j["decode_roofline_fraction"] = decode_tps / roofline_tps;
  j["decode_gb_per_s"] = bytes_per_token * decode_tps / 1e9;
  if (b.batch > 0) {
    const double batch_tps = static_cast<double>(b.batch * b.gen_len) / batch_decode_s;
    j["batch"] = b.batch;
    j["batch_decode_tokens_per_s"] = batch_tps;
    j["batch_decode_vs_prompt"] = batch_tps / prompt_tps;
    j["batch_fastest_step_ms"] = min_step_s * 1e3;
  }
  if (!device_probes.is_null()) j["device_probes"] = device_probes;
  j["prefill_gflops"] = prefill_gflops;
  j["prefill_peak_fraction"] = prefill_gflops / fma_peak;
  j["prefill_peak_fraction_all_logits"] = all_logits_flops / prefill_s / 1e9 / fma_peak;
  (void)ranks_per_bus;
  if (engine.world_size() > 1) {
    nlohmann::json ranks = nlohmann::json::array();
    for (size_t i = 0; i < stats.size(); ++i) {
      const double steps = decode_steps;
      ranks.push_back({{"rank", i},
                       {"bytes_sent_per_token", static_cast<double>(stats[i].bytes_sent) / steps},
                       {"tp_bytes_sent_per_token", static_cast<double>(stats[i].group_bytes_sent) / steps},
                       {"comm_ms_per_token", stats[i].comm_s * 1e3 / steps},
                       {"compute_ms_per_token", stats[i].compute_s * 1e3 / steps}});
    }
    j["ranks"] = ranks;
  }
  if (c.is_moe()) {
    MoeStats ms = engine.moe_stats();
    j["expert_tokens"] = ms.tokens_per_expert;
    j["expert_imbalance"] = ms.imbalance();
  }
  if (b.json) {
    std::cout << j.dump(1) << std::endl;
    return 0;
  }
  std::printf("model            %s (%s, %d thread(s)/rank, tp=%d pp=%d ep=%d)\n", engine.model_file().path.c_str(),
              cpu::isa_name(cpu::active_isa()), threads, eo.tp, eo.pp, eo.ep);
  if (device_probes.is_null()) {
    std::printf("machine          %.1f GB/s read bandwidth, %.1f GFLOP/s FP32 FMA peak\n", bandwidth, fma_peak);
  } else {
    std::printf("device           %s: %.1f GB/s read bandwidth, %.1f GFLOP/s bf16 tensor-core GEMM, %.2f us/launch\n",
                device_probes["device"].get<std::string>().c_str(), bandwidth, fma_peak,
                device_probes["launch_us"].get<double>());
  }
  std::printf("prefill %4lld tok  %8.1f tokens/s  %7.1f GFLOP/s  = %5.1f%% of %s peak\n", (long long)b.prompt_len,
              prompt_tps, prefill_gflops, 100 * prefill_gflops / fma_peak, device_probes.is_null() ? "FMA" : "GEMM");
  std::printf(
      "decode  %4lld tok  %8.1f tokens/s  %7.1f GB/s     = %5.1f%% of bandwidth roofline (%.1f tokens/s, %s/token)\n",
      (long long)b.gen_len, decode_tps, bytes_per_token * decode_tps / 1e9, 100 * decode_tps / roofline_tps,
      roofline_tps, format_bytes(bytes_per_token).c_str());
  std::printf("decode after the prompt (context %lld..%lld): %.1f tokens/s\n", (long long)b.prompt_len,
              (long long)(b.prompt_len + b.gen_len), static_cast<double>(b.gen_len) / decode_after_prompt_s);
  if (b.batch > 0) {
    const double batch_tps = static_cast<double>(b.batch * b.gen_len) / batch_decode_s;
    std::printf("decode x%-4lld (context %lld..%lld): %.1f tokens/s = %.2f of the prompt rate (fastest step %.2f ms)\n",
                (long long)b.batch, (long long)b.prompt_len, (long long)(b.prompt_len + b.gen_len), batch_tps,
                batch_tps / prompt_tps, min_step_s * 1e3);
  }
  if (engine.world_size() > 1) {
    for (size_t i = 0; i < stats.size(); ++i) {
      std::printf("rank %zu           %s sent/token, %.3f ms comm + %.3f ms compute per token\n", i,
                  format_bytes(static_cast<double>(stats[i].bytes_sent) / decode_steps).c_str(),
                  stats[i].comm_s * 1e3 / decode_steps, stats[i].compute_s * 1e3 / decode_steps);
    }
  }
  if (c.is_moe())
    std::printf("experts          load imbalance %.2f (max / mean tokens)\n", engine.moe_stats().imbalance());
  return 0;
}

const bool registered = register_command(
    {"bench-model", "Measure prompt and decode speed against this machine's limits",
     [](CLI::App& sub) -> CommandAction {
       auto b = std::make_shared<BenchModelCli>();
       b->engine.add_to(sub, /*model_required=*/false);
       sub.add_option("--prompt-len", b->prompt_len, "Prompt tokens")->capture_default_str();
       sub.add_option("--gen-len", b->gen_len, "Generated tokens")->capture_default_str();
       sub.add_option("--repetitions", b->repetitions, "Runs of each phase, best reported (prefill: at least 10)")
           ->capture_default_str();
       sub.add_option("--batch", b->batch, "Also decode this many sequences together after their prompts");
       sub.add_flag("--json", b->json, "Print one JSON object");
       sub.add_option(
           "--synthetic", b->synthetic,
           "Benchmark a make-model preset's shape with weights filled on the device, no file: "
           "PRESET[:DTYPE] (f32, f16, bf16 (default), q8_0), e.g. llama-8b; needs --devices cuda:N or emu:N");
       return [b] { return run_bench_model(*b); };
     }});

}  // namespace
}  // namespace parallm
