// The completion flow (see completion_flow.h). The backend reports events on
// its step thread into a RequestChannel; the request's CompletionFlow runs on
// a worker when woken (or ticked), detokenizes with a StreamDecoder (UTF-8
// safe), applies stop strings, and writes to the exchange. A request that
// ends early (stop string, client gone) aborts its sequences at once.
#include "server/completion_flow.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <random>

#include "server/access_log.h"
#include "server/api_error.h"
#include "server/choice_generation.h"
#include "server/completion_prepare.h"
#include "server/completion_render.h"
#include "server/logprobs_json.h"
#include "server/openai_request.h"
#include "server/request_channel.h"
#include "server/sse_writer.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

namespace parallm {
namespace {

using nlohmann::json;

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += hex[rng() % 16];
  return s;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// One request in flight, from submission to its last byte. pump() runs on a
// worker (never two at once for one flow) whenever the channel wakes it or
// the server's tick finds it due; it renders what arrived and writes it.
class CompletionFlow : public ActiveRequest, public std::enable_shared_from_this<CompletionFlow> {
 public:
  CompletionFlow(const CompletionContext& ctx, std::shared_ptr<Prepared> prepared,
                 std::shared_ptr<net::HttpExchange> exchange, bool chat)
      : work_(ctx.work),
        active_(ctx.active),
        tok_(ctx.backend.tokenizer()),
        prepared_(std::move(prepared)),
        exchange_(std::move(exchange)),
        chat_(chat),
        stream_(prepared_->params.stream),
        include_usage_(prepared_->params.include_usage),
        heartbeat_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ctx.options.heartbeat_s))),
        id_(random_id(chat ? "chatcmpl-" : "cmpl-")),
        created_(static_cast<int64_t>(std::time(nullptr))),
        model_(ctx.options.served_model_name),
        extra_headers_(ctx.extra_headers),
        log_prompts_(ctx.options.log_prompts) {}

  // Submits every choice, registers the flow, starts the response. Throws
  // ApiError (nothing sent yet) when the backend refuses. Under the lock, so
  // that a pump woken by an early event waits until all is in place.
  void start(const CompletionContext& ctx) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      submit(ctx);
      if (active_) active_->add(shared_from_this());
      begin(&ctx.metrics);
    }
    // Outside mu_: on_gone runs client_gone (which takes mu_) at once when
    // the client has left already.
    std::weak_ptr<CompletionFlow> weak = weak_from_this();
    exchange_->on_gone([weak] {
      if (auto f = weak.lock()) f->client_gone();
    });
  }

 private:
  void submit(const CompletionContext& ctx) {
    const CompletionParams& cp = prepared_->params;
    const size_t n = static_cast<size_t>(cp.n);
    const ToolCallFormat tool_format =
        chat_ && !cp.tools.is_null() ? ctx.chat.tool_call_format() : ToolCallFormat::kNone;
    std::weak_ptr<CompletionFlow> weak = weak_from_this();
    channel_ = std::make_shared<RequestChannel>(!cp.stream && cp.stop.empty(), ctx.options.stream_interval, [weak] {
      if (auto f = weak.lock()) f->schedule();
    });
    // Choice p * n + j is prompt p's j-th generation; with a seed, generation j
    // draws with seed + j (as vLLM seeds parallel samples), so choices differ
    // and the same request still gives the same choices.
    for (size_t p = 0; p < prepared_->prompts.size(); ++p) {
      const PreparedPrompt& pp = prepared_->prompts[p];
      choices_.prompt_tokens += static_cast<int64_t>(pp.tokens.size());
      for (size_t j = 0; j < n; ++j) {
        const size_t index = p * n + j;
        ServingRequest sreq;
        sreq.prompt = pp.tokens;
        sreq.max_tokens = pp.max_tokens;
        sreq.sampling = cp.sampling;
        sreq.sampling.seed = cp.sampling.seed + j;
        sreq.ignore_eos = cp.ignore_eos;
        sreq.priority = cp.priority;
        sreq.logprobs = cp.logprobs;
        sreq.prompt_logprobs = cp.prompt_logprobs >= 0       ? cp.prompt_logprobs
                               : cp.echo && cp.logprobs >= 0 ? cp.logprobs
                                                             : -1;
        sreq.stop_token_ids = cp.stop_token_ids;
        uint64_t backend_id = 0;
        std::shared_ptr<RequestChannel> channel = channel_;
        const SubmitStatus st = ctx.backend.submit(
            std::move(sreq), [channel, index](const TokenEvent& e) { channel->push(index, e); }, &backend_id);
        if (st != SubmitStatus::kOk) {
          choices_.abort_unfinished();  // the choices already queued
          if (st == SubmitStatus::kQueueFull) {
            throw ApiError(429, "the server is at its queue limit (--max-queue); retry later", "rate_limit_error", "",
                           "queue_full");
          }
          throw ApiError(400, "the prompt plus 'max_tokens' can never fit in the KV cache of this server",
                         "invalid_request_error", "max_tokens", "context_length_exceeded");
        }
        choices_.gens.push_back(std::make_unique<Generation>(ctx, cp, index, backend_id, pp.echo_text, t0_,
                                                             static_cast<int64_t>(pp.tokens.size())));
        Generation& g = *choices_.gens.back();
        if (chat_ && ctx.options.reasoning_format != ReasoningFormat::kNone)
          g.reasoning_splitter.emplace(ctx.options.reasoning_format);
        if (!cp.forced_tool.empty() || cp.tool_required) {
          g.tool_forced = true;
          g.forced_function = cp.forced_tool;
        } else if (tool_format != ToolCallFormat::kNone) {
          g.tool_format = tool_format;
          g.tool_splitter.emplace(tool_format);
        }
      }
    }
    texts_.resize(choices_.gens.size());
    reasonings_.resize(choices_.gens.size());
    logged_.resize(choices_.gens.size());
    for (size_t i = 0; i < choices_.gens.size(); ++i) texts_[i] = choices_.gens[i]->echo_text;
  }

  // After submit(): the exchange's delivery callback, the stream's head, a first pump.
  void begin(ServerMetrics* metrics) {
    auto outcome = outcome_;
    exchange_->on_finished([metrics, outcome](bool delivered) {
      // Only a response that reached the client whole counts as a success
      // (parallm: per response, vllm: per choice, by its finish reason).
      if (!delivered) return;
      std::lock_guard<std::mutex> lock(outcome->mu);
      if (!outcome->success) return;
      metrics->requests_ok++;
      for (const FinishedChoice& c : outcome->choices) metrics->observe_delivered(c);
      metrics->observe_delivered_response(outcome->choices);
    });
    if (stream_) {
      net::HttpHeaders h = {
          {"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
      h.insert(h.end(), extra_headers_.begin(), extra_headers_.end());
      exchange_->start_stream(200, h);
    }
    last_write_ns_ = now_ns();
    schedule();  // the first chunks (role, echo) and whatever has arrived
  }

 public:
  void schedule() {
    if (scheduled_.exchange(true)) return;
    std::weak_ptr<CompletionFlow> weak = weak_from_this();
    if (!work_->post([weak] {
          if (auto f = weak.lock()) f->pump();
        })) {
      scheduled_ = false;
    }
  }

  void tick(Clock::time_point now) override {
    if (ended_.load()) return;
    const bool heartbeat_due = stream_ && now.time_since_epoch().count() - last_write_ns_.load() >= heartbeat_.count();
    if (heartbeat_due || channel_->has_events()) schedule();
  }

  void finish_now(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    choices_.abort_unfinished();
    for (const auto& g : choices_.gens) {
      if (g->finished) continue;
      TokenEvent e;
      e.finished = true;
      e.finish_reason = reason;
      e.completion_tokens = g->completion_tokens;
      channel_->push(g->index, e);  // after the tokens already queued
    }
    if (stream_) {
      pump_stream();
    } else {
      pump_whole();
    }
  }

  void fail(int status, const std::string& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    choices_.abort_unfinished();
    const ApiError e(status, message, "server_error");
    if (!stream_) status_ = status;
    if (stream_) {
      exchange_->end_stream(sse_event(dump(e.body())) + sse_done());
    } else {
      net::HttpResponse r;
      r.status = status;
      r.set_content(dump(e.body()), "application/json");
      respond(std::move(r));
    }
    end();
  }

 private:
  static int64_t now_ns() { return Clock::now().time_since_epoch().count(); }

  // The request's prompt as the client sent it (--log-prompts).
  std::string prompt_for_log() const {
    const CompletionParams& cp = prepared_->params;
    if (chat_) return dump(cp.messages);
    std::string out;
    for (const PromptInput& p : cp.prompts) {
      if (!out.empty()) out += " | ";
      out += p.is_tokens ? dump(json(p.tokens)) : p.text;
    }
    return out;
  }

  void client_gone() {
    status_ = 499;  // nginx's "client closed request", in the access log only
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    choices_.abort_unfinished();
    end();
  }

  void respond(net::HttpResponse r) {
    status_ = r.status;
    for (const auto& [k, v] : extra_headers_) r.set_header(k, v);
    exchange_->respond(std::move(r));
  }

  void end() {
    ended_ = true;
    AccessRecord rec;
    rec.status = status_;
    rec.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    rec.prompt_tokens = choices_.prompt_tokens;
    rec.completion_tokens = 0;
    for (const auto& g : choices_.gens) rec.completion_tokens += g->completion_tokens;
    if (log_prompts_) rec.prompt = prompt_for_log();
    log_access(exchange_->request(), rec);
    if (active_) active_->remove(this);
  }

  void pump() {
    scheduled_ = false;  // events arriving from now on schedule another run
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    if (stream_) {
      pump_stream();
    } else {
      pump_whole();
    }
  }

  void pump_whole() {
    for (const ChoiceEvent& ce : channel_->take()) {
      Generation& g = *choices_.gens[ce.choice];
      texts_[ce.choice] += g.consume(ce.event, ce.at);
      reasonings_[ce.choice] += g.take_reasoning();
      for (TokenLogprobs& t : g.logprobs) logged_[ce.choice].push_back(std::move(t));
      g.logprobs.clear();
    }
    if (choices_.failed() != nullptr) choices_.abort_unfinished();
    if (!choices_.all_finished()) return;
    if (const Generation* f = choices_.failed()) {
      const ApiError e(500, "generation failed: " + f->error, "server_error");
      net::HttpResponse r;
      r.status = 500;
      r.set_content(dump(e.body()), "application/json");
      respond(std::move(r));
      end();
      return;
    }
    json out_choices = json::array();
    for (size_t i = 0; i < choices_.gens.size(); ++i) {
      Generation& g = *choices_.gens[i];
      json lp = nullptr;
      if (g.want_logprobs) {
        lp = chat_ ? chat_logprobs_json(tok_, logged_[i]) : completion_logprobs_json(tok_, logged_[i], &g.text_offset);
      }
      if (chat_) {
        json message = {{"role", "assistant"}, {"content", texts_[i]}};
        if (g.reasoning_splitter)
          message["reasoning_content"] = g.reasoning_seen ? json(reasonings_[i]) : json(nullptr);
        if (!g.tool_calls.is_null()) {
          message["tool_calls"] = g.tool_calls;
          if (texts_[i].find_first_not_of(" \n\t\r") == std::string::npos) message["content"] = nullptr;
        }
        out_choices.push_back(
            {{"index", i}, {"message", std::move(message)}, {"logprobs", lp}, {"finish_reason", g.finish_reason}});
      } else {
        out_choices.push_back(
            {{"index", i}, {"text", texts_[i]}, {"logprobs", lp}, {"finish_reason", g.finish_reason}});
        // vLLM: a completion choice carries its prompt's prompt_logprobs.
        if (g.want_prompt_logprobs)
          out_choices.back()["prompt_logprobs"] = vllm_prompt_logprobs_json(tok_, g.prompt_logprobs);
      }
    }
    json out = {{"id", id_},
                {"object", chat_ ? "chat.completion" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", out_choices},
                {"usage", choices_.usage()}};
    // vLLM: a chat response carries prompt_logprobs beside its choices (one prompt for all).
    if (chat_ && !choices_.gens.empty() && choices_.gens[0]->want_prompt_logprobs) {
      out["prompt_logprobs"] = vllm_prompt_logprobs_json(tok_, choices_.gens[0]->prompt_logprobs);
    }
    mark_success();
    net::HttpResponse r;
    r.set_content(dump(out), "application/json");
    respond(std::move(r));
    end();
  }

  // The answer is complete and not an error: what on_finished will count once it is delivered.
  void mark_success() {
    std::lock_guard<std::mutex> lock(outcome_->mu);
    outcome_->success = true;
    outcome_->choices.clear();
    for (const auto& g : choices_.gens) outcome_->choices.push_back(g->record);
  }

  std::string event(const json& choice_or_null, const json& usage_field) const {
    json c = chunk_base(id_, created_, model_, chat_);
    c["choices"] = choice_or_null.is_null() ? json::array() : json::array({choice_or_null});
    if (include_usage_) c["usage"] = usage_field;
    return sse_event(dump(c));
  }

  void pump_stream() {
    std::string out;
    if (!sent_first_) {
      sent_first_ = true;
      for (const auto& g : choices_.gens) {
        if (chat_ || !g->echo_text.empty())
          out += event(stream_choice(chat_, g->index, g->echo_text, nullptr, nullptr, true), nullptr);
      }
    }
    for (const ChoiceEvent& ce : channel_->take()) {
      Generation& g = *choices_.gens[ce.choice];
      if (g.final_sent) continue;
      const std::string text = g.consume(ce.event, ce.at);
      const std::string reasoning = g.take_reasoning();
      if (!reasoning.empty()) {
        json ch = stream_choice(chat_, g.index, "", take_logprobs(tok_, g, chat_), nullptr, false);
        ch["delta"] = {{"reasoning_content", reasoning}};
        out += event(ch, nullptr);
      }
      if (!text.empty())
        out += event(stream_choice(chat_, g.index, text, take_logprobs(tok_, g, chat_), nullptr, false), nullptr);
      if (g.finished && g.error.empty()) {
        if (!g.tool_calls.is_null()) {
          json delta_calls = g.tool_calls;
          for (size_t k = 0; k < delta_calls.size(); ++k) delta_calls[k]["index"] = k;
          json ch = stream_choice(chat_, g.index, "", nullptr, nullptr, false);
          ch["delta"] = {{"tool_calls", delta_calls}};
          out += event(ch, nullptr);
        }
        json lp = g.logprobs.empty() ? json(nullptr) : take_logprobs(tok_, g, chat_);
        out += event(stream_choice(chat_, g.index, "", std::move(lp), g.finish_reason, false), nullptr);
        g.final_sent = true;
      }
    }
    if (choices_.failed() != nullptr) choices_.abort_unfinished();
    const bool done = choices_.all_finished();
    if (done) {
      if (const Generation* f = choices_.failed()) {
        out += sse_event(dump(ApiError(500, "generation failed: " + f->error, "server_error").body()));
      } else {
        mark_success();
        if (include_usage_) out += event(nullptr, choices_.usage());
      }
      out += sse_done();
    }
    const int64_t now = now_ns();
    if (out.empty() && now - last_write_ns_.load() >= heartbeat_.count()) {
      out = sse_comment("keep-alive");  // proxies keep the stream open; a dead peer shows on the write
    }
    if (done) {
      exchange_->end_stream(out);  // [DONE] and the end of the body in one write
      end();
      return;
    }
    if (!out.empty()) {
      if (!exchange_->write(out)) {
        choices_.abort_unfinished();
        end();
        return;
      }
      last_write_ns_ = now;
    }
  }

  std::shared_ptr<net::WorkQueue> work_;
  ActiveRequests* active_;
  const Tokenizer& tok_;
  std::shared_ptr<Prepared> prepared_;
  std::shared_ptr<net::HttpExchange> exchange_;
  const bool chat_, stream_, include_usage_;
  const Clock::duration heartbeat_;
  const std::string id_;
  const int64_t created_;
  const std::string model_;
  const net::HttpHeaders extra_headers_;

  const bool log_prompts_;
  const Clock::time_point t0_ = Clock::now();
  int status_ = 200;  // for the access log

  std::shared_ptr<RequestChannel> channel_;
  std::mutex mu_;  // one pump (or fail / client_gone) at a time
  Choices choices_;
  std::vector<std::string> texts_, reasonings_;  // whole responses: so far
  std::vector<std::vector<TokenLogprobs>> logged_;
  bool sent_first_ = false;
  std::atomic<bool> scheduled_{false}, ended_{false};
  std::atomic<int64_t> last_write_ns_{0};
  // What the exchange's on_finished callback reads (it may outlive the flow).
  struct Outcome {
    std::mutex mu;
    bool success = false;
    std::vector<FinishedChoice> choices;
  };
  std::shared_ptr<Outcome> outcome_ = std::make_shared<Outcome>();
};

}  // namespace

void handle_completion(const CompletionContext& ctx, const std::shared_ptr<net::HttpExchange>& exchange, bool chat) {
  auto prepared = std::make_shared<Prepared>(prepare(ctx, exchange->request().body, chat));
  auto flow = std::make_shared<CompletionFlow>(ctx, std::move(prepared), exchange, chat);
  flow->start(ctx);  // throws before anything was sent
}

}  // namespace parallm
