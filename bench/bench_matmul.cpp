// Kernel lab for matmul on the llama-110m shapes (dim 768, FFN 2048, 12 layers),
// with the same call pattern as the forward pass: fused QKV (matmul_multi of
// 3 x 768x768), attention output (768x768), fused gate+up (2 x 2048x768),
// down (768x2048).
//   decode:  n_tokens = 1 over all 12 layers (~170 MB in f16, far beyond the
//            LLC, so caches do not flatter the number); reports weight GB/s
//            and the fraction of the streaming-read bandwidth measured at startup.
//   prefill: n_tokens = 128; reports GFLOP/s (2*n_in*n_out*n_tokens) and the
//            fraction of the FP32 FMA peak measured at startup.
//   call/matvec-32rows: one parallel mat-vec call on a 32-row packed q4_0
//            matrix held in cache: the fixed cost of a call (wake-up, x's
//            quantization, row split, barrier).
//   attention/decode32: paged attention of 32 sequences decoding together
//            (context 160, f16 KV, 12 KV heads of 64) over 12 layers' pools
//            (~190 MB); reports KV GB/s and the fraction of the bandwidth.
//            "-q8_0": the same over a q8_0 cache (~100 MB); "-scattered":
//            each sequence's blocks in a shuffled order instead of side by side;
//            "-cached": 8 sequences and one layer's pool (~4 MB) read 12 times,
//            so the speed from the LLC shows; "-shared": all 32 sequences
//            read the same blocks (~0.5 MB a layer, in L2), so the kernel's
//            arithmetic shows, not the memory's.
//   attention/prefill<N>-hd<D>: the causal attention of one N-token prompt
//            (f16 cache, 768 / D heads of D) over 12 layers; reports GFLOP/s
//            (4 * D per visible key and head) and the fraction of the FMA peak.
// Threads: PARALLM_THREADS (default 2). ISA: PARALLM_ISA (default the best).
// Run: build/bench/bench_matmul [--benchmark_filter=decode]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/roofline.h"

namespace {

using parallm::DType;
using parallm::ThreadPool;
namespace cpu = parallm::cpu;

constexpr int64_t kDim = 768, kFf = 2048, kLayers = 12;

ThreadPool& pool() {
  static ThreadPool p([] {
    const char* env = std::getenv("PARALLM_THREADS");
    return env != nullptr ? std::atoi(env) : 2;
  }());
  return p;
}

struct Limits {
  double bandwidth_gb_per_s;
  double fma_peak_gflops;
};

const Limits& limits() {
  static Limits l = [] {
    Limits r{cpu::measure_memory_bandwidth_gb_per_s(pool()), cpu::measure_fma_peak_gflops(pool())};
    std::fprintf(stderr, "isa %s, %d threads: read bandwidth %.1f GB/s, FP32 FMA peak %.1f GFLOP/s\n",
                 cpu::isa_name(cpu::active_isa()), pool().size(), r.bandwidth_gb_per_s, r.fma_peak_gflops);
    return r;
  }();
  return l;
}

struct Matrix {
  std::vector<uint8_t> bytes;
  int64_t n_out, n_in;
  size_t stride;  // packed: bytes of one 16-row group
  bool packed = false;
};

struct Layer {
  Matrix q, k, v, o, gate, up, down;
};

Matrix random_matrix(DType t, int64_t n_out, int64_t n_in, uint64_t seed, bool packed) {
  Matrix m{{}, n_out, n_in, parallm::dtype_row_bytes(t, n_in)};
  m.bytes.resize(m.stride * n_out);
  std::vector<float> row(n_in);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t o = 0; o < n_out; ++o) {
    for (auto& v : row) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      v = (static_cast<float>(s >> 40) / static_cast<float>(1 << 24) - 0.5f) * 0.1f;
    }
    cpu::quantize_row(t, row.data(), m.bytes.data() + o * m.stride, n_in);
  }
  if (packed) {
    std::vector<uint8_t> p(cpu::packed_bytes(t, n_out, n_in));
    cpu::pack_rows(t, m.bytes.data(), m.stride, n_out, n_in, p.data());
    m.bytes = std::move(p);
    m.stride = cpu::packed_group_bytes(t, n_in);
    m.packed = true;
  }
  return m;
}

// One dtype's 12 layers at a time (f32 would be 340 MB).
const std::vector<Layer>& layers(DType t, bool packed) {
  static std::unique_ptr<std::vector<Layer>> cached;
  static DType cached_type;
  static bool cached_packed;
  if (!cached || cached_type != t || cached_packed != packed) {
    cached.reset();
    cached = std::make_unique<std::vector<Layer>>();
    for (int64_t l = 0; l < kLayers; ++l) {
      const uint64_t s = static_cast<uint64_t>(l) * 16;
      const bool p = packed;
      cached->push_back({random_matrix(t, kDim, kDim, s + 1, p), random_matrix(t, kDim, kDim, s + 2, p),
                         random_matrix(t, kDim, kDim, s + 3, p), random_matrix(t, kDim, kDim, s + 4, p),
                         random_matrix(t, kFf, kDim, s + 5, p), random_matrix(t, kFf, kDim, s + 6, p),
                         random_matrix(t, kDim, kFf, s + 7, p)});
    }
    cached_type = t;
    cached_packed = packed;
  }
  return *cached;
}

double layer_bytes(DType t) {
  return static_cast<double>(4 * parallm::dtype_row_bytes(t, kDim) * kDim +
                             2 * parallm::dtype_row_bytes(t, kDim) * kFf + parallm::dtype_row_bytes(t, kFf) * kDim);
}

double layer_flops(int64_t n_tokens) { return 2.0 * n_tokens * (4.0 * kDim * kDim + 3.0 * kDim * kFf); }

void forward_matmuls(DType t, const std::vector<Layer>& ls, int64_t n_tokens, const float* x_dim, const float* x_ff,
                     float* out_q, float* out_k, float* out_v, float* out_o, float* out_g, float* out_u, float* out_d) {
  auto target = [t](float* out, const Matrix& m) {
    return cpu::MatmulTarget{out, m.bytes.data(), t, m.stride, m.n_out, m.packed};
  };
  for (const Layer& l : ls) {
    const cpu::MatmulTarget qkv[] = {target(out_q, l.q), target(out_k, l.k), target(out_v, l.v)};
    cpu::matmul_multi(qkv, 3, x_dim, n_tokens, kDim, pool());
    const cpu::MatmulTarget o = target(out_o, l.o);
    cpu::matmul_multi(&o, 1, x_dim, n_tokens, kDim, pool());
    const cpu::MatmulTarget gu[] = {target(out_g, l.gate), target(out_u, l.up)};
    cpu::matmul_multi(gu, 2, x_dim, n_tokens, kDim, pool());
    const cpu::MatmulTarget d = target(out_d, l.down);
    cpu::matmul_multi(&d, 1, x_ff, n_tokens, kFf, pool());
  }
}

void run_model(benchmark::State& state, DType t, bool packed, int64_t n_tokens, int64_t n_layers) {
  const Limits& lim = limits();
  const std::vector<Layer>& all = layers(t, packed);
  std::vector<float> x_dim(n_tokens * kDim, 0.01f), x_ff(n_tokens * kFf, 0.01f);
  std::vector<float> q(n_tokens * kDim), k(n_tokens * kDim), v(n_tokens * kDim), o(n_tokens * kDim), g(n_tokens * kFf),
      u(n_tokens * kFf), d(n_tokens * kDim);
  const std::vector<Layer> subset(all.begin(), all.begin() + n_layers);
  const std::vector<Layer>& use = n_layers == kLayers ? all : subset;
  double seconds = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    forward_matmuls(t, use, n_tokens, x_dim.data(), x_ff.data(), q.data(), k.data(), v.data(), o.data(), g.data(),
                    u.data(), d.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++runs;
  }
  const double per_run = seconds / static_cast<double>(runs);
  if (n_tokens == 1) {
    const double gbs = layer_bytes(t) * static_cast<double>(n_layers) / per_run / 1e9;
    state.counters["GB/s"] = gbs;
    state.counters["of_bw"] = gbs / lim.bandwidth_gb_per_s;
    state.counters["us/token"] = per_run * 1e6;
  } else {
    const double gflops = layer_flops(n_tokens) * static_cast<double>(n_layers) / per_run / 1e9;
    state.counters["GFLOP/s"] = gflops;
    state.counters["of_peak"] = gflops / lim.fma_peak_gflops;
    state.counters["tok/s"] = static_cast<double>(n_tokens) / per_run;
  }
}

// The fixed cost of one parallel mat-vec call: a packed q4_0 matrix of 32
// rows (9 KB, in L1/L2) against one token, so the time is the pool's wake-up,
// x's quantization, the row split and the barrier, not the weights.
void run_call_overhead(benchmark::State& state) {
  static const Matrix m = random_matrix(DType::kQ4_0, 32, kDim, 99, cpu::packing_pays(DType::kQ4_0));
  std::vector<float> x(kDim, 0.01f), out(32);
  const cpu::MatmulTarget t{out.data(), m.bytes.data(), DType::kQ4_0, m.stride, m.n_out, m.packed};
  for (auto _ : state) cpu::matmul_multi(&t, 1, x.data(), 1, kDim, pool());
}

// Where a sequence's KV blocks lie in its layer's pool.
enum class Placement {
  kSideBySide,  // each sequence's blocks side by side (bench-model, the block manager)
  kScattered,   // in a shuffled order (a pool handing out blocks in list order)
  kShared,      // every sequence on the first sequence's blocks (as a shared prefix)
};

// One decode step's attention on every layer: n_seqs sequences at context
// `ctx`, their blocks placed as `placement` says.
void run_attention(benchmark::State& state, int64_t n_seqs, int64_t ctx, DType kv_dtype,
                   Placement placement = Placement::kSideBySide, int64_t n_layers = kLayers) {
  constexpr int64_t kHeads = 12, kHeadDim = 64, kBlock = 16;
  const Limits& lim = limits();
  const int64_t blocks_per_seq = (ctx + kBlock - 1) / kBlock, n_blocks = blocks_per_seq * n_seqs;
  const int64_t n_rows = n_blocks * kHeads * kBlock;
  const size_t row_bytes = parallm::dtype_row_bytes(kv_dtype, kHeadDim);
  // Every row holds 0.01 * (1..head_dim), as the cache stores it.
  std::vector<float> row_f32(kHeadDim);
  for (int64_t i = 0; i < kHeadDim; ++i) row_f32[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i + 1);
  std::vector<float> token_f32(static_cast<size_t>(kHeads * kHeadDim));
  for (int64_t h = 0; h < kHeads; ++h) std::copy(row_f32.begin(), row_f32.end(), token_f32.begin() + h * kHeadDim);
  std::vector<std::vector<uint8_t>> k(n_layers, std::vector<uint8_t>(static_cast<size_t>(n_rows) * row_bytes)), v(k);
  for (int64_t l = 0; l < n_layers; ++l) {
    const cpu::PagedKv kv{k[l].data(), v[l].data(), kv_dtype, kBlock, kHeads, kHeadDim};
    for (int64_t slot = 0; slot < n_blocks * kBlock; ++slot) {
      cpu::kv_write(kv, token_f32.data(), token_f32.data(), &slot, 1);
    }
  }
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t i = 0; i < n_blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  if (placement == Placement::kScattered) std::shuffle(table.begin(), table.end(), std::mt19937(3));
  std::vector<const int32_t*> tables(static_cast<size_t>(n_seqs));
  std::vector<int32_t> positions(static_cast<size_t>(n_seqs), static_cast<int32_t>(ctx - 1)), seq_of(n_seqs);
  for (int64_t s = 0; s < n_seqs; ++s) {
    tables[static_cast<size_t>(s)] = table.data() + (placement == Placement::kShared ? 0 : s * blocks_per_seq);
    seq_of[static_cast<size_t>(s)] = static_cast<int32_t>(s);
  }
  std::vector<float> q(static_cast<size_t>(n_seqs * kHeads * kHeadDim), 0.01f), out(q.size());
  double seconds = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t l = 0; l < kLayers; ++l) {
      const cpu::PagedKv kv{k[l % n_layers].data(), v[l % n_layers].data(), kv_dtype, kBlock, kHeads, kHeadDim};
      cpu::paged_attention(out.data(), q.data(), kv, positions.data(), seq_of.data(), tables.data(), n_seqs, kHeads,
                           0.125f, pool());
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++runs;
  }
  const double bytes = 2.0 * static_cast<double>(row_bytes) * kHeads * static_cast<double>(ctx * n_seqs * kLayers);
  const double gbs = bytes / (seconds / static_cast<double>(runs)) / 1e9;
  state.counters["GB/s"] = gbs;
  state.counters["of_bw"] = gbs / lim.bandwidth_gb_per_s;
}

// A prefill chunk's attention on every layer: one sequence's n_tokens
// prompt tokens at positions 0.. (causal), f16 cache; reports GFLOP/s of
// QK^T and PV (2 * 2 * head_dim per visible key and head) and the fraction
// of the FMA peak. The chunk's K/V are in the cache already (the forward
// stores them just before).
void run_prefill_attention(benchmark::State& state, int64_t n_tokens, int64_t head_dim) {
  constexpr int64_t kBlock = 16;
  const int64_t heads = 768 / head_dim;
  const Limits& lim = limits();
  const int64_t n_blocks = (n_tokens + kBlock - 1) / kBlock;
  const size_t row_bytes = parallm::dtype_row_bytes(DType::kF16, head_dim);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> kv_rows(static_cast<size_t>(n_tokens * heads * head_dim));
  for (auto& x : kv_rows) x = u(rng);
  std::vector<int64_t> slots(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) slots[static_cast<size_t>(t)] = t;
  std::vector<std::vector<uint8_t>> k(kLayers,
                                      std::vector<uint8_t>(static_cast<size_t>(n_blocks * heads * kBlock) * row_bytes)),
      v(k);
  for (int64_t l = 0; l < kLayers; ++l) {
    const cpu::PagedKv kv{k[l].data(), v[l].data(), DType::kF16, kBlock, heads, head_dim};
    cpu::kv_write(kv, kv_rows.data(), kv_rows.data(), slots.data(), n_tokens);
  }
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t i = 0; i < n_blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const int32_t* tables[] = {table.data()};
  std::vector<int32_t> positions(static_cast<size_t>(n_tokens)), seq_of(static_cast<size_t>(n_tokens), 0);
  for (int64_t t = 0; t < n_tokens; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  std::vector<float> q(kv_rows), out(q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  double seconds = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t l = 0; l < kLayers; ++l) {
      const cpu::PagedKv kv{k[l].data(), v[l].data(), DType::kF16, kBlock, heads, head_dim};
      cpu::paged_attention(out.data(), q.data(), kv, positions.data(), seq_of.data(), tables, n_tokens, heads, scale,
                           pool());
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++runs;
  }
  const double visible = static_cast<double>(n_tokens) * static_cast<double>(n_tokens + 1) / 2;
  const double flops = 4.0 * static_cast<double>(head_dim * heads) * visible * kLayers;
  const double gflops = flops / (seconds / static_cast<double>(runs)) / 1e9;
  state.counters["GFLOP/s"] = gflops;
  state.counters["of_peak"] = gflops / lim.fma_peak_gflops;
}

void register_all() {
  benchmark::RegisterBenchmark("call/matvec-32rows", run_call_overhead)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
  benchmark::RegisterBenchmark("attention/decode32",
                               [](benchmark::State& s) { run_attention(s, 32, 160, DType::kF16); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark("attention/decode32-q8_0",
                               [](benchmark::State& s) { run_attention(s, 32, 160, DType::kQ8_0); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark(
      "attention/decode32-scattered",
      [](benchmark::State& s) { run_attention(s, 32, 160, DType::kF16, Placement::kScattered); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark(
      "attention/decode32-q8_0-scattered",
      [](benchmark::State& s) { run_attention(s, 32, 160, DType::kQ8_0, Placement::kScattered); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark(
      "attention/decode8-cached",
      [](benchmark::State& s) { run_attention(s, 8, 160, DType::kF16, Placement::kSideBySide, 1); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark(
      "attention/decode8-q8_0-cached",
      [](benchmark::State& s) { run_attention(s, 8, 160, DType::kQ8_0, Placement::kSideBySide, 1); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark("attention/decode32-shared",
                               [](benchmark::State& s) { run_attention(s, 32, 160, DType::kF16, Placement::kShared); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark("attention/decode32-q8_0-shared",
                               [](benchmark::State& s) { run_attention(s, 32, 160, DType::kQ8_0, Placement::kShared); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  benchmark::RegisterBenchmark("attention/decode2", [](benchmark::State& s) { run_attention(s, 2, 160, DType::kF16); })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(1.0);
  for (int64_t n : {128, 512}) {
    for (int64_t hd : {64, 128}) {
      benchmark::RegisterBenchmark(("attention/prefill" + std::to_string(n) + "-hd" + std::to_string(hd)).c_str(),
                                   [n, hd](benchmark::State& s) { run_prefill_attention(s, n, hd); })
          ->Unit(benchmark::kMillisecond)
          ->MinTime(1.0);
    }
  }
  // "-packed": the 16-row layout of kernels/cpu/packed.h, as the engine
  // loads q8_0 / q4_0 on AVX-512.
  struct Type {
    const char* name;
    DType t;
    bool packed;
  };
  const Type types[] = {
      {"f32", DType::kF32, false},         {"f16", DType::kF16, false},         {"bf16", DType::kBF16, false},
      {"q8_0", DType::kQ8_0, false},       {"q8_0-packed", DType::kQ8_0, true}, {"q4_0", DType::kQ4_0, false},
      {"q4_0-packed", DType::kQ4_0, true}, {"q4_k", DType::kQ4_K, false},       {"q4_k-packed", DType::kQ4_K, true},
      {"q6_k", DType::kQ6_K, false},       {"q6_k-packed", DType::kQ6_K, true}};
  for (const Type& ty : types) {
    benchmark::RegisterBenchmark((std::string("decode/") + ty.name).c_str(),
                                 [ty](benchmark::State& s) { run_model(s, ty.t, ty.packed, 1, kLayers); })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(1.0);
    // 32 tokens over every layer: a batched decode step of 32 sequences.
    benchmark::RegisterBenchmark((std::string("batch32/") + ty.name).c_str(),
                                 [ty](benchmark::State& s) { run_model(s, ty.t, ty.packed, 32, kLayers); })
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0);
    benchmark::RegisterBenchmark((std::string("prefill128/") + ty.name).c_str(),
                                 [ty](benchmark::State& s) { run_model(s, ty.t, ty.packed, 128, 2); })
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  limits();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
