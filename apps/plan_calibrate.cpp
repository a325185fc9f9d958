// Measurements behind `parallm plan --calibrate` (plan_calibrate.h).
#include "plan_calibrate.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "comm/comm_factory.h"
#include "comm/local_comm.h"
#include "core/dtype.h"
#include "engine/engine.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/roofline.h"
#include "model/linear.h"
#include "modelgen/make_model.h"
#include "util/check.h"
#include "util/log.h"
#include "util/thread_pool.h"
#include "util/zeroed_memory.h"

namespace parallm {
namespace {

using namespace parallm::planner;

// Small and large all-reduces over the local (threads) communicator: alpha
// (latency) from 1 KiB messages, beta (algorithm bandwidth) from 16 MiB.
void measure_allreduce(int ranks, Calibration* c) {
  if (ranks < 2) return;
  auto comms = make_communicators(CommBackend::kLocal, ranks);
  auto time_op = [&](size_t count, int iters) {
    double best = 1e30;
    run_ranks_or_throw(comms, [&](Communicator& comm) {
      std::vector<float> buf(count, 1.0f);
      comm.all_reduce_sum(buf.data(), count);  // warm-up
      for (int rep = 0; rep < 3; ++rep) {
        comm.barrier();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) comm.all_reduce_sum(buf.data(), count);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
        if (comm.rank() == 0) best = std::min(best, s);
      }
    });
    return best;
  };
  const size_t small = 256, large = 4u << 20;
  c->allreduce_latency_us = time_op(small, 200) * 1e6;
  const double t_large = time_op(large, 3);
  c->allreduce_gbps = static_cast<double>(large * sizeof(float)) / t_large / 1e9;
  c->allreduce_ranks = ranks;
}

// --- The engine's matmul per weight dtype -----------------------------------
// One layer of llama-110m (n_embd 768, n_ff 2048) called the way the model
// calls it (model/llama_model.cpp): Q, K, V in one matmul_multi, O, gate and up
// in one matmul_multi, down. Enough layers that their weights (>= 192 MiB) do
// not fit in the last-level cache, so each decode pass streams them from RAM
// as the engine does. Decode also runs the output head ([32000, 768]) after
// every 12 layers, as a llama-110m token does: a long matrix streams faster
// than the per-layer ones (~70 vs 37-50 GB/s for packed q4_0), and without
// it the probe predicted q8_0 / q4_0 decode 20-40% slow. NOTE:
// llama-110m-sized matrices on purpose: they are what
// tools/plan_local_check.sh checks against; the achieved fraction of the
// limits is assumed to carry over to larger models of the same dtype.
constexpr int64_t kProbeEmbd = 768, kProbeFf = 2048, kProbeVocab = 32000, kProbeModelLayers = 12;
constexpr size_t kProbeSetBytes = size_t{192} << 20;

struct ProbeMatrix {
  int64_t n_out, n_in;
  size_t offset;  // into ProbeSet::data
};

struct ProbeSet {
  DType dtype;
  bool packed = false;                             // as the engine loads this dtype (model/linear.h)
  std::vector<std::array<ProbeMatrix, 7>> layers;  // q k v o gate up down
  std::vector<ProbeMatrix> heads;                  // one after every kProbeModelLayers layers
  char* data = nullptr;                            // in packed_mem when that holds memory, else malloc'd
  ZeroedMemory packed_mem;                         // huge pages, as the engine keeps packed and float weights
  size_t bytes = 0;
  double params_per_layer = 0;
  ProbeSet() = default;
  ProbeSet(const ProbeSet&) = delete;
  ProbeSet& operator=(const ProbeSet&) = delete;
  ~ProbeSet() {
    if (packed_mem.data() == nullptr) std::free(data);
  }
};

// Valid values of `t` (no NaN or subnormals): plain types get a fixed exponent
// and random sign/mantissa, block types random quants and a scale of 2^-7.
void fill_probe_weights(char* p, size_t bytes, DType t, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  if (t == DType::kF32) {
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
      uint32_t v;
      std::memcpy(&v, p + i, 4);
      v = (v & 0x807fffffu) | 0x3e000000u;
      std::memcpy(p + i, &v, 4);
    }
  } else if (t == DType::kF16 || t == DType::kBF16) {
    const uint16_t keep = t == DType::kF16 ? 0x83ff : 0x807f, exp = t == DType::kF16 ? 0x3000 : 0x3e00;
    for (size_t i = 0; i + 2 <= bytes; i += 2) {
      uint16_t v;
      std::memcpy(&v, p + i, 2);
      v = static_cast<uint16_t>((v & keep) | exp);
      std::memcpy(p + i, &v, 2);
    }
  } else {
    const size_t block = dtype_block_bytes(t);
    const uint16_t d = fp32_to_fp16(1.0f / 128);
    for (size_t i = 0; i + block <= bytes; i += block) std::memcpy(p + i, &d, 2);  // d leads Q8_0/Q4_0 blocks
  }
}

void build_probe_set(DType t, ProbeSet* s) {
  const std::array<std::pair<int64_t, int64_t>, 7> shapes = {{{kProbeEmbd, kProbeEmbd},
                                                              {kProbeEmbd, kProbeEmbd},
                                                              {kProbeEmbd, kProbeEmbd},
                                                              {kProbeEmbd, kProbeEmbd},
                                                              {kProbeFf, kProbeEmbd},
                                                              {kProbeFf, kProbeEmbd},
                                                              {kProbeEmbd, kProbeFf}}};
  size_t layer_bytes = 0;
  s->params_per_layer = 0;
  for (auto [n_out, n_in] : shapes) {
    layer_bytes += (static_cast<size_t>(n_out) * dtype_row_bytes(t, n_in) + 63) / 64 * 64;
    s->params_per_layer += static_cast<double>(n_out * n_in);
  }
  const size_t head_bytes = (static_cast<size_t>(kProbeVocab) * dtype_row_bytes(t, kProbeEmbd) + 63) / 64 * 64;
  const size_t model_bytes = kProbeModelLayers * layer_bytes + head_bytes;
  const size_t n_models = std::max<size_t>(1, (kProbeSetBytes + model_bytes - 1) / model_bytes);
  s->dtype = t;
  s->bytes = n_models * model_bytes;
  s->data = static_cast<char*>(std::aligned_alloc(64, s->bytes));
  PARALLM_CHECK(s->data != nullptr);
  size_t off = 0;
  for (size_t l = 0; l < n_models * kProbeModelLayers; ++l) {
    std::array<ProbeMatrix, 7> m{};
    for (size_t i = 0; i < shapes.size(); ++i) {
      m[i] = {shapes[i].first, shapes[i].second, off};
      off += (static_cast<size_t>(shapes[i].first) * dtype_row_bytes(t, shapes[i].second) + 63) / 64 * 64;
    }
    s->layers.push_back(m);
    if ((l + 1) % kProbeModelLayers == 0) {
      s->heads.push_back({kProbeVocab, kProbeEmbd, off});
      off += head_bytes;
    }
  }
  fill_probe_weights(s->data, s->bytes, t, static_cast<uint64_t>(t) + 7);
  if (!cpu::packing_pays(t)) {
    if (!WeightStore::streams_better_on_huge_pages(t)) return;
    // Float rows on huge pages, as the engine's WeightStore keeps them.
    ZeroedMemory mem(s->bytes);
    std::memcpy(mem.data(), s->data, s->bytes);
    std::free(s->data);
    s->packed_mem = std::move(mem);
    s->data = static_cast<char*>(s->packed_mem.data());
    return;
  }
  // Repack every matrix as the engine's loader does (same offsets: a packed
  // matrix is no larger than its rows padded to 16).
  size_t packed_total = 0;
  std::vector<ProbeMatrix> all(s->heads);
  for (const auto& m : s->layers) all.insert(all.end(), m.begin(), m.end());
  for (const ProbeMatrix& pm : all)
    packed_total = std::max(packed_total, pm.offset + cpu::packed_bytes(t, pm.n_out, pm.n_in));
  ZeroedMemory mem(packed_total);
  char* packed = static_cast<char*>(mem.data());
  for (const ProbeMatrix& pm : all) {
    PARALLM_CHECK(pm.n_out % cpu::kPackRows == 0);  // so each packed matrix fits its slot
    cpu::pack_rows(t, s->data + pm.offset, dtype_row_bytes(t, pm.n_in), pm.n_out, pm.n_in, packed + pm.offset);
  }
  std::free(s->data);
  s->packed_mem = std::move(mem);
  s->data = packed;
  s->packed = true;
}

// Seconds of the layers [first, first + count) at n_tokens, the model's calls
// (with_heads: and the output head after every kProbeModelLayers-th layer).
double run_probe_layers(const ProbeSet& s, size_t first, size_t count, int64_t n_tokens, const float* x, float* out,
                        ThreadPool& pool, bool with_heads = false) {
  auto target = [&](const ProbeMatrix& m, float* o) {
    const size_t stride = s.packed ? cpu::packed_group_bytes(s.dtype, m.n_in) : dtype_row_bytes(s.dtype, m.n_in);
    return cpu::MatmulTarget{o, s.data + m.offset, s.dtype, stride, m.n_out, s.packed};
  };
  const size_t slot = static_cast<size_t>(n_tokens * kProbeFf);  // one output buffer each
  auto t0 = std::chrono::steady_clock::now();
  for (size_t l = first; l < first + count; ++l) {
    const auto& m = s.layers[l % s.layers.size()];
    const cpu::MatmulTarget qkv[3] = {target(m[0], out), target(m[1], out + slot), target(m[2], out + 2 * slot)};
    cpu::matmul_multi(qkv, 3, x, n_tokens, kProbeEmbd, pool);
    const cpu::MatmulTarget o = target(m[3], out + 3 * slot);
    cpu::matmul_multi(&o, 1, x, n_tokens, kProbeEmbd, pool);
    const cpu::MatmulTarget gate_up[2] = {target(m[4], out), target(m[5], out + slot)};
    cpu::matmul_multi(gate_up, 2, x, n_tokens, kProbeEmbd, pool);
    const cpu::MatmulTarget down = target(m[6], out + 2 * slot);
    cpu::matmul_multi(&down, 1, x, n_tokens, kProbeFf, pool);
    if (with_heads && (l + 1) % kProbeModelLayers == 0) {
      const cpu::MatmulTarget head = target(s.heads[(l / kProbeModelLayers) % s.heads.size()], out);
      cpu::matmul_multi(&head, 1, x, n_tokens, kProbeEmbd, pool);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best of at least 3 runs of `fn`, more while under `budget_s` (at most 8).
template <typename Fn>
double best_of(Fn fn, double budget_s) {
  double best = 1e30, spent = 0;
  for (int rep = 0; rep < 8 && (rep < 3 || spent < budget_s); ++rep) {
    const double t = fn();
    best = std::min(best, t);
    spent += t;
  }
  return best;
}

// Decode: every layer and head of the set at 1 token (weight bytes / s); prefill: four
// other layers at 128 tokens (2 x params x tokens FLOP / s); the batch sweep:
// four other layers at each of kSweepTokens (the GEMM rate by batch size).
// Best of several rounds, each round visiting every dtype: other work on the
// cores then slows all dtypes alike instead of spoiling one (a 2-thread
// mat-vec whose partner thread is descheduled runs 3-4x slower).
constexpr int64_t kSweepTokens[] = {2, 3, 4, 6, 8, 12, 16, 32, 64, 256};
constexpr int64_t kMaxProbeTokens = 256;

void measure_kernels(ThreadPool& pool, Calibration* c) {
  const std::pair<DType, const char*> dtypes[] = {{DType::kF32, "fp32"},
                                                  {DType::kF16, "fp16"},
                                                  {DType::kBF16, "bf16"},
                                                  {DType::kQ8_0, "q8_0"},
                                                  {DType::kQ4_0, "q4_0"}};
  constexpr size_t kPrefillLayers = 4;
  constexpr int kMinRounds = 4, kMaxRounds = 12;
  constexpr double kBudgetS = 4.0;
  constexpr size_t kSweep = std::size(kSweepTokens);
  std::vector<float> x(static_cast<size_t>(kMaxProbeTokens * kProbeFf));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  std::vector<float> out(static_cast<size_t>(4 * kMaxProbeTokens * kProbeFf));
  const size_t n_dtypes = std::size(dtypes);
  std::vector<ProbeSet> sets(n_dtypes);
  std::vector<double> decode_s(n_dtypes, 1e30), prefill_s(n_dtypes, 1e30);
  std::vector<std::array<double, kSweep>> sweep_s(n_dtypes);
  for (auto& a : sweep_s) a.fill(1e30);
  for (size_t d = 0; d < n_dtypes; ++d) {
    build_probe_set(dtypes[d].first, &sets[d]);
    run_probe_layers(sets[d], 0, sets[d].layers.size(), 1, x.data(), out.data(), pool, true);  // warm-up
    run_probe_layers(sets[d], 0, 1, kMaxProbeTokens, x.data(), out.data(), pool);
  }
  double spent = 0;
  for (int round = 0; round < kMaxRounds && (round < kMinRounds || spent < kBudgetS); ++round) {
    for (size_t d = 0; d < n_dtypes; ++d) {
      const ProbeSet& s = sets[d];
      const double td = run_probe_layers(s, 0, s.layers.size(), 1, x.data(), out.data(), pool, true);
      // Other layers each call: their weights are not in cache.
      size_t first = static_cast<size_t>(round) * (kSweep + 1) * kPrefillLayers;
      const double tp =
          run_probe_layers(s, first += kPrefillLayers, kPrefillLayers, kProbePrefillTokens, x.data(), out.data(), pool);
      decode_s[d] = std::min(decode_s[d], td);
      prefill_s[d] = std::min(prefill_s[d], tp);
      spent += td + tp;
      for (size_t i = 0; i < kSweep; ++i) {
        const double t =
            run_probe_layers(s, first += kPrefillLayers, kPrefillLayers, kSweepTokens[i], x.data(), out.data(), pool);
        sweep_s[d][i] = std::min(sweep_s[d][i], t);
        spent += t;
      }
    }
  }
  for (size_t d = 0; d < n_dtypes; ++d) {
    const ProbeSet& s = sets[d];
    KernelEfficiency k;
    k.decode_gbps = static_cast<double>(s.bytes) / decode_s[d] / 1e9;
    const double layer_flops_per_token = 2.0 * s.params_per_layer * kPrefillLayers;
    k.prefill_gflops = layer_flops_per_token * kProbePrefillTokens / prefill_s[d] / 1e9;
    k.bw_eff = k.decode_gbps / c->mem_bw_gbps;
    k.flops_eff = k.prefill_gflops / c->fma_gflops;
    // The decode pass's FLOP/s (its heads included) is the curve's first point.
    const double set_params =
        s.params_per_layer * static_cast<double>(s.layers.size()) +
        static_cast<double>(s.heads.size()) * static_cast<double>(kProbeVocab) * static_cast<double>(kProbeEmbd);
    k.gflops_by_tokens.push_back({1.0, 2.0 * set_params / decode_s[d] / 1e9});
    k.gflops_by_tokens.push_back({static_cast<double>(kProbePrefillTokens), k.prefill_gflops});
    for (size_t i = 0; i < kSweep; ++i) {
      const double n = static_cast<double>(kSweepTokens[i]);
      k.gflops_by_tokens.push_back({n, layer_flops_per_token * n / sweep_s[d][i] / 1e9});
    }
    std::sort(k.gflops_by_tokens.begin(), k.gflops_by_tokens.end());
    c->kernels[dtypes[d].second] = k;
  }
}

// --- A reference forward of the engine ----------------------------------------
// What the matmul probe does not see: attention over the KV cache, and the
// ops and barriers around the matmuls. A random llama-110m (q4_0, 73 MiB,
// about 1 s to write) runs in the real engine:
//   decode at context ~8 and ~520: the difference is attention alone, as KV
//     bytes read per second (attn_bw_eff);
//   the context-8 step less its matmul time (probe) and attention -> the
//     fixed cost per layer (layer_overhead_us);
//   a 128-token prefill less the matmul time the planner predicts for it
//     (perf_model.cpp: 2 x layer params x tokens + 2 x lm_head params for the
//     one logit row, at the probe's rate) and the fixed costs -> attention, as
//     the planner's causal FLOPs per second (attn_flops_eff).
// NOTE: the residual of the prefill is attributed to attention because that
// is the part that grows with the prompt (len^2). A residual at or below zero
// (a busy machine during the probe) leaves the factor at 0: attention then
// runs at the GEMM's factor in the planner. The same holds for decode.
// Decode near/far runs alternate, so that a busy moment hits both alike.
void measure_reference_forward(int threads, Calibration* c) {
  const KernelEfficiency& q4 = c->kernels.at("q4_0");
  const std::string path =
      (std::filesystem::temp_directory_path() / ("parallm-calibrate-" + std::to_string(::getpid()) + ".gguf")).string();
  struct Remove {
    std::string p;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  } remove_file{path};
  MakeModelOptions mo;
  mo.preset = "llama-110m";
  mo.dtype = DType::kQ4_0;
  mo.out_path = path;
  make_model(mo);
  constexpr int64_t kPrompt = 128, kSteps = 16, kFar = 512;
  EngineOptions eo;
  eo.model_path = path;
  eo.threads = threads;
  eo.ctx_size = kFar + kSteps + 1;
  Engine engine(eo);
  const ModelConfig& m = engine.config();
  std::vector<int32_t> table(static_cast<size_t>(engine.n_kv_blocks()));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::vector<int32_t> prompt(kPrompt);
  for (int64_t i = 0; i < kPrompt; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>(3 + i * 7 % (m.n_vocab - 3));
  ForwardBatch batch;
  auto prefill = [&] {
    batch.clear();
    batch.add_sequence_tokens(prompt.data(), kPrompt, 0, 0, table.data(), engine.block_size(), true);
    auto t0 = std::chrono::steady_clock::now();
    engine.forward(batch);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto decode = [&](int32_t pos0) {  // seconds per step
    int32_t tok = prompt.back();
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < kSteps; ++i) {
      batch.clear();
      batch.add_sequence_tokens(&tok, 1, pos0 + static_cast<int32_t>(i), 0, table.data(), engine.block_size(), true);
      engine.forward(batch);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kSteps;
  };
  prefill();  // warm-up: page faults of the mapped weights
  const double prefill_s = best_of(prefill, 0.5);
  double near_s = 1e30, far_s = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    near_s = std::min(near_s, decode(0));
    far_s = std::min(far_s, decode(kFar));
  }

  const double layers = static_cast<double>(m.n_layer);
  const double kv_bytes_per_token = static_cast<double>(engine.kv_bytes_per_token_per_rank());
  const double near_ctx = (kSteps + 1) / 2.0, far_ctx = kFar + near_ctx;
  const double attn_s_per_byte = far_s > near_s ? (far_s - near_s) / ((far_ctx - near_ctx) * kv_bytes_per_token) : 0.0;
  c->attn_bw_eff = attn_s_per_byte > 0 ? 1.0 / attn_s_per_byte / 1e9 / c->mem_bw_gbps : 0.0;
  double weight_bytes = 0, layer_params = 0, head_params = 0;  // decode streams; prefill multiplies
  for (size_t w : engine.rank_weight_bytes()) weight_bytes += static_cast<double>(w);
  for (const auto& [name, t] : engine.model_file().tensors()) {
    if (t.shape.size() < 2 || name == "token_embd.weight") continue;
    double n = 1;
    for (int64_t d : t.shape) n *= static_cast<double>(d);
    (name == "output.weight" ? head_params : layer_params) += n;
  }
  const double near_matmul_s = weight_bytes / (q4.decode_gbps * 1e9);
  const double near_rest_s = near_s - near_matmul_s - near_ctx * kv_bytes_per_token * attn_s_per_byte;
  c->layer_overhead_us = std::max(0.0, near_rest_s) / layers * 1e6;
  const double T = static_cast<double>(kPrompt);
  const double prefill_matmul_s = 2.0 * (layer_params * T + head_params) / (q4.prefill_gflops * 1e9);
  const double attn_s = prefill_s - prefill_matmul_s - layers * c->layer_overhead_us * 1e-6;
  // Planner's count: n_layer x len^2 x (Q/K width + V width), perf_model.cpp.
  const double attn_flops = layers * T * T * 2.0 * static_cast<double>(m.n_head * m.head_dim);
  c->attn_flops_eff = attn_s > 0 ? attn_flops / attn_s / (c->fma_gflops * 1e9) : 0.0;
}

}  // namespace

Calibration measure_this_machine(int threads) {
  Calibration c;
  c.threads = threads;
  {
    ThreadPool pool(c.threads);
    c.mem_bw_gbps = cpu::measure_memory_bandwidth_gb_per_s(pool);
    c.fma_gflops = cpu::measure_fma_peak_gflops(pool);
    measure_kernels(pool, &c);
  }
  measure_reference_forward(c.threads, &c);
  measure_allreduce(std::min(4, std::max(2, c.threads)), &c);
  return c;
}

}  // namespace parallm
