// Equations of perf_model.h.
#include "planner/perf_model.h"

#include <algorithm>
#include <cmath>

namespace parallm::planner {

namespace {

// Weight bytes read and GEMM FLOPs per forward on one device; the routed
// experts apart, since their grouped GEMMs are kernels of their own with an
// efficiency of their own (PerfConstants::moe_gemm_eff).
struct StageWork {
  double weight_bytes = 0, gemm_flops = 0;
  double expert_bytes = 0, expert_flops = 0;
  double tokens = 0;         // rows of the dense GEMMs
  double expert_tokens = 0;  // rows of each touched expert's GEMM
};

double ring_allreduce_s(const PerfInputs& in, double bytes, int n) {
  if (n <= 1) return 0;
  const double bw = in.tp_link.bw_gbps * 1e9 * in.k.link_eff;
  return 2.0 * (n - 1) / n * bytes / bw + in.tp_link.latency_us * 1e-6;
}

// Weight bytes and GEMM FLOPs of one stage on one device for `tokens` tokens,
// `logit_tokens` of which need logits (decode: all; prefill: the last token of
// each prompt, as every engine computes them).
StageWork stage_work(const PerfInputs& in, double tokens, double logit_tokens) {
  const ModelConfig& m = in.model->config;
  const ParamCounts& p = in.params;
  const double bpp = weight_bytes_per_param(*in.model, p, in.weights);
  const double frac = static_cast<double>(in.memory.layers_per_stage) / static_cast<double>(m.n_layer);
  const int tp = in.layout.tp;
  const double expert_split = std::max(tp, in.layout.ep);
  const double non_expert =
      static_cast<double>(p.total - p.embedding - p.lm_head - p.final_norm - p.routed_experts_total) * frac;
  StageWork w;
  // Reads: the input embedding is a lookup (a few rows), the lm_head is read whole.
  // With pp the lm_head lives on the last stage only: spread it over the stages so
  // that pp stage times read it once.
  const double head_read = static_cast<double>(p.lm_head > 0 ? p.lm_head : p.embedding) / in.layout.pp;
  w.weight_bytes = bpp * (non_expert + head_read) / tp;
  if (m.is_moe()) {
    const double e = static_cast<double>(m.n_expert), k = static_cast<double>(m.n_expert_used);
    // Attention-DP + EP: the experts of this device serve the tokens of every
    // attention replica of the EP group.
    const double group = in.layout.ep > tp ? static_cast<double>(in.layout.ep) / tp : 1.0;
    const double touched = e * (1.0 - std::pow(1.0 - k / e, std::max(1.0, tokens * group)));
    const double moe_layers = static_cast<double>(n_moe_layers(m)) * frac;
    w.expert_bytes = bpp * moe_layers * touched * static_cast<double>(p.expert) / expert_split;
    const double imbalance = in.layout.ep > 1 ? std::max(1.0, in.expert_imbalance) : 1.0;
    w.expert_flops = 2.0 * tokens * moe_layers * k * static_cast<double>(p.expert) * imbalance / tp;
    w.expert_tokens = std::max(1.0, tokens * group * k / std::max(1.0, touched));
  }
  w.tokens = std::max(1.0, tokens);
  w.gemm_flops = 2.0 * (tokens * non_expert + logit_tokens * head_read) / tp;
  return w;
}

// FLOP/s of the calibrated GEMM at `tokens` rows: the seconds per token-row
// (n / rate) are linear between measured points; below the first point its
// rate, past the last the last rate.
double calibrated_gemm_flops_per_s(const PerfConstants& k, double tokens) {
  const auto& c = k.gemm_gflops_by_tokens;
  if (tokens <= c.front().first) return c.front().second * 1e9;
  for (size_t i = 1; i < c.size(); ++i) {
    if (tokens > c[i].first) continue;
    const double t0 = c[i - 1].first / c[i - 1].second, t1 = c[i].first / c[i].second;  // s per GFLOP-row
    const double f = (tokens - c[i - 1].first) / (c[i].first - c[i - 1].first);
    return tokens / (t0 + f * (t1 - t0)) * 1e9;
  }
  return c.back().second * 1e9;
}

double roofline_s(const PerfInputs& in, double bytes, double flops, double bw_eff, double peak_flops_per_s) {
  const double bw = in.gpu.mem_bw_gbps * 1e9 * bw_eff;
  return std::max(bytes / bw, flops / peak_flops_per_s);
}

// Weight GEMMs run in the weights' compute type. FP8 GEMMs reach a smaller
// share of their datasheet peak than 16-bit ones (fp8_flops_eff): the peak
// assumes boost clocks the card cannot hold at its power limit, and the
// scaled-FP8 epilogues cost extra.
double gemm_kernel_s(const PerfInputs& in, double bytes, double flops, double scale, double tokens) {
  if (!in.k.gemm_gflops_by_tokens.empty())
    return roofline_s(in, bytes, flops, in.k.bw_eff, scale * calibrated_gemm_flops_per_s(in.k, tokens));
  const bool fp8 = in.weights.compute == ComputeType::kFp8 && in.gpu.fp8_tflops > 0;
  const double eff = scale * (fp8 && in.k.fp8_flops_eff > 0 ? in.k.fp8_flops_eff : in.k.flops_eff);
  return roofline_s(in, bytes, flops, in.k.bw_eff, peak_flops(in.gpu, in.weights.compute) * eff);
}

// The dense GEMMs, then the experts' grouped GEMMs, each at its own roofline.
double gemm_s(const PerfInputs& in, const StageWork& w) {
  double t = gemm_kernel_s(in, w.weight_bytes, w.gemm_flops, 1.0, w.tokens);
  if (w.expert_bytes > 0 || w.expert_flops > 0)
    t += gemm_kernel_s(in, w.expert_bytes, w.expert_flops, in.k.moe_gemm_eff, w.expert_tokens);
  return t;
}

// Attention at its own efficiencies where calibrated. Its math (QK^T, softmax,
// PV) runs in 16-bit whatever the weights are: fp8 weights and an fp8 KV cache
// are dequantized into fp16 tiles, so the fp16 peak applies.
double attention_s(const PerfInputs& in, double bytes, double flops) {
  const ComputeType t = in.weights.compute == ComputeType::kFp32 ? ComputeType::kFp32 : ComputeType::kFp16;
  return roofline_s(in, bytes, flops, in.k.attn_bw_eff > 0 ? in.k.attn_bw_eff : in.k.bw_eff,
                    peak_flops(in.gpu, t) * (in.k.attn_flops_eff > 0 ? in.k.attn_flops_eff : in.k.flops_eff));
}

// Communication of one stage for `tokens` tokens: tp all-reduces (attention
// output and MLP output of each layer) and expert all-to-alls.
double stage_comm_s(const PerfInputs& in, double tokens) {
  const ModelConfig& m = in.model->config;
  const double layers = static_cast<double>(in.memory.layers_per_stage);
  const double msg = tokens * static_cast<double>(m.n_embd) * in.act_elem_bytes;
  double t = 0;
  const int tp = in.layout.tp, ep = in.layout.ep;
  if (tp > 1) t += layers * 2.0 * ring_allreduce_s(in, msg, tp);
  if (m.is_moe() && ep > 1) {
    // Dispatch + combine: each token's k copies, (ep-1)/ep of them leave the device.
    const double moe_layers = static_cast<double>(n_moe_layers(m)) * layers / static_cast<double>(m.n_layer);
    const double bytes = msg * static_cast<double>(m.n_expert_used) * (ep - 1) / ep / tp;
    const GroupLink& link = in.ep_link.size > 1 ? in.ep_link : in.tp_link;
    const double f_net = in.ep_net_link.bw_gbps > 0 ? in.ep_net_fraction : 0.0;
    double t_a2a = bytes * (1.0 - f_net) / (link.bw_gbps * 1e9 * in.k.link_eff) + link.latency_us * 1e-6;
    if (f_net > 0)
      t_a2a = std::max(
          t_a2a, bytes * f_net / (in.ep_net_link.bw_gbps * 1e9 * in.k.link_eff) + in.ep_net_link.latency_us * 1e-6);
    t += moe_layers * 2.0 * t_a2a;
  }
  return t;
}

double handoff_s(const PerfInputs& in, double tokens) {
  if (in.layout.pp <= 1) return 0;
  const double bytes = tokens * static_cast<double>(in.model->config.n_embd) * in.act_elem_bytes;
  return bytes / (in.pp_link.bw_gbps * 1e9 * in.k.link_eff) + in.pp_link.latency_us * 1e-6;
}

double heads_local(const PerfInputs& in) {
  return static_cast<double>(attn_qk_width(*in.model) + attn_v_width(*in.model)) / in.layout.tp;
}

}  // namespace

double mixed_step_s(const PerfInputs& in, double prefill_tokens, double prefill_seqs, double prefill_ctx,
                    double decode_seqs, double decode_ctx) {
  const int pp = in.layout.pp;
  prefill_tokens = std::max(0.0, prefill_tokens);
  decode_seqs = std::max(0.0, decode_seqs);
  const double prefill_units = prefill_tokens > 0 ? std::max(1.0, prefill_seqs) : 0.0;
  // Micro-batches: at most one per stage, at most one per sequence.
  const double micro = std::max(1.0, std::min<double>(decode_seqs + prefill_units, pp));
  const double d = decode_seqs / micro, pt = prefill_tokens / micro;
  const double logits = (decode_seqs + prefill_units) / micro;
  const StageWork w = stage_work(in, std::max(d + pt, 1e-9), logits);
  const double layers = static_cast<double>(in.memory.layers_per_stage);
  const double t_gemm = gemm_s(in, w);
  // Decode attention reads every sequence's KV once; QK^T and PV are 2 FLOPs
  // per element, for decode and prefill tokens alike.
  const ModelConfig& m = in.model->config;
  const double kv_bytes = d * decode_ctx * in.memory.kv_bytes_per_token;
  const double attn_flops = 2.0 * (d * decode_ctx + pt * prefill_ctx) * layers * heads_local(in);
  double t_attn = attention_s(in, kv_bytes, attn_flops);
  if (!in.grouped_kv_reads && m.n_kv_head > 0 && m.n_head > m.n_kv_head && in.k.ungrouped_kv_read_gbps > 0) {
    // One query head at a time: each KV head is fetched from memory once (its
    // group's other heads hit the L2 cache), but read group-size times.
    const double group = static_cast<double>(m.n_head) / static_cast<double>(m.n_kv_head);
    t_attn = std::max(t_attn, kv_bytes * group / (in.k.ungrouped_kv_read_gbps * 1e9));
  }
  const double t_stage = t_gemm + t_attn + stage_comm_s(in, d + pt) + layers * in.k.layer_overhead_us * 1e-6;
  return pp * t_stage + (pp - 1) * handoff_s(in, d + pt);
}

double decode_step_s(const PerfInputs& in, double batch, double ctx) {
  return mixed_step_s(in, 0, 0, 0, std::max(batch, 1e-9), ctx);
}

double prefill_s(const PerfInputs& in, double n_requests, double input_len) {
  const int pp = in.layout.pp;
  const double tokens = n_requests * input_len;
  const StageWork w = stage_work(in, tokens, n_requests);
  const double layers = static_cast<double>(in.memory.layers_per_stage);
  const double t_gemm = gemm_s(in, w);
  // Causal attention: half of len^2 for QK^T and for PV, 2 FLOPs each.
  const double attn_flops = n_requests * input_len * input_len * layers * heads_local(in);
  const double t_attn = attention_s(in, 0, attn_flops);
  const double t_stage = t_gemm + t_attn + stage_comm_s(in, tokens) + layers * in.k.layer_overhead_us * 1e-6;
  // A lone prompt crosses the stages one after another; many prompts fill the pipeline.
  const double stages_serial = n_requests >= pp ? 1.0 : pp;
  return stages_serial * t_stage + (pp - 1) * handoff_s(in, tokens);
}

LoadPoint predict_load(const PerfInputs& in, double c, int64_t input_len, int64_t output_len) {
  LoadPoint r;
  c = std::max(1.0, c);
  r.concurrency = c;
  const double in_len = static_cast<double>(std::max<int64_t>(1, input_len));
  const double out_len = static_cast<double>(std::max<int64_t>(1, output_len));
  const double t_prefill_all = prefill_s(in, c, in_len);
  const double t_prefill_one = prefill_s(in, 1, in_len);
  const double tpot = decode_step_s(in, c, in_len + out_len / 2.0);
  // Prompts of a round finish their prefill one after another: mean of first and last.
  r.ttft_ms = (0.5 * (t_prefill_one + t_prefill_all)) * 1e3 + in.k.request_overhead_ms;
  r.ttft_p50_ms = r.ttft_ms;
  r.ttft_p95_ms = (t_prefill_one + 0.95 * (t_prefill_all - t_prefill_one)) * 1e3 + in.k.request_overhead_ms;
  r.tpot_ms = r.tpot_p50_ms = r.tpot_p95_ms = tpot * 1e3;
  const double round_s = t_prefill_all + (out_len - 1.0) * tpot + in.k.request_overhead_ms * 1e-3;
  r.output_tokens_per_s = c * out_len / round_s;
  r.requests_per_s = c / round_s;
  return r;
}

}  // namespace parallm::planner
