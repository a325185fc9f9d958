#include "engine/engine.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>

#include "comm/comm_factory.h"
#ifdef PARALLM_HAVE_NCCL
#include "comm/nccl_comm.h"
#endif
#include "core/capacity.h"
#include "core/device.h"
#include "engine/rank_devices.h"
#include "engine/rank_model.h"
#include "model/device_llama_model.h"
#include "modelgen/synthetic_model.h"
#include "util/check.h"
#include "util/huge_pages.h"
#include "util/log.h"

namespace parallm {

struct Engine::Rank {
  int world_rank = 0, stage = 0, group_rank = 0;
  std::unique_ptr<Communicator> world;  // all ranks (batch broadcast, pipeline send/recv)
  std::unique_ptr<Communicator> group;  // the tp / ep ranks of this stage
  std::unique_ptr<Communicator> peers;  // the same ranks, for the driver's steps and commands to stage 0
  std::unique_ptr<Communicator> nccl;   // --comm nccl: the group's collectives on its GPUs (group bootstraps it)
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<RankModel> model;          // and its KV cache, on the rank's device
  uint64_t budget = 0;                       // its device memory budget
  std::vector<float> hidden;                 // [n_tokens, n_embd]
  ForwardBatch batch;                        // non-driver ranks: the driver's batch
  std::vector<std::vector<int32_t>> tables;  // storage behind batch.block_tables
  RankStats stats;
  std::exception_ptr error;
};

namespace {

// Control codes the driver broadcasts in place of a batch size.
constexpr int64_t kStopCommand = -1;        // followers leave their loop
constexpr int64_t kResetStatsCommand = -2;  // barrier, then every rank zeroes its stats
constexpr int64_t kSyncCommand = -3;        // followers finish their step, then barrier
constexpr int64_t kResizeKvCommand = -4;    // the block count follows; every rank replaces its pool, then barrier

void reset_rank_stats(Engine::Rank& r);

// Serializes the parts of a batch every rank needs (block tables by value).
std::vector<int32_t> pack_batch(const ForwardBatch& b, int64_t block_size) {
  std::vector<int32_t> out;
  const int64_t n = b.n_tokens();
  const int64_t n_seqs = static_cast<int64_t>(b.block_tables.size());
  std::vector<int32_t> blocks_per_seq(static_cast<size_t>(n_seqs), 0);
  for (int64_t t = 0; t < n; ++t) {
    int32_t& nb = blocks_per_seq[b.seq_of_token[t]];
    nb = std::max<int32_t>(nb, static_cast<int32_t>(b.positions[t] / block_size + 1));
  }
  out.push_back(static_cast<int32_t>(n));
  out.push_back(static_cast<int32_t>(n_seqs));
  out.push_back(static_cast<int32_t>(b.logit_rows.size()));
  out.push_back(static_cast<int32_t>(b.pool_ranges.size()));
  out.insert(out.end(), b.tokens.begin(), b.tokens.end());
  out.insert(out.end(), b.positions.begin(), b.positions.end());
  out.insert(out.end(), b.seq_of_token.begin(), b.seq_of_token.end());
  out.insert(out.end(), b.logit_rows.begin(), b.logit_rows.end());
  out.insert(out.end(), b.pool_ranges.begin(), b.pool_ranges.end());
  for (int64_t s = 0; s < n_seqs; ++s) {
    out.push_back(blocks_per_seq[s]);
    for (int32_t i = 0; i < blocks_per_seq[s]; ++i) out.push_back(b.block_tables[s][i]);
  }
  return out;
}

void unpack_batch(const std::vector<int32_t>& in, int64_t block_size, ForwardBatch* b,
                  std::vector<std::vector<int32_t>>* tables) {
  b->clear();
  size_t at = 0;
  const int32_t n = in[at++], n_seqs = in[at++], n_logits = in[at++], n_pool_ints = in[at++];
  auto take = [&](std::vector<int32_t>& v, int32_t count) {
    v.assign(in.begin() + static_cast<long>(at), in.begin() + static_cast<long>(at + count));
    at += static_cast<size_t>(count);
  };
  take(b->tokens, n);
  take(b->positions, n);
  take(b->seq_of_token, n);
  take(b->logit_rows, n_logits);
  take(b->pool_ranges, n_pool_ints);
  tables->resize(static_cast<size_t>(n_seqs));
  b->block_tables.resize(static_cast<size_t>(n_seqs));
  for (int32_t s = 0; s < n_seqs; ++s) {
    take((*tables)[s], in[at++]);
    b->block_tables[s] = (*tables)[s].data();
  }
  for (int32_t t = 0; t < n; ++t) {
    const int32_t* table = b->block_tables[b->seq_of_token[t]];
    const int32_t p = b->positions[t];
    b->slots.push_back(static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size);
  }
}

}  // namespace

std::vector<int64_t> pipeline_stage_layers(const ModelConfig& c, int pp, const std::vector<int64_t>& pinned) {
  const int64_t n_layer = c.n_layer;
  if (!pinned.empty()) {
    int64_t sum = 0;
    for (int64_t x : pinned) sum += x;
    if (static_cast<int>(pinned.size()) != pp || sum != n_layer ||
        std::any_of(pinned.begin(), pinned.end(), [](int64_t x) { return x <= 0; })) {
      throw InputError(strfmt("--pp-layers must list %d positive counts summing to the model's %lld layers", pp,
                              (long long)n_layer));
    }
    return pinned;
  }
  if (pp > n_layer) throw InputError(strfmt("--pp %d exceeds the model's %lld layers", pp, (long long)n_layer));
  // By count: every layer of a dense model costs the same.
  // NOTE: balancing by multiply-adds per decoded token instead, with the
  // output matrix on the last stage (llama-110m: 3.5 layers' worth, so 8 / 4),
  // served 32 streams no faster than 6 / 6 (pp = 2, one core per stage, two
  // alternating pairs: 1,071 / 968 against 1,106 / 970 tokens/s; 7 / 5 gave
  // 1,062 / 1,127 against 945 / 981): attention, whose cost grows with the
  // context, and the driver's sampling on stage 0 shift the balance too.
  // --pp-layers is there for a split measured on the deployment.
  std::vector<int64_t> out(static_cast<size_t>(pp), n_layer / pp);
  for (int64_t i = 0; i < n_layer % pp; ++i) out[static_cast<size_t>(i)]++;
  return out;
}

Engine::Engine(const EngineOptions& options) : options_(options), parallel_(options.parallel()) {
  parallel_.validate();
  model_file_ = options_.synthetic.empty() ? open_model(options_.model_path, options_.weight_dtype)
                                           : synthetic_model(options_.synthetic);
  const ModelConfig& c = model_file_->config;
  if (!options_.tokenizer_path.empty()) {
    tokenizer_ = load_tokenizer(options_.tokenizer_path);
  } else if (model_file_->gguf()) {
    tokenizer_ = tokenizer_from_gguf(*model_file_->gguf());
  } else if (!model_file_->hf_dir.empty()) {
    tokenizer_ = load_tokenizer(model_file_->hf_dir);
  } else {
    throw InputError("model '" + options_.model_path + "' carries no tokenizer: pass --tokenizer PATH");
  }
  if (tokenizer_->n_vocab() > c.n_vocab) {
    throw InputError(
        strfmt("tokenizer has %d tokens but the model only %lld", tokenizer_->n_vocab(), (long long)c.n_vocab));
  }
  ctx_size_ = options_.ctx_size > 0 ? options_.ctx_size : c.n_ctx_train;
  if (ctx_size_ > (1 << 22)) throw InputError("--ctx-size is too large");
  n_kv_blocks_ =
      options_.kv_blocks > 0 ? options_.kv_blocks : (ctx_size_ + options_.block_size - 1) / options_.block_size;
  build_ranks();
}

Engine::~Engine() {
  if (!ranks_.empty() && is_driver() && world_size() > 1) {
    // Drain the pipe, then tell the followers to stop.
    try {
      while (!in_pipe_.empty()) receive_oldest();
      ready_.clear();
      control(kStopCommand);
    } catch (const std::exception& e) {
      log_warn(std::string("shutting down ranks: ") + e.what());
    }
  }
  for (auto& t : threads_) t.join();
}

void Engine::build_ranks() {
  const ModelConfig& c = model_file_->config;
  const int group = parallel_.group_size();
  const int world = parallel_.world_size();
  const std::vector<int64_t> layers = pipeline_stage_layers(c, options_.pp, options_.pp_layers);
  const CommBackend backend = parse_comm_backend(options_.comm);
  // The devices are checked before any communicator exists (an NCCL group
  // of CPU ranks is refused here, with the reason).
  const std::vector<DeviceId> devices = rank_devices(
      options_.devices.empty() ? std::vector<DeviceId>{} : parse_device_list(options_.devices), world, backend);
  CommOptions copts;
  copts.timeout_s = options_.comm_timeout_s;
  std::vector<std::unique_ptr<Communicator>> comms;
  // --comm nccl: the model's tp / ep collectives run over NCCL on the ranks'
  // GPUs; the steps' hand-offs and commands (host memory) stay on a host
  // communicator: this process's threads, or MPI under mpirun.
  const CommBackend host = host_backend(backend);
  if (world > 1 || host != CommBackend::kLocal) comms = make_communicators(host, world, copts);
  const int local_ranks = comms.empty() ? 1 : static_cast<int>(comms.size());
  on_devices_ = devices[0].kind != DeviceId::Kind::kCpu;
  // This process's ranks' budgets before any of them allocates: a GPU's free
  // memory is shared by the ranks on it, and a rank that queried after
  // another's upload would see less.
  std::vector<uint64_t> budgets(static_cast<size_t>(world), 0);
  for (int i = 0; i < local_ranks; ++i) {
    const int w = comms.empty() ? 0 : comms[static_cast<size_t>(i)]->rank();
    const DeviceId& d = devices[static_cast<size_t>(w)];
    const int sharing = static_cast<int>(std::count(devices.begin(), devices.end(), d));
    budgets[static_cast<size_t>(w)] = rank_budget_bytes(d, options_.device_memory_bytes, world, sharing);
  }
  if (model_file_->synthetic && !on_devices_) {
    throw InputError(
        "--synthetic weights are filled on the device: run it on GPU ranks (--devices cuda:0) or "
        "the emulated device (--devices emu:0)");
  }
  int threads = options_.threads > 0 ? options_.threads : std::max(1, default_thread_count() / local_ranks);

  ranks_.resize(static_cast<size_t>(local_ranks));
  std::mutex mu;
  auto build = [&](int i) {
    auto r = std::make_unique<Rank>();
    if (!comms.empty()) r->world = std::move(comms[static_cast<size_t>(i)]);
    r->world_rank = r->world ? r->world->rank() : 0;
    const ParallelConfig::Role role = parallel_.role(r->world_rank);
    r->stage = role.stage;
    r->group_rank = role.group_rank;
    if (r->world && group > 1) {
      r->group = r->world->split(r->stage, r->group_rank);
      // Steps reach stage 0's tp peers on a communicator of their own, so
      // that the group's counters stay the model's collectives.
      r->peers = r->world->split(r->stage, r->group_rank);
    }
    ModelOptions mo;
    mo.shard.tp_size = options_.tp;
    mo.shard.tp_rank = role.tp_rank;
    mo.shard.ep_size = options_.ep;
    mo.shard.ep_rank = role.ep_rank;
    int64_t begin = 0;
    for (int s = 0; s < r->stage; ++s) begin += layers[static_cast<size_t>(s)];
    mo.shard.layer_begin = begin;
    mo.shard.layer_end = begin + layers[static_cast<size_t>(r->stage)];
    mo.weight_dtype = options_.weight_dtype;
    mo.n_ctx = ctx_size_;
    const DeviceId device = devices[static_cast<size_t>(r->world_rank)];
#ifdef PARALLM_HAVE_NCCL
    if (backend == CommBackend::kNccl && group > 1) {
      r->nccl = make_nccl_communicator(*r->group, device.index, options_.comm_timeout_s);
    }
#endif
    Communicator* collectives = r->nccl ? r->nccl.get() : r->group.get();
    mo.tp_comm = options_.tp > 1 ? collectives : nullptr;
    mo.ep_comm = options_.ep > 1 ? collectives : nullptr;
    const uint64_t budget = budgets[static_cast<size_t>(r->world_rank)];
    const LocalShape ls = local_shape(c, mo.shard);
    const int64_t n_local_layers = ls.layer_end - ls.layer_begin;
    const size_t kv_bytes = KvPool::bytes_per_token(n_local_layers, ls.n_kv_head_local, c.kv_row_dim(),
                                                    options_.kv_dtype, c.kv_values_in_keys()) *
                            static_cast<size_t>(n_kv_blocks_ * options_.block_size);
    const LayoutAdvice layout{options_.tp, options_.pp, options_.weight_dtype};
    const int64_t kv_tokens = n_kv_blocks_ * options_.block_size;
    if (device.kind == DeviceId::Kind::kCpu) {
      r->model = make_rank_model(*model_file_, mo, device, budget);
      check_rank_fits(device.to_string(), RankNeed{r->model->weight_bytes(), kv_bytes, kv_tokens}, budget, layout);
    } else {
      // Checked before anything is uploaded.
      check_device_support(c, mo, device.to_string());
      check_rank_fits(device.to_string(), RankNeed{device_weight_bytes(*model_file_, mo), kv_bytes, kv_tokens}, budget,
                      layout);
      r->model = make_rank_model(*model_file_, mo, device, budget);
    }
    r->budget = budget;
    make_kv_pool(*r, n_kv_blocks_);
    r->pool = std::make_unique<ThreadPool>(threads);
    std::lock_guard<std::mutex> lock(mu);
    ranks_[static_cast<size_t>(i)] = std::move(r);
  };
  if (local_ranks == 1) {
    build(0);
  } else {
    // Splitting communicators is collective: every local rank builds on its own thread.
    std::vector<std::exception_ptr> errors(static_cast<size_t>(local_ranks));
    std::vector<std::thread> builders;
    for (int i = 0; i < local_ranks; ++i) {
      builders.emplace_back([&, i] {
        try {
          build(i);
        } catch (...) {
          errors[static_cast<size_t>(i)] = std::current_exception();
          if (comms[static_cast<size_t>(i)]) comms[static_cast<size_t>(i)]->abort();
        }
      });
    }
    for (auto& b : builders) b.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }
  world_rank_ = ranks_[0]->world_rank;
  // Local follower ranks run their step loop on their own threads.
  for (size_t i = 1; i < ranks_.size(); ++i) threads_.emplace_back([this, i] { rank_thread_main(ranks_[i].get()); });
}

void Engine::make_kv_pool(Rank& r, int64_t n_blocks) {
  r.model->make_kv_cache(n_blocks, options_.block_size, options_.kv_dtype);
}

// How a step or a command reaches a rank (see engine.h): stage 0's tp
// peers get it from the driver by the stage's group broadcast; every rank of
// a later stage gets it, with the residual stream, from the same tp rank of
// the stage before (point to point, in order), so a stage can take the next
// micro-batch while later stages still work on earlier ones. A message is a
// header (the packed batch's size, or a command < 0) and a payload: the
// packed batch, or the command's argument.
void Engine::receive_message(Rank& r, int64_t* header, std::vector<int32_t>* packed, int64_t* arg) {
  if (r.stage == 0) {
    r.peers->broadcast(header, sizeof(*header), 0);
    if (*header > 0) {
      packed->resize(static_cast<size_t>(*header));
      r.peers->broadcast(packed->data(), packed->size() * 4, 0);
    } else {
      r.peers->broadcast(arg, sizeof(*arg), 0);
    }
    return;
  }
  const int up = parallel_.rank_at(r.stage - 1, r.group_rank);
  r.world->recv(header, sizeof(*header), up);
  if (*header > 0) {
    packed->resize(static_cast<size_t>(*header));
    r.world->recv(packed->data(), packed->size() * 4, up);
  } else {
    r.world->recv(arg, sizeof(*arg), up);
  }
}

// To the same tp rank of the next stage: a command, or a step's batch and
// the residual stream this stage leaves.
void Engine::send_down(Rank& r, int64_t header, const std::vector<int32_t>* packed, int64_t arg, int64_t n_tokens) {
  if (r.stage == options_.pp - 1) return;
  const int down = parallel_.rank_at(r.stage + 1, r.group_rank);
  const double before = r.world->stats().seconds();
  r.world->send(&header, sizeof(header), down);
  if (header > 0) {
    r.world->send(packed->data(), packed->size() * 4, down);
    r.world->send(r.hidden.data(), static_cast<size_t>(n_tokens * model_file_->config.n_embd) * 4, down);
    // A step's hand-off is its stage's communication.
    r.stats.comm_s += r.world->stats().seconds() - before;
    count_traffic(r);
  } else {
    r.world->send(&arg, sizeof(arg), down);
  }
}

void Engine::count_traffic(Rank& r) {
  r.stats.group_bytes_sent =
      (r.group ? r.group->stats().bytes_sent() : 0) + (r.nccl ? r.nccl->stats().bytes_sent() : 0);
  r.stats.bytes_sent = (r.world ? r.world->stats().bytes_sent() : 0) + r.stats.group_bytes_sent +
                       (r.peers ? r.peers->stats().bytes_sent() : 0);
}

void Engine::rank_thread_main(Rank* r) {
  try {
    std::vector<int32_t> packed;
    for (;;) {
      int64_t header = 0, arg = 0;
      receive_message(*r, &header, &packed, &arg);
      if (header < 0) {
        send_down(*r, header, nullptr, arg, 0);
        if (header == kStopCommand) return;
        if (header == kResizeKvCommand) {
          if (r == ranks_[0].get()) n_kv_blocks_ = arg;  // an MPI follower (local ones share the driver's)
          make_kv_pool(*r, arg);
        }
        r->world->barrier();
        if (header == kResetStatsCommand) reset_rank_stats(*r);
        continue;
      }
      unpack_batch(packed, options_.block_size, &r->batch, &r->tables);
      run_step(*r, r->batch);
      send_down(*r, header, &packed, 0, r->batch.n_tokens());
    }
  } catch (const std::exception& e) {
    log_message(LogLevel::kError, strfmt("rank %d: %s", r->world_rank, e.what()));
    r->world->abort();
  }
}

void Engine::serve_forever() {
  PARALLM_CHECK(!is_driver());
  rank_thread_main(ranks_[0].get());
}

// Receives this stage's input (stages > 0), runs its layers, and on the last
// stage's first tp rank sends the logits to the driver (unless it is the driver).
void Engine::run_step(Rank& r, const ForwardBatch& batch) {
  const ModelConfig& c = model_file_->config;
  const int64_t n = batch.n_tokens();
  if (static_cast<int64_t>(r.hidden.size()) < n * c.n_embd) r.hidden.resize(static_cast<size_t>(n * c.n_embd));
  const bool last = r.stage == options_.pp - 1;
  const int64_t n_logits = static_cast<int64_t>(batch.logit_rows.size());
  const int64_t n_out = step_output_floats(batch);
  float* out = last ? r.model->output_buffer(static_cast<size_t>(n_out)) : nullptr;
  auto comm_seconds = [&] {
    return (r.world ? r.world->stats().seconds() : 0) + (r.group ? r.group->stats().seconds() : 0) +
           (r.nccl ? r.nccl->stats().seconds() : 0);
  };
  const double comm_before = comm_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  const size_t hidden_bytes = static_cast<size_t>(n * c.n_embd) * 4;
  if (r.stage > 0) r.world->recv(r.hidden.data(), hidden_bytes, parallel_.rank_at(r.stage - 1, r.group_rank));
  float* pooled = last ? out + n_logits * c.n_vocab : nullptr;
  r.model->forward(batch, r.hidden.data(), out, *r.pool, pooled);
  if (last && r.group_rank == 0 && r.world_rank != 0) r.world->send(out, static_cast<size_t>(n_out) * 4, 0);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double comm_after = comm_seconds();
  r.stats.comm_s += comm_after - comm_before;
  r.stats.compute_s += total - (comm_after - comm_before);
  count_traffic(r);
}

void Engine::submit(const ForwardBatch& batch) {
  PARALLM_CHECK(is_driver());
  PARALLM_CHECK_MSG(static_cast<int>(in_pipe_.size() + ready_.size()) < options_.pp,
                    "Engine::submit: pp steps are in flight already; collect() first");
  for (int32_t p : batch.positions) {
    if (p >= ctx_size_) throw InputError(strfmt("position %d is past the context size %lld", p, (long long)ctx_size_));
  }
  Rank& r = *ranks_[0];
  const int64_t n_out = step_output_floats(batch);
  if (world_size() == 1) {
    run_step(r, batch);
    ready_.emplace_back();  // the logits stay in the rank's buffer
    return;
  }
  std::vector<int32_t> packed = pack_batch(batch, options_.block_size);
  int64_t header = static_cast<int64_t>(packed.size());
  if (r.peers) {
    r.peers->broadcast(&header, sizeof(header), 0);
    r.peers->broadcast(packed.data(), packed.size() * 4, 0);
  }
  run_step(r, batch);
  if (options_.pp == 1) {
    ready_.emplace_back();
    return;
  }
  // The pipe is full: take the oldest step's logits before handing this one
  // on. Stage 1 reads its next input only after its previous step, and a
  // large send may wait for that read (MPI), so sending first could leave
  // the driver waiting on stage 1 while the last stage waits on the driver.
  if (static_cast<int>(in_pipe_.size()) == options_.pp - 1) receive_oldest();
  send_down(r, header, &packed, 0, batch.n_tokens());
  in_pipe_.push_back(n_out);
}

int64_t Engine::step_output_floats(const ForwardBatch& batch) const {
  const ModelConfig& c = model_file_->config;
  return static_cast<int64_t>(batch.logit_rows.size()) * c.n_vocab + batch.n_pooled() * c.n_embd;
}

void Engine::receive_oldest() {
  const int64_t n_out = in_pipe_.front();
  in_pipe_.pop_front();
  // A buffer of an earlier step (no fresh pages per step: 4 MB at 32 rows of
  // a 32,000-token vocabulary).
  std::vector<float> logits;
  if (!spare_logits_.empty()) {
    logits.swap(spare_logits_.back());
    spare_logits_.pop_back();
  }
  logits.resize(static_cast<size_t>(n_out));
  ranks_[0]->world->recv(logits.data(), logits.size() * 4, parallel_.rank_at(options_.pp - 1, 0));
  ready_.push_back(std::move(logits));
}

const float* Engine::collect() {
  PARALLM_CHECK(is_driver());
  PARALLM_CHECK_MSG(!in_pipe_.empty() || !ready_.empty(), "Engine::collect: no step in flight");
  if (ready_.empty()) receive_oldest();
  // The previous collect()'s buffer is free again (pp = 1 steps leave an
  // empty marker, nothing to keep).
  if (logits_.capacity() > 0) spare_logits_.push_back(std::move(logits_));
  logits_ = std::move(ready_.front());
  ready_.pop_front();
  if (options_.pp == 1) return ranks_[0]->model->output_buffer(0);
  return logits_.data();
}

const float* Engine::forward(const ForwardBatch& batch) {
  submit(batch);
  return collect();
}

namespace {
// Bytes malloc hands out now (all arenas, and its own mmap'd chunks).
size_t malloc_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}
}  // namespace

size_t Engine::profile_step(int64_t n_tokens, int64_t n_seqs) {
  PARALLM_CHECK(is_driver());
  const int64_t bs = options_.block_size;
  n_seqs = std::max<int64_t>(1, std::min(n_seqs, n_tokens));
  // Each sequence at most a context long, and no more of them than the pool
  // holds (nor can a real step have).
  const int64_t len = std::min({ctx_size_, (n_tokens + n_seqs - 1) / n_seqs, n_kv_blocks_ * bs});
  const int64_t blocks_per_seq = (len + bs - 1) / bs;
  n_seqs = std::max<int64_t>(1, std::min(n_seqs, n_kv_blocks_ / blocks_per_seq));
  n_tokens = std::min(n_tokens, n_seqs * len);
  PARALLM_CHECK_MSG(blocks_per_seq * n_seqs <= n_kv_blocks_, "profile_step: the KV pool is smaller than one sequence");
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seqs));
  ForwardBatch batch;
  const std::vector<int32_t> ids(static_cast<size_t>(len), 1);
  for (int64_t s = 0, left = n_tokens; s < n_seqs; ++s) {
    auto& t = tables[static_cast<size_t>(s)];
    for (int64_t b = 0; b < blocks_per_seq; ++b) t.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    const int64_t n = std::min(left, (left + (n_seqs - s) - 1) / (n_seqs - s));  // spread evenly
    batch.add_sequence_tokens(ids.data(), n, 0, static_cast<int32_t>(s), t.data(), bs, true);
    left -= n;
  }
  huge_page_reset_peak();
  const size_t huge_before = huge_page_bytes_mapped(), heap_before = malloc_in_use();
  forward(batch);
  control(kSyncCommand);  // local followers done with the step
  const size_t heap_after = malloc_in_use();
  const size_t grown =
      (huge_page_bytes_peak() - huge_before) + (heap_after > heap_before ? heap_after - heap_before : 0);
  activation_bytes_ = grown / ranks_.size();
  if (on_devices_) {  // what the step left allocated on the devices (buffers grow, never shrink)
    activation_bytes_ = 0;
    for (const auto& r : ranks_) activation_bytes_ = std::max(activation_bytes_, r->model->device_activation_bytes());
  }
  return activation_bytes_;
}

void Engine::resize_kv_pool(int64_t n_blocks) {
  PARALLM_CHECK(is_driver());
  PARALLM_CHECK(n_blocks > 0);
  n_kv_blocks_ = n_blocks;
  make_kv_pool(*ranks_[0], n_blocks);
  control(kResizeKvCommand, n_blocks);
}

ThreadPool& Engine::driver_pool() {
  PARALLM_CHECK(is_driver());
  return *ranks_[0]->pool;
}

std::vector<size_t> Engine::rank_weight_bytes() const {
  std::vector<size_t> out;
  for (const auto& r : ranks_) out.push_back(r->model->weight_bytes());
  return out;
}

std::vector<uint64_t> Engine::rank_budgets() const {
  std::vector<uint64_t> out;
  for (const auto& r : ranks_) out.push_back(r->budget);
  return out;
}

std::vector<int64_t> Engine::rank_kv_blocks() {
  control(kSyncCommand);
  std::vector<int64_t> out;
  for (const auto& r : ranks_) out.push_back(r->model->kv_blocks());
  return out;
}

std::vector<size_t> Engine::rank_kv_bytes() const {
  std::vector<size_t> out;
  for (const auto& r : ranks_) out.push_back(r->model->kv_bytes());
  return out;
}

size_t Engine::kv_bytes_per_token_per_rank() const {
  const auto& m = *ranks_[0]->model;
  return KvPool::bytes_per_token(m.n_local_layers(), m.shape().n_kv_head_local, config().kv_row_dim(),
                                 options_.kv_dtype, config().kv_values_in_keys());
}

namespace {
void reset_rank_stats(Engine::Rank& r) {
  r.stats = RankStats{};
  if (r.world) r.world->reset_stats();
  if (r.group) r.group->reset_stats();
  if (r.nccl) r.nccl->reset_stats();
  if (r.peers) r.peers->reset_stats();
}
}  // namespace

// Followers may still be recording the tail of the last step when the driver
// returns from forward(); a control command plus a barrier makes every rank
// finish first, so the counters read or reset are exact.
void Engine::control(int64_t command, int64_t arg) {
  Rank& r = *ranks_[0];
  if (world_size() == 1) return;
  PARALLM_CHECK_MSG(in_pipe_.empty() && ready_.empty(), "Engine: a command while steps are in flight");
  if (r.peers) {
    r.peers->broadcast(&command, sizeof(command), 0);
    r.peers->broadcast(&arg, sizeof(arg), 0);
  }
  send_down(r, command, nullptr, arg, 0);
  if (command != kStopCommand) r.world->barrier();
}

std::vector<RankStats> Engine::rank_stats() {
  control(kSyncCommand);
  std::vector<RankStats> out;
  for (const auto& r : ranks_) out.push_back(r->stats);
  return out;
}

void Engine::reset_stats() {
  // The driver zeroes its counters after the barrier: the control traffic is not a step's.
  control(kResetStatsCommand);
  reset_rank_stats(*ranks_[0]);
}

MoeStats Engine::moe_stats() const {
  MoeStats total;
  for (const auto& r : ranks_) {
    const auto& s = r->model->moe_stats().tokens_per_expert;
    if (total.tokens_per_expert.size() < s.size()) total.tokens_per_expert.resize(s.size(), 0);
    for (size_t i = 0; i < s.size(); ++i) total.tokens_per_expert[i] += s[i];
  }
  return total;
}

std::string Engine::summary() const {
  const ModelFile& f = *model_file_;
  // With --dtype, what the ranks hold after the conversion too (the file's
  // size says nothing about it).
  std::string converted;
  if (options_.weight_dtype) {
    size_t held = 0;
    for (size_t b : rank_weight_bytes()) held += b;
    converted = strfmt(", matrices as %s: %s", dtype_name(*options_.weight_dtype),
                       format_bytes(static_cast<double>(held)).c_str());
  }
  // The local ranks' devices: "cpu:0", "cuda:0 x2" when ranks share one.
  std::string devices;
  for (size_t i = 0; i < ranks_.size();) {
    size_t j = i;
    while (j < ranks_.size() && ranks_[j]->model->device_name() == ranks_[i]->model->device_name()) ++j;
    devices += (devices.empty() ? "" : ",") + ranks_[i]->model->device_name() +
               (j - i > 1 ? strfmt(" x%zu", j - i) : std::string());
    i = j;
  }
  return strfmt("loaded %s (%s, stored weights %s%s) tp=%d pp=%d ep=%d on %s, ctx %lld, kv %s, %d thread(s)/rank; %s",
                f.path.c_str(), f.format.c_str(), format_bytes(static_cast<double>(f.weight_bytes())).c_str(),
                converted.c_str(), options_.tp, options_.pp, options_.ep, devices.c_str(), (long long)ctx_size_,
                dtype_name(options_.kv_dtype), ranks_[0]->pool->size(), f.config.summary().c_str());
}

}  // namespace parallm
