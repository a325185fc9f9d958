// ModelProfile: one model file's step times measured in the real engine on
// this machine (`plan --calibrate --model FILE`, apps/plan_profile.cpp), for
// `simulate --local` on that file. The datasheet roofline of perf_model.h
// prices a step from the machine's limits and per-dtype efficiencies; on a
// CPU the model's weights may sit in the last-level cache (llama-110m q8_0,
// 116 MB, decodes at ~48 GB/s on a host whose probe streams ~27 from RAM),
// and small batches are neither bandwidth- nor peak-bound, so the step times
// the simulator needs are measured on the model itself, the way Vidur profiles
// operators before simulating (a profile per model and machine). A step is
//   forward(tokens)                     weight matmuls, norms, per-layer work,
//                                       one logits row (a table by tokens)
//   + (sampled rows - 1) x logit_row    the output head for each other row
//   + prefill pairs x pair              causal attention of prompt chunks
//   + decode attention(context)         KV reads of the decoding sequences,
//                                       by their context in all (a table)
//   + sampled rows x stream_token       sampling each token, handing it to
//                                       its stream and streaming it (server
//                                       and client threads on the engine's
//                                       cores)
//   + step_overhead                     serve's step loop around a forward
// (the last two measured on serve's own step loop, less the bare forward),
// and a decode step soon after a prefill its cold extra (ColdDecode).
// Each request's TTFT also pays request_overhead, serve's front end. A
// step's repetitions spread by the machine's jitter: step to step
// (noise_sigma), and the slow drift of a shared host's speed over seconds
// (drift_sigma per drift_period_s), which moves whole requests' TPOT.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace parallm::planner {

// Decode steps right after a prompt's prefill run slower than the same steps
// warm, for a few steps: on this host the first two decode steps after a
// prompt of ~190 tokens took +1.7-1.9 ms over a 2.3 ms warm step, and the
// extra faded within 3-12 steps, the slower the more context the steps read
// (the cache residency of the weights and KV that the prefill disturbed,
// rebuilt pass by pass). Measured after a prefill of prompt_tokens, as
// (context tokens the decode step reads in all, extra ms of the 1st, 2nd, ...
// decode step after the prefill), context ascending.
struct ColdDecode {
  double prompt_tokens = 0;
  std::vector<std::pair<double, std::vector<double>>> extra_ms;

  bool empty() const { return extra_ms.empty(); }
  // Extra seconds of the `k`-th (0-based) decode-only step after a step that
  // prefilled `prompt_tokens`, reading `ctx_tokens` of context in all: the
  // curves interpolated in context (from no extra at 0 context to the first
  // curve; the last curve past it), scaled by the prompt's share of
  // prompt_tokens (at most 1).
  double extra_s(int64_t k, double prompt, double ctx_tokens) const;
};

struct ModelProfile {
  std::string model_path;  // absolute, as measured
  int64_t file_bytes = 0;  // of model_path then: a changed file is not this profile
  int threads = 0;         // engine threads the profile ran with
  // (tokens, ms): one forward of that many tokens at position 0 (decode-sized
  // batches as 1-token sequences, larger ones as 16-token chunks), one logits
  // row, attention subtracted. Tokens ascending.
  std::vector<std::pair<double, double>> forward_ms_by_tokens;
  double logit_row_ms = 0;        // each logits row after the first
  double prefill_pair_ns = 0;     // per query-key pair of a prompt chunk (n_new x pos0 + n_new^2 / 2)
  double decode_kv_token_ns = 0;  // per context token (older files; now the slope to the table's last point)
  // (context tokens, ms): what decode attention adds to a step whose decoding
  // sequences read that much context in all, ascending. Not a constant per
  // token: while the step's KV fits the caches beside the weights it is
  // cheap (here ~0.7 ns a token of one sequence's 200), past them it streams
  // from memory (~2 ns a token at 4 x 500). Empty in older files.
  std::vector<std::pair<double, double>> decode_kv_ms_by_ctx;
  double stream_token_us = 0;  // per sampled token: its sampling and streaming (0 in older files)
  // Per step: serve's step loop besides the forward, less what a forward of
  // the table costs over one of serve's back-to-back steps (so it may be
  // negative, down to half of the 1-token forward). 0 in older files.
  double step_overhead_us = 0;
  // Standard deviation of log(step time) over repetitions of one shape, less
  // their round's drift (median over shapes): the step-to-step jitter.
  double noise_sigma = 0;
  // Standard deviation of a measuring round's log speed factor (every shape
  // once, drift_period_s long): the host's slow drift. 0 in older files.
  double drift_sigma = 0;
  double drift_period_s = 0;
  // A forward that begins after the engine idled idle_after_s or longer takes
  // idle_factor x its time: a prompt chunk timed after that pause against the
  // same chunk right after another forward (what the host's other tenants did
  // to its caches meanwhile). The simulator charges it on every step of the
  // busy period that pause begins (sim/replica.h). 1 and 0 in older files.
  double idle_factor = 1;
  double idle_after_s = 0;
  // What serve's front end adds to a request's TTFT besides its prefill step:
  // the request's way in (HTTP, chat template, tokenizing), the step loop's
  // wake-up and the first token's way out to the client. Timed through
  // serve's own HTTP server with bench's client, less the prompt's forward
  // and the step terms above (apps/front_end_probe.h). -1: not measured
  // (older files; the planner's constant then).
  double request_overhead_us = -1;
  // Decode steps right after a prefill, cold (ColdDecode); empty in older
  // files (no such extra then).
  ColdDecode cold_decode;
  std::string measured_at;  // ISO time
};

// Seconds of forward_ms_by_tokens at `tokens`: linear between points, and past
// the last point along the last segment's slope.
double profile_forward_s(const ModelProfile& p, double tokens);

// Seconds decode attention adds to a step reading `ctx_tokens` of context:
// decode_kv_ms_by_ctx linear between (0, 0) and its points, past the last
// along the last segment's slope; decode_kv_token_ns a token without it.
double profile_decode_kv_s(const ModelProfile& p, double ctx_tokens);

}  // namespace parallm::planner
