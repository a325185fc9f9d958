// The embeddings flow (see embeddings_api.h). An EmbeddingFlow submits every
// input, collects each one's final event on the step thread (under its own
// lock, quick), and once the last is in posts the rendering to a worker.
// Like a completion it registers as an ActiveRequest, so a failed backend or
// a stopping server ends it with an error, and a client that leaves aborts
// what is still queued.
#include "server/embeddings_api.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <mutex>

#include "server/access_log.h"
#include "server/api_error.h"
#include "server/embedding_request.h"
#include "server/model_names.h"
#include "tokenizer/tokenizer.h"
#include "util/base64.h"

namespace parallm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The inputs as token ids, each checked against the vocabulary and the
// server's input limit (the whole input must fit: nothing is generated).
std::vector<std::vector<int32_t>> tokenize_inputs(const CompletionContext& ctx, const EmbeddingParams& p) {
  const Tokenizer& tok = ctx.backend.tokenizer();
  const int64_t max_len = ctx.backend.max_model_len();
  const int64_t max_in = ctx.options.max_input_tokens > 0 ? std::min(ctx.options.max_input_tokens, max_len) : max_len;
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const PromptInput& in = p.inputs[i];
    std::vector<int32_t> ids;
    if (in.is_tokens) {
      for (int32_t t : in.tokens) {
        if (t >= tok.n_vocab())
          throw bad_request("token id " + std::to_string(t) + " is outside the vocabulary", "input");
      }
      ids = in.tokens;
    } else {
      ids = tok.encode(in.text, /*add_special=*/true, /*parse_special=*/true);
    }
    if (ids.empty()) throw bad_request("input " + std::to_string(i) + " has no tokens", "input");
    if (static_cast<int64_t>(ids.size()) > max_in) {
      throw ApiError(400,
                     "input " + std::to_string(i) + " has " + std::to_string(ids.size()) +
                         " tokens; this server embeds at most " + std::to_string(max_in) + " tokens per input",
                     "invalid_request_error", "input", "context_length_exceeded");
    }
    out.push_back(std::move(ids));
  }
  return out;
}

class EmbeddingFlow : public ActiveRequest, public std::enable_shared_from_this<EmbeddingFlow> {
 public:
  EmbeddingFlow(const CompletionContext& ctx, EmbeddingParams params, std::vector<std::vector<int32_t>> inputs,
                std::shared_ptr<net::HttpExchange> exchange)
      : backend_(ctx.backend),
        work_(ctx.work),
        active_(ctx.active),
        metrics_(ctx.metrics),
        exchange_(std::move(exchange)),
        model_(ctx.options.served_model_name),
        extra_headers_(ctx.extra_headers),
        base64_(params.base64),
        inputs_(std::move(inputs)),
        results_(inputs_.size()) {}

  // Submits every input. Throws ApiError (nothing sent) when the backend refuses one.
  void start() {
    std::weak_ptr<EmbeddingFlow> weak = weak_from_this();
    submit_all(weak);
    // Outside mu_: on_gone runs its function at once when the client is gone already.
    exchange_->on_gone([weak] {
      if (auto f = weak.lock()) f->client_gone();
    });
    auto metrics = &metrics_;
    auto delivered = delivered_;
    exchange_->on_finished([metrics, delivered](bool ok) {
      if (!ok) return;
      std::lock_guard<std::mutex> lock(delivered->mu);
      if (!delivered->success) return;
      metrics->requests_ok++;
      for (const FinishedChoice& c : delivered->inputs) metrics->observe_delivered(c);
    });
    post_if_done();  // every event may be in already
  }

  void tick(Clock::time_point) override {}

  void fail(int status, const std::string& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    abort_unfinished();
    respond_error(ApiError(status, message, "server_error"));
  }

  // Graceful shutdown past its timeout: an embedding has no partial answer.
  void finish_now(const std::string&) override { fail(503, "the server is shutting down"); }

 private:
  void submit_all(const std::weak_ptr<EmbeddingFlow>& weak) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      ServingRequest r;
      r.prompt = inputs_[i];
      r.embed = true;
      uint64_t id = 0;
      const SubmitStatus st = backend_.submit(
          std::move(r),
          [weak, i](const TokenEvent& e) {
            if (!e.finished) return;
            if (auto f = weak.lock()) f->on_final(i, e);
          },
          &id);
      if (st != SubmitStatus::kOk) {
        ended_ = true;  // the route answers the error; late events render nothing
        abort_unfinished();
        if (st == SubmitStatus::kQueueFull) {
          throw ApiError(429, "the server is at its queue limit (--max-queue); retry later", "rate_limit_error", "",
                         "queue_full");
        }
        throw ApiError(400, "an input can never fit in the KV cache of this server", "invalid_request_error", "input",
                       "context_length_exceeded");
      }
      std::lock_guard<std::mutex> rl(results_mu_);
      results_[i].backend_id = id;
      results_[i].submitted = true;
    }
    if (active_) active_->add(shared_from_this());
  }

  struct Result {
    uint64_t backend_id = 0;
    bool submitted = false, finished = false;
    TokenEvent event;
    Clock::time_point at;
  };

  void on_final(size_t i, const TokenEvent& e) {
    {
      std::lock_guard<std::mutex> lock(results_mu_);
      results_[i].finished = true;
      results_[i].event = e;
      results_[i].at = Clock::now();
      ++n_finished_;
    }
    post_if_done();
  }

  void post_if_done() {
    {
      std::lock_guard<std::mutex> lock(results_mu_);
      if (n_finished_ < results_.size() || posted_) return;
      posted_ = true;
    }
    std::weak_ptr<EmbeddingFlow> weak = weak_from_this();
    work_->post([weak] {
      if (auto f = weak.lock()) f->render();
    });
  }

  // The ids under results_mu_, the aborts after it: a backend may hold its
  // own lock while it delivers an event (which takes results_mu_).
  void abort_unfinished() {
    std::vector<uint64_t> ids;
    {
      std::lock_guard<std::mutex> lock(results_mu_);
      for (const Result& r : results_) {
        if (r.submitted && !r.finished) ids.push_back(r.backend_id);
      }
    }
    for (uint64_t id : ids) backend_.abort(id);
  }

  void client_gone() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    status_ = 499;
    abort_unfinished();
    end();
  }

  void render() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    json data = json::array();
    int64_t prompt_tokens = 0;
    std::vector<FinishedChoice> records;
    for (size_t i = 0; i < results_.size(); ++i) {
      const TokenEvent& e = results_[i].event;
      if (e.finish_reason != "stop" || e.embedding.empty()) {
        const std::string why = e.finish_reason == "error" ? e.error : "it ended with '" + e.finish_reason + "'";
        respond_error(ApiError(e.finish_reason == "abort" ? 503 : 500,
                               "embedding input " + std::to_string(i) + " failed: " + why, "server_error"));
        return;
      }
      prompt_tokens += e.prompt_tokens;
      json item = {{"object", "embedding"}, {"index", i}};
      if (base64_) {
        // The SDKs decode base64 as little-endian float32 (this host's order).
        static_assert(std::endian::native == std::endian::little, "base64 embeddings assume a little-endian host");
        item["embedding"] = base64_encode(e.embedding.data(), e.embedding.size() * sizeof(float));
      } else {
        item["embedding"] = e.embedding;
      }
      data.push_back(std::move(item));
      FinishedChoice c;
      c.finish_reason = e.finish_reason;
      c.prompt_tokens = e.prompt_tokens;
      c.e2e_s = std::chrono::duration<double>(results_[i].at - t0_).count();
      records.push_back(c);
    }
    n_prompt_tokens_ = prompt_tokens;
    {
      std::lock_guard<std::mutex> dl(delivered_->mu);
      delivered_->success = true;
      delivered_->inputs = std::move(records);
    }
    net::HttpResponse r;
    r.set_content(dump({{"object", "list"},
                        {"data", std::move(data)},
                        {"model", model_},
                        {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}}),
                  "application/json");
    respond(std::move(r));
  }

  void respond_error(const ApiError& e) {
    net::HttpResponse r;
    r.status = e.status();
    r.set_content(dump(e.body()), "application/json");
    respond(std::move(r));
  }

  void respond(net::HttpResponse r) {
    status_ = r.status;
    for (const auto& [k, v] : extra_headers_) r.set_header(k, v);
    exchange_->respond(std::move(r));
    end();
  }

  void end() {
    ended_ = true;
    AccessRecord rec;
    rec.status = status_;
    rec.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    rec.prompt_tokens = n_prompt_tokens_;
    rec.completion_tokens = 0;
    log_access(exchange_->request(), rec);
    if (active_) active_->remove(this);
  }

  CompletionBackend& backend_;
  std::shared_ptr<net::WorkQueue> work_;
  ActiveRequests* active_;
  ServerMetrics& metrics_;
  std::shared_ptr<net::HttpExchange> exchange_;
  const std::string model_;
  const net::HttpHeaders extra_headers_;
  const bool base64_;
  const std::vector<std::vector<int32_t>> inputs_;
  const Clock::time_point t0_ = Clock::now();

  std::mutex mu_;  // one of start / render / fail / client_gone at a time
  bool ended_ = false;
  int status_ = 200;
  int64_t n_prompt_tokens_ = 0;

  std::mutex results_mu_;  // the step thread's events (never taken while waiting for mu_)
  std::vector<Result> results_;
  size_t n_finished_ = 0;
  bool posted_ = false;

  // What the exchange's on_finished callback reads (it may outlive the flow).
  struct Delivered {
    std::mutex mu;
    bool success = false;
    std::vector<FinishedChoice> inputs;
  };
  std::shared_ptr<Delivered> delivered_ = std::make_shared<Delivered>();
};

}  // namespace

void handle_embeddings(const CompletionContext& ctx, const std::shared_ptr<net::HttpExchange>& exchange) {
  EmbeddingParams p = parse_embedding_request(exchange->request().body, request_json_limits(ctx.options));
  if (!p.model.empty() && !serves_model(ctx.options, p.model)) {
    throw ApiError(404,
                   "model '" + p.model + "' does not exist; this server serves '" + ctx.options.served_model_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
  const int64_t n_embd = ctx.backend.embedding_size();
  if (n_embd <= 0) throw bad_request("this server's backend does not compute embeddings");
  if (p.dimensions && *p.dimensions != n_embd) {
    throw bad_request("'dimensions' is " + std::to_string(*p.dimensions) + " but this model's embeddings have " +
                          std::to_string(n_embd) + " dimensions; other sizes are not supported (no truncation)",
                      "dimensions");
  }
  std::vector<std::vector<int32_t>> inputs = tokenize_inputs(ctx, p);
  auto flow = std::make_shared<EmbeddingFlow>(ctx, std::move(p), std::move(inputs), exchange);
  flow->start();  // throws before anything was sent
}

}  // namespace parallm
