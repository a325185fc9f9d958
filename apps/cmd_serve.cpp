// `parallm serve`: the OpenAI-compatible server. It listens at once (/health
// answers 503 while the model loads), sizes the paged KV pool from what each
// device has left after weights and a profiled activation peak, builds --dp
// replicas of tp × pp ranks behind the router, and serves until SIGINT/SIGTERM.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "comm/comm_factory.h"
#include "command_registry.h"
#include "core/capacity.h"
#include "core/device.h"
#include "default_model.h"
#include "engine/engine.h"
#include "engine_cli.h"
#include "loader/model_file.h"
#include "model/kv_pool.h"
#include "serve_compat.h"
#include "serve_dp_processes.h"
#include "server/api_keys.h"
#include "server/engine_backend.h"
#include "server/http_server.h"
#include "server/jinja/jinja.h"
#include "server/origin_policy.h"
#include "server/replica_set_backend.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {
namespace {

// SIGINT / SIGTERM: the first drains (docs/server.md "Shutdown"), a second
// exits at once.
std::atomic<int> g_signals{0};
void on_signal(int sig) {
  if (g_signals.fetch_add(1) >= 1) ::_exit(128 + sig);
}

// vLLM's periodic line: throughput since the last line, requests, KV usage.
// Idle intervals are not logged.
class StatsLine {
 public:
  explicit StatsLine(const CompletionBackend& b) : backend_(b), last_(backend_.metrics()) {}
  void maybe_log() {
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - t_).count();
    if (dt < kIntervalS) return;
    const ServingMetrics m = backend_.metrics();
    const double prompt = static_cast<double>(m.prompt_tokens_total - last_.prompt_tokens_total) / dt;
    const double gen = static_cast<double>(m.generation_tokens_total - last_.generation_tokens_total) / dt;
    if (prompt > 0 || gen > 0 || m.num_requests_running > 0 || m.num_requests_waiting > 0) {
      log_info(
          strfmt("Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %lld reqs, "
                 "Waiting: %lld reqs, KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
                 prompt, gen, (long long)m.num_requests_running, (long long)m.num_requests_waiting,
                 100.0 * m.kv_cache_usage, 100.0 * m.prefix_cache_hit_rate));
    }
    last_ = m;
    t_ = now;
  }

 private:
  static constexpr double kIntervalS = 10.0;
  const CompletionBackend& backend_;
  ServingMetrics last_;
  std::chrono::steady_clock::time_point t_ = std::chrono::steady_clock::now();
};

struct ServeCli {
  EngineCli engine;
  ServeCompat compat;
  std::vector<std::string> served_model_names;
  std::string host = "127.0.0.1", api_key, api_key_file, metrics_api_key, chat_template, reasoning_parser,
              max_body = "8M", max_tokenize_body = "2M", routing = "least-outstanding-tokens";
  std::string stream_interval = "auto", allowed_origins, allowed_hosts;
  int port = 8000, dp = 1, http_threads = 4, max_connections = 8192, max_connections_per_client = 2048,
      max_json_depth = 128;
  double header_timeout = 10, body_timeout = 60, keep_alive_timeout = 5, write_timeout = 30, shutdown_timeout = 30;
  std::string log_level = "info";
  bool log_prompts = false;
  int64_t max_model_len = 0, max_num_seqs = 256, max_num_batched_tokens = 2048, max_queue = 1024, kv_blocks = 0;
  int64_t block_size = 16;
  int64_t max_input_tokens = 0, max_output_tokens = 0, long_prompt_threshold = 0;
  double memory_utilization = 0.9, rate_limit = 0;
  bool no_prefix_caching = false;
  bool dp_processes = false;
};

// The KV pool of a replica: per device, (budget × utilization − weights −
// activations) / bytes per block, capped at what max_num_seqs sequences of
// max_model_len could ever hold. The engine is built with the pool an
// activation estimate leaves, profiles its largest step (Engine::profile_step),
// and the pool is then resized to what the measured peak leaves.
struct KvSizing {
  int64_t budget = 0;          // bytes per device
  double weights = 0;          // bytes per device
  double block_bytes = 0;      // one block on one device
  int64_t blocks_per_seq = 0;  // one sequence of max_model_len
  int64_t max_blocks = 0;      // max_num_seqs such sequences
  int64_t max_model_len = 0;
  int64_t block_size = 0;
  double activation_estimate = 0;  // bytes per device, before the profile

  KvSizing(const ServeCli& s, const EngineOptions& eo, const ModelFile& mf, int64_t max_len) : max_model_len(max_len) {
    const ModelConfig& c = mf.config;
    const int world = eo.parallel().world_size();
    budget = eo.device_memory_bytes > 0
                 ? eo.device_memory_bytes
                 : static_cast<int64_t>(total_system_memory_bytes() / static_cast<uint64_t>(world * s.dp));
    weights = static_cast<double>(mf.weight_bytes()) / world;  // NOTE: --dtype conversion not reflected
    // Every rank holds the same blocks for its own layers: the stage with the
    // most layers bounds the pool.
    const std::vector<int64_t> stages = pipeline_stage_layers(c, eo.pp, eo.pp_layers);
    const int64_t layers_per_rank = *std::max_element(stages.begin(), stages.end());
    block_bytes =
        static_cast<double>(KvPool::bytes_per_token(layers_per_rank, std::max<int64_t>(1, c.kv_heads() / eo.tp),
                                                    c.kv_row_dim(), eo.kv_dtype, c.kv_values_in_keys())) *
        static_cast<double>(eo.block_size);
    block_size = eo.block_size;
    blocks_per_seq = (max_model_len + eo.block_size - 1) / eo.block_size;
    max_blocks = s.max_num_seqs * blocks_per_seq;
    activation_estimate = estimate_activations(s, c);
  }

  // An allowance for the activations before the profile: the residual
  // stream, norms, Q/K/V, attention output, projections and FFN of every
  // batched token in f32 (with room for the kernels' scratch), and a logits
  // row per sequence.
  static double estimate_activations(const ServeCli& s, const ModelConfig& c) {
    return static_cast<double>(s.max_num_batched_tokens) * static_cast<double>(c.n_embd * 16 + c.n_ff * 8) +
           static_cast<double>(std::min(s.max_num_seqs, s.max_num_batched_tokens)) * static_cast<double>(c.n_vocab) * 4;
  }

  // GPU ranks: the budget and the weights each rank's device holds, as the
  // engine measured them (the smallest budget and the largest share bound
  // the pool, which every rank holds alike).
  void measured(const Engine& engine) {
    const std::vector<uint64_t> budgets = engine.rank_budgets();
    const std::vector<size_t> held = engine.rank_weight_bytes();
    budget = static_cast<int64_t>(*std::min_element(budgets.begin(), budgets.end()));
    weights = static_cast<double>(*std::max_element(held.begin(), held.end()));
  }

  int64_t blocks(const ServeCli& s, double activations) const {
    if (s.kv_blocks > 0) return s.kv_blocks;
    // The planner's and the engine's rule (core/capacity.h), in blocks.
    const DeviceFit fit = fit_device(static_cast<double>(budget), s.memory_utilization, weights, activations, 0,
                                     block_bytes, blocks_per_seq);
    const int64_t n = fit.kv_units;
    if (!fit.fits) {
      throw InputError(
          strfmt("the KV cache fits %lld blocks per device but one sequence of --max-model-len %lld needs %lld "
                 "(%s budget × %.2f, weights %s, activations %s): lower --max-model-len or "
                 "--max-num-batched-tokens, raise --device-memory / --memory-utilization, or add --tp / --pp",
                 (long long)n, (long long)max_model_len, (long long)blocks_per_seq,
                 format_bytes(static_cast<double>(budget)).c_str(), s.memory_utilization, format_bytes(weights).c_str(),
                 format_bytes(activations).c_str()));
    }
    return std::min(n, max_blocks);
  }

  void log(const ServeCli& s, int64_t n_blocks, double activations) const {
    log_info(strfmt(
        "KV cache: %lld blocks of %lld tokens = %lld tokens per replica (%s per device; weights %s, "
        "activations %s of a %s budget × %.2f); max concurrency at --max-model-len %lld: %.1f",
        (long long)n_blocks, (long long)block_size, (long long)(n_blocks * block_size),
        format_bytes(static_cast<double>(n_blocks) * block_bytes).c_str(), format_bytes(weights).c_str(),
        format_bytes(activations).c_str(), format_bytes(static_cast<double>(budget)).c_str(), s.memory_utilization,
        (long long)max_model_len, static_cast<double>(n_blocks) / static_cast<double>(blocks_per_seq)));
  }
};

// --stream-interval: "auto" or a count of tokens >= 1.
int64_t parse_stream_interval(const std::string& v) {
  if (v == "auto") return kStreamIntervalAuto;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 1) {
    throw InputError("--stream-interval must be 'auto' or a number of tokens >= 1, not '" + v + "'");
  }
  return n;
}

// --chat-template: a file holding the template, or (as vLLM accepts) the
// template itself. Checked here, before the model loads.
std::string read_chat_template(const std::string& v) {
  if (v.empty()) return "";
  std::string source;
  std::ifstream f(v, std::ios::binary);
  if (f && !std::filesystem::is_directory(v)) {
    source.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } else if (v.find("{{") != std::string::npos || v.find("{%") != std::string::npos) {
    source = v;
  } else {
    throw InputError("--chat-template: '" + v + "' is neither a readable file nor a Jinja template");
  }
  if (source.empty()) throw InputError("--chat-template: '" + v + "' is empty");
  try {
    jinja::CompiledTemplate check(source);
  } catch (const InputError& e) {
    throw InputError(std::string("--chat-template does not parse: ") + e.what());
  }
  return source;
}

// The server's options from the command line and the environment; checked
// before the model loads.
ServerOptions server_options(const ServeCli& s) {
  ServerOptions so;
  so.host = s.host;
  so.port = s.port;
  so.api_key = s.api_key.empty() ? ApiKeys::from_environment() : s.api_key;
  if (!s.api_key_file.empty()) so.api_keys = ApiKeys::read_file(s.api_key_file);
  so.metrics_api_key = s.metrics_api_key;
  so.allowed_origins = OriginPolicy::parse_list("--allowed-origins", s.allowed_origins);
  so.allowed_hosts = OriginPolicy::parse_list("--allowed-hosts", s.allowed_hosts);
  so.max_input_tokens = s.max_input_tokens;
  so.max_output_tokens = s.max_output_tokens;
  so.max_body_bytes = static_cast<size_t>(parse_size(s.max_body));
  so.max_tokenize_bytes = static_cast<size_t>(parse_size(s.max_tokenize_body));
  if (s.max_json_depth < 1) throw InputError("--max-json-depth must be >= 1");
  so.max_json_depth = s.max_json_depth;
  if (s.rate_limit < 0) throw InputError("--rate-limit must be >= 0");
  so.rate_limit_per_minute = s.rate_limit;
  so.http_threads = s.http_threads;
  so.max_connections = s.max_connections;
  so.max_connections_per_client = s.max_connections_per_client;
  for (double t : {s.header_timeout, s.body_timeout, s.keep_alive_timeout, s.write_timeout}) {
    if (!(t > 0)) throw InputError("--http-*-timeout values must be > 0 seconds");
  }
  so.header_timeout_s = s.header_timeout;
  so.body_timeout_s = s.body_timeout;
  so.keep_alive_timeout_s = s.keep_alive_timeout;
  so.write_timeout_s = s.write_timeout;
  so.stream_interval = parse_stream_interval(s.stream_interval);
  so.chat_template = read_chat_template(s.chat_template);  // before any slow work
  so.reasoning_format = parse_reasoning_format(s.reasoning_parser);
  so.log_prompts = s.log_prompts;
  so.version = PARALLM_VERSION;
  if (!(s.shutdown_timeout >= 0)) throw InputError("--shutdown-timeout must be >= 0 seconds");
  set_log_level(parse_log_level(s.log_level));
  set_log_timestamps(true);
  return so;
}

// Connections need descriptors: lift the soft limit to the hard one.
void raise_open_files_limit(int wanted) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t want = static_cast<rlim_t>(wanted) + 256;
  if (rl.rlim_cur >= want) return;
  rl.rlim_cur = std::min(rl.rlim_max, want);
  ::setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want) {
    log_warn(strfmt("open files limit %llu is below --max-connections %d: raise ulimit -n",
                    (unsigned long long)rl.rlim_cur, wanted));
  }
}

int run_serve(const ServeCli& s) {
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  if (s.dp < 1) throw InputError("--dp must be >= 1");
  if (!(s.memory_utilization > 0 && s.memory_utilization <= 1))
    throw InputError("--memory-utilization must be in (0, 1]");
  if (s.max_num_seqs < 1 || s.max_num_batched_tokens < 1 || s.max_queue < 0) {
    throw InputError("--max-num-seqs and --max-num-batched-tokens must be >= 1, --max-queue >= 0");
  }
  ServerOptions so = server_options(s);
  if (s.dp_processes) {
    if (s.dp < 2) throw InputError("--dp-processes needs --dp 2 or more");
    const EngineOptions peek = s.engine.to_options();
    if (peek.comm != "local") throw InputError("--dp-processes needs --comm local (each replica is one process)");
    DpProcessOptions o;
    o.dp = s.dp;
    o.host = s.host;
    o.port = s.port;
    o.routing = s.routing;
    o.devices = peek.devices;
    o.world = peek.parallel().world_size();
    o.shutdown_timeout_s = s.shutdown_timeout;
    return run_serve_dp_processes(o, g_signals);
  }
  CommSession comm_session(s.engine.comm);
  // Over MPI's own SIGTERM handler (which dies at once): the driver must
  // live long enough to answer its clients when mpirun ends the job because
  // a rank died. Followers keep it: they never look at g_signals.
  if (comm_session.rank() == 0) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
  }
  EngineOptions eo = s.engine.to_options();
  if (s.block_size < 1 || s.block_size > 1024) throw InputError("--block-size must be in [1, 1024] tokens");
  eo.block_size = s.block_size;
  if (s.dp > 1 && !eo.devices.empty()) throw InputError("--devices with --dp > 1 is not supported yet");
  if (s.dp > 1 && eo.comm != "local") throw InputError("--dp > 1 needs --comm local");
  if (eo.model_path.empty()) {
    eo.model_path = default_model_path();
    if (eo.ctx_size == 0 && s.max_model_len == 0) eo.ctx_size = kDefaultModelCtxTokens;
  }
  if (s.compat.enable_expert_parallel) s.compat.apply_expert_parallel(open_model(eo.model_path)->config, eo.tp, &eo.ep);
  if (s.max_model_len > 0 && eo.ctx_size == 0) eo.ctx_size = s.max_model_len;
  if (s.max_model_len > 0 && s.max_model_len > eo.ctx_size) throw InputError("--max-model-len must be <= --ctx-size");
  const int world = eo.parallel().world_size();
  if (eo.threads == 0) eo.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / (world * s.dp));

  if (s.served_model_names.empty()) {
    std::string name = eo.model_path;
    const size_t slash = name.find_last_of('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
    so.served_model_name = name;
  } else {  // vLLM: the first name is reported, every one is accepted
    so.served_model_name = s.served_model_names.front();
    so.served_model_aliases.assign(s.served_model_names.begin() + 1, s.served_model_names.end());
  }
  // Under mpirun only rank 0 listens; the others follow its steps.
  // NOTE: this was `!comm_session.active()`, so under MPI no process listened
  // and rank 0 crashed on the missing server once the model was loaded.
  const bool driver_process = comm_session.rank() == 0;
  std::unique_ptr<HttpServer> server;
  if (driver_process) {
    raise_open_files_limit(so.max_connections);
    server = std::make_unique<HttpServer>(so);
    const int port = server->bind();
    server->start();
    std::fprintf(stderr, "parallm serve: listening on http://%s:%d (loading %s)\n", s.host.c_str(), port,
                 eo.model_path.c_str());
  }

  // Context first (the pool is sized for it), then the pool.
  std::unique_ptr<ModelFile> probe = open_model(eo.model_path);
  const int64_t ctx = eo.ctx_size > 0 ? eo.ctx_size : probe->config.n_ctx_train;
  const int64_t max_model_len = s.max_model_len > 0 ? s.max_model_len : ctx;
  KvSizing sizing(s, eo, *probe, max_model_len);
  probe.reset();  // the engine opens the file itself
  // GPU ranks: the budget is the device's free memory, known once the ranks
  // hold their devices, so the engine starts with the blocks the profiled
  // step needs and the pool is sized after the profile (as vLLM sizes it
  // from --gpu-memory-utilization).
  bool gpu_ranks = false;
  if (!eo.devices.empty()) gpu_ranks = parse_device_list(eo.devices)[0].kind != DeviceId::Kind::kCpu;
  if (gpu_ranks && s.kv_blocks == 0) {
    const int64_t step_blocks = (s.max_num_batched_tokens + eo.block_size - 1) / eo.block_size +
                                std::min(s.max_num_seqs, s.max_num_batched_tokens);
    eo.kv_blocks = std::max(sizing.blocks_per_seq, std::min(step_blocks, sizing.max_blocks));
  } else {
    eo.kv_blocks = sizing.blocks(s, sizing.activation_estimate);
  }

  ServingOptions sopt;
  sopt.max_num_seqs = s.max_num_seqs;
  sopt.max_num_batched_tokens = s.max_num_batched_tokens;
  sopt.max_model_len = max_model_len;
  sopt.max_queue = s.max_queue;
  sopt.long_prompt_threshold = s.long_prompt_threshold;
  sopt.enable_prefix_caching = !s.no_prefix_caching;

  std::vector<std::unique_ptr<CompletionBackend>> replicas;
  for (int r = 0; r < s.dp; ++r) {
    auto engine = std::make_unique<Engine>(eo);
    if (!engine->is_driver()) {  // MPI follower rank
      engine->serve_forever();
      return 0;
    }
    if (r == 0) log_info(engine->summary());
    if (engine->on_devices()) sizing.measured(*engine);
    size_t activations = static_cast<size_t>(sizing.activation_estimate);
    if (s.kv_blocks == 0) {  // a pool of a given size needs no profile
      const auto t0 = std::chrono::steady_clock::now();
      activations = engine->profile_step(s.max_num_batched_tokens, s.max_num_seqs);
      const int64_t blocks = sizing.blocks(s, static_cast<double>(activations));
      if (blocks != engine->n_kv_blocks()) engine->resize_kv_pool(blocks);
      if (r == 0) {
        log_info(strfmt(
            "profiled a step of %lld tokens / %lld sequences in %.1f s: activations %s per device (estimate %s)",
            (long long)s.max_num_batched_tokens, (long long)s.max_num_seqs,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            format_bytes(static_cast<double>(activations)).c_str(), format_bytes(sizing.activation_estimate).c_str()));
      }
    }
    if (r == 0) sizing.log(s, engine->n_kv_blocks(), static_cast<double>(activations));
    std::vector<std::string> names;
    if (!eo.devices.empty()) {
      for (const auto& d : parse_device_list(eo.devices)) names.push_back(d.to_string());
    } else {
      for (int i = 0; i < world; ++i) names.push_back(strfmt("cpu:%d", r * world + i));
    }
    std::function<std::string()> lost_ranks;
    if (comm_session.active()) lost_ranks = [] { return lost_peer_processes(); };
    replicas.push_back(std::make_unique<EngineBackend>(std::move(engine), sopt, names, std::move(lost_ranks)));
  }
  std::unique_ptr<CompletionBackend> backend;
  if (replicas.size() == 1)
    backend = std::move(replicas[0]);
  else
    backend = std::make_unique<ReplicaSetBackend>(std::move(replicas), s.routing);
  server->set_backend(backend.get());
  std::fprintf(stderr, "parallm serve: ready, model '%s', max model len %lld, %d replica(s)\n",
               so.served_model_name.c_str(), (long long)max_model_len, s.dp);
  StatsLine stats(*backend);
  while (g_signals.load() == 0 && server->failure().empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!s.compat.disable_log_stats) stats.maybe_log();
  }
  // A lost rank (seen by the server's tick, or the reason mpirun sent SIGTERM):
  // the requests in flight are ended with the error, /health answers 503;
  // once they are out, exit non-zero. Not through the destructors: the step
  // thread may wait in a collective with the dead rank until its timeout.
  std::string failure = server->failure();
  if (failure.empty() && comm_session.active()) {
    const std::string lost = lost_peer_processes();
    if (!lost.empty()) failure = "lost " + lost;
  }
  if (!failure.empty()) {
    for (int i = 0; i < 50 && (server->failure().empty() || server->active_requests() > 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the loop sends what was queued
    std::fprintf(stderr, "parallm: error: serving failed: %s\n", failure.c_str());
    std::fflush(stderr);
    std::_Exit(3);
  }
  // Drain: new requests and /health get 503 (a load balancer takes the
  // replica out), requests in flight finish, up to --shutdown-timeout; what
  // is left then ends with finish_reason "abort" and [DONE].
  log_info(strfmt("shutting down: draining %zu request(s) in flight (up to %.0f s; a second signal exits at once)",
                  server->active_requests(), s.shutdown_timeout));
  server->begin_drain();
  const auto drain_until = std::chrono::steady_clock::now() + std::chrono::duration<double>(s.shutdown_timeout);
  while (server->active_requests() > 0 && std::chrono::steady_clock::now() < drain_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (server->active_requests() > 0) {
    log_warn(strfmt("shutdown timeout: ending %zu request(s) now", server->active_requests()));
    server->finish_active("abort");
  }
  std::fprintf(stderr, "parallm serve: shutting down\n");
  server->set_backend(nullptr);
  server->stop();
  backend.reset();
  return 0;
}

const bool registered = register_command(
    {"serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App& sub) -> CommandAction {
       auto s = std::make_shared<ServeCli>();
       s->engine.add_to(sub, /*model_required=*/false);
       sub.add_option("--host", s->host, "Address to bind")->capture_default_str();
       sub.add_option("--port", s->port, "Port (0 = any free port)")->capture_default_str();
       sub.add_option("--dp,--data-parallel-size", s->dp, "Data-parallel replicas behind the built-in router (-dp)")
           ->capture_default_str();
       sub.add_option("--api-key", s->api_key,
                      "Require 'Authorization: Bearer KEY' on the API (also PARALLM_API_KEY or VLLM_API_KEY)");
       sub.add_option("--api-key-file", s->api_key_file, "Accept every key of this file (one per line)");
       sub.add_option("--metrics-api-key", s->metrics_api_key, "Require 'Authorization: Bearer KEY' on /metrics");
       sub.add_option("--allowed-origins", s->allowed_origins,
                      "CORS: origins that web pages may call from ('*', a JSON list or comma-separated; default none)");
       sub.add_option("--allowed-hosts", s->allowed_hosts,
                      "Answer only requests whose Host is one of these names (comma-separated; default any)");
       sub.add_option("--max-connections", s->max_connections, "Open connections at most (503 past it)")
           ->capture_default_str();
       sub.add_option("--max-connections-per-client", s->max_connections_per_client,
                      "Open connections per client address (429 past it)")
           ->capture_default_str();
       sub.add_option("--http-header-timeout", s->header_timeout, "Seconds for a request's headers to arrive")
           ->capture_default_str();
       sub.add_option("--http-body-timeout", s->body_timeout, "Seconds for a request's body to arrive")
           ->capture_default_str();
       sub.add_option("--http-keep-alive-timeout", s->keep_alive_timeout, "Seconds an idle connection stays open")
           ->capture_default_str();
       sub.add_option("--http-write-timeout", s->write_timeout, "Seconds a client may stop reading its response")
           ->capture_default_str();
       sub.add_option("--max-json-depth", s->max_json_depth, "Deepest nesting of a request body's JSON (400 past it)")
           ->capture_default_str();
       sub.add_option("--max-tokenize-body", s->max_tokenize_body, "Largest /tokenize or /detokenize body (413 above)")
           ->capture_default_str();
       sub.add_option("--shutdown-timeout", s->shutdown_timeout,
                      "Seconds SIGTERM / SIGINT lets requests in flight finish before ending them")
           ->capture_default_str();
       sub.add_option("--log-level", s->log_level, "error, warn, info or debug")->capture_default_str();
       sub.add_flag("--log-prompts", s->log_prompts, "Write prompts into the access log (off: they are users' data)");
       sub.add_option("--served-model-name,--alias", s->served_model_names,
                      "Model names in the API: the first is reported, each is accepted (default: the file name)");
       sub.add_option("--reasoning-parser", s->reasoning_parser,
                      "Split <think>...</think> into reasoning_content: deepseek_r1 or qwen3");
       sub.add_option("--chat-template", s->chat_template,
                      "Jinja chat template to use instead of the model's: a file, or the template itself");
       sub.add_option("--max-model-len", s->max_model_len, "Prompt + output tokens per request (default: --ctx-size)");
       sub.add_option("--max-num-seqs,--parallel", s->max_num_seqs, "Sequences batched at once (-np)")
           ->capture_default_str();
       sub.add_option("--max-num-batched-tokens", s->max_num_batched_tokens, "Tokens per step (chunked prefill)")
           ->capture_default_str();
       sub.add_option("--memory-utilization,--gpu-memory-utilization", s->memory_utilization,
                      "Fraction of device memory to use")
           ->capture_default_str();
       sub.add_option("--max-queue", s->max_queue, "Waiting requests before 429")->capture_default_str();
       sub.add_option("--long-prompt-threshold", s->long_prompt_threshold,
                      "Prompts longer than this wait in their own queue");
       sub.add_option("--kv-blocks", s->kv_blocks, "KV blocks per replica (default: sized from memory)");
       sub.add_option("--max-input-tokens", s->max_input_tokens, "Longest prompt accepted (default: --max-model-len)");
       sub.add_option("--max-output-tokens", s->max_output_tokens,
                      "Largest max_tokens accepted (default: --max-model-len)");
       sub.add_option("--max-body", s->max_body, "Largest request body (413 above)")->capture_default_str();
       sub.add_option("--rate-limit", s->rate_limit,
                      "Requests per minute per API key, or per client address without keys (0 = off)");
       sub.add_option("--http-threads", s->http_threads,
                      "Threads that run request handlers and streams (connections need none)")
           ->capture_default_str();
       sub.add_option("--stream-interval", s->stream_interval,
                      "Tokens per streamed write after the first: N, or auto (grows with the load; docs/server.md)")
           ->capture_default_str();
       sub.add_option("--routing", s->routing,
                      "--dp routing policy (with --dp-processes also the router's: prefix-affinity, round-robin)")
           ->capture_default_str();
       sub.add_flag("--dp-processes", s->dp_processes,
                    "Run each --dp replica as its own process behind the router, restarted if it crashes");
       sub.add_flag("--no-prefix-caching,--no-enable-prefix-caching,!--enable-prefix-caching", s->no_prefix_caching,
                    "Disable prefix caching (--enable-prefix-caching: on, the default)");
       sub.add_option("--block-size", s->block_size, "Tokens per KV cache block")->capture_default_str();
       s->compat.add_to(sub);
       return [s] {
         s->compat.apply(&s->engine.model, &s->log_level, &s->log_prompts);
         return run_serve(*s);
       };
     }});

}  // namespace
}  // namespace parallm
