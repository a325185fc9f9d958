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
//   + decode context x kv_token         KV reads of each decoding sequence
//   + sampled rows x stream_token       sampling each token, handing it to
//                                       its stream and streaming it (server
//                                       and client threads on the engine's
//                                       cores)
//   + step_overhead                     serve's step loop around a forward
// (the last two measured on serve's own step loop, less the bare forward).
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
  double decode_kv_token_ns = 0;  // per context token of each decoding sequence
  double stream_token_us = 0;     // per sampled token: its sampling and streaming (0 in older files)
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
  // to its caches meanwhile). 1 and 0 in older files.
  double idle_factor = 1;
  double idle_after_s = 0;
  // What serve's front end adds to a request's TTFT besides its prefill step:
  // the request's way in (HTTP, chat template, tokenizing), the step loop's
  // wake-up and the first token's way out to the client. Timed through
  // serve's own HTTP server with bench's client, less the prompt's forward
  // and the step terms above (apps/front_end_probe.h). -1: not measured
  // (older files; the planner's constant then).
  double request_overhead_us = -1;
  std::string measured_at;  // ISO time
};

// Seconds of forward_ms_by_tokens at `tokens`: linear between points, and past
// the last point along the last segment's slope.
double profile_forward_s(const ModelProfile& p, double tokens);

}  // namespace parallm::planner
