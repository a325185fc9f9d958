// Engine: the one place where the logic side (tokens, sequences, sampling)
// meets the compute side (model shards, KV pools, communicators).
//
// A model runs on tp × pp ranks (× ep for experts, which reuses the tp ranks).
// Every rank runs the same step: rank 0, the driver, broadcasts the batch to
// the tp ranks of stage 0; each rank runs its shard's layers and hands the
// batch and the residual stream to the same tp rank of the next stage (send /
// recv, in order); the last stage's tp-rank 0 sends the logits to the driver.
// Nothing in a step is collective across stages, so up to pp steps on
// disjoint sequences can be in the pipe at once (submit / collect): stage 0
// computes the next micro-batch while the later stages finish earlier ones.
// With the local backend the ranks are threads of this process; with MPI
// they are processes and ranks > 0 run serve_forever().
#pragma once
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "config/parallel_config.h"
#include "loader/model_file.h"
#include "model/forward_batch.h"
#include "model/kv_pool.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace parallm {

struct EngineOptions {
  std::string model_path;
  std::string tokenizer_path;  // empty: from the model file
  int threads = 0;             // per rank; 0 = hardware threads / ranks
  int64_t ctx_size = 0;        // 0 = the model's trained context
  DType kv_dtype = DType::kF16;
  std::optional<DType> weight_dtype;  // --dtype
  int64_t block_size = 16;
  int64_t kv_blocks = 0;  // 0 = enough for one sequence of ctx_size
  int tp = 1, pp = 1, ep = 1;
  std::vector<int64_t> pp_layers;  // --pp-layers (empty: balanced by count)
  std::string comm = "local";      // local | mpi | nccl
  double comm_timeout_s = 60.0;
  int64_t device_memory_bytes = 0;  // per device budget (0 = RAM / devices)
  std::string devices;              // "cpu:0,cpu:1" (empty: cpu:0..n-1)
  std::string synthetic;            // bench-model --synthetic PRESET[:DTYPE] in place of model_path

  ParallelConfig parallel() const { return ParallelConfig{tp, pp, ep, 1}; }
};

// Per-rank timing and traffic, for bench-model and the server's metrics.
struct RankStats {
  double compute_s = 0, comm_s = 0;
  uint64_t bytes_sent = 0;        // all traffic of this rank
  uint64_t group_bytes_sent = 0;  // tensor/expert-parallel collectives only
};

// Layers per pipeline stage: --pp-layers when given (checked), else by count
// (the first stages one more).
std::vector<int64_t> pipeline_stage_layers(const ModelConfig& config, int pp, const std::vector<int64_t>& pinned);

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& config() const { return model_file_->config; }
  const ModelFile& model_file() const { return *model_file_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  int64_t ctx_size() const { return ctx_size_; }
  int64_t block_size() const { return options_.block_size; }
  int64_t n_kv_blocks() const { return n_kv_blocks_; }
  int world_size() const { return parallel_.world_size(); }
  const ParallelConfig& parallel() const { return parallel_; }
  bool is_driver() const { return world_rank_ == 0; }
  const EngineOptions& options() const { return options_; }

  // Driver only: runs one step; returns logits [batch.logit_rows.size(), n_vocab]
  // followed by the pooled rows [batch.n_pooled(), n_embd] (sums of final-norm
  // hidden states, see ForwardBatch::pool_ranges), valid until the next
  // forward() or collect(). Same as submit + collect.
  const float* forward(const ForwardBatch& batch);
  // Driver only, pipeline micro-batches: submit() runs the step's first stage
  // on this thread and hands it down the pipeline; up to pp steps may be in
  // flight (on disjoint sequences: a step's K/V writes and reads are not
  // ordered against another in-flight step's). collect() returns the oldest
  // step's logits, waiting for them. With pp = 1 submit() runs the whole step.
  void submit(const ForwardBatch& batch);
  const float* collect();
  int steps_in_flight() const { return static_cast<int>(in_pipe_.size() + ready_.size()); }
  // Driver only: the threads of the driver's rank, idle between forward() /
  // submit() calls (for work on the step's results, such as sampling).
  ThreadPool& driver_pool();
  // Non-driver MPI ranks: follow the driver's steps until it shuts down.
  void serve_forever();

  // Driver only: runs the largest step a scheduler with these limits can form
  // (n_tokens dummy tokens over n_seqs sequences, each with its last token's
  // logits, as many as the pool's blocks allow) and measures what it costs:
  // the memory this process maps for it (activations, kernel scratch,
  // logits), per local rank; on GPU ranks, the device memory the largest
  // rank's activations hold. `serve` sizes the KV pool from this profile,
  // as vLLM does from its profiling run. Call before any other step.
  size_t profile_step(int64_t n_tokens, int64_t n_seqs);
  // The last profile_step's bytes per rank (0 before one ran).
  size_t activation_bytes_per_rank() const { return activation_bytes_; }
  // Driver only: gives every rank a fresh, empty KV pool of n_blocks blocks
  // (the old pool is freed first). Sequences' blocks are not kept.
  void resize_kv_pool(int64_t n_blocks);

  // Whether the ranks run on GPUs (or the emulated one) rather than CPU devices.
  bool on_devices() const { return on_devices_; }
  // Each local rank's memory budget (--device-memory, else RAM / ranks for
  // CPU devices, the GPU's free memory / the ranks on it for GPUs).
  std::vector<uint64_t> rank_budgets() const;
  // Weight bytes held by each rank, and KV bytes per token on the driver's rank.
  std::vector<size_t> rank_weight_bytes() const;
  size_t kv_bytes_per_token_per_rank() const;
  // Blocks of each local rank's KV pool (synchronizes with the followers).
  std::vector<int64_t> rank_kv_blocks();
  // Bytes of each local rank's KV pool (its layers' share; no synchronization:
  // pools change only in resize_kv_pool, before serving).
  std::vector<size_t> rank_kv_bytes() const;
  // Exact counters of this process's ranks (synchronizes with the followers).
  std::vector<RankStats> rank_stats();
  void reset_stats();
  MoeStats moe_stats() const;
  std::string summary() const;

 public:
  struct Rank;  // one rank hosted by this process (engine.cpp)

 private:
  void control(int64_t command, int64_t arg = 0);
  void build_ranks();
  void make_kv_pool(Rank& r, int64_t n_blocks);
  void receive_message(Rank& r, int64_t* header, std::vector<int32_t>* packed, int64_t* arg);
  void send_down(Rank& r, int64_t header, const std::vector<int32_t>* packed, int64_t arg, int64_t n_tokens);
  void receive_oldest();
  int64_t step_output_floats(const ForwardBatch& batch) const;  // logits, then pooled rows
  void count_traffic(Rank& r);                                  // the rank's byte counters from its communicators'
  void run_step(Rank& r, const ForwardBatch& batch);
  void rank_thread_main(Rank* r);

  EngineOptions options_;
  ParallelConfig parallel_;
  std::unique_ptr<ModelFile> model_file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  int64_t ctx_size_ = 0;
  int64_t n_kv_blocks_ = 0;
  size_t activation_bytes_ = 0;
  bool on_devices_ = false;
  int world_rank_ = 0;
  std::vector<std::unique_ptr<Rank>> ranks_;  // local ranks of this process
  std::vector<std::thread> threads_;
  std::vector<float> logits_;             // the last collect()'s (pp > 1)
  std::deque<int64_t> in_pipe_;           // output floats (logits, pooled rows) of the steps handed down, oldest first
  std::deque<std::vector<float>> ready_;  // logits received (pp > 1), or a marker (pp = 1), not yet collected
  std::vector<std::vector<float>> spare_logits_;  // buffers of collected steps, for the next receives
  ForwardBatch step_batch_;
};

}  // namespace parallm
