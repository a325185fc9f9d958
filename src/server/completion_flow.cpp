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
#include <optional>
#include <random>

#include "server/access_log.h"
#include "server/api_error.h"
#include "server/logprobs_json.h"
#include "server/model_names.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "server/openai_request.h"
#include "server/request_channel.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

namespace parallm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += hex[rng() % 16];
  return s;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Text and bookkeeping of one choice, shared by both answer modes.
struct Generation {
  Generation(const CompletionContext& c, const CompletionParams& p, size_t index, uint64_t backend_id,
             std::string echo, Clock::time_point arrival, int64_t n_prompt)
      : backend(&c.backend),
        metrics(&c.metrics),
        index(index),
        id(backend_id),
        decoder(c.backend.tokenizer(), p.skip_special_tokens),
        stop(p.stop, p.include_stop_str_in_output),
        want_logprobs(p.logprobs >= 0),
        // With echo and logprobs the prompt's tokens come first, from offset 0.
        text_offset(p.echo && p.logprobs >= 0 ? 0 : count_characters(echo)),
        echo_text(std::move(echo)),
        prompt_tokens(n_prompt),
        t0(arrival) {}

  CompletionBackend* backend;  // outlives the server (streams run after the handler returns)
  ServerMetrics* metrics;
  size_t index;  // the choice's index in the response
  uint64_t id;   // the backend's request id
  StreamDecoder decoder;
  StopMatcher stop;
  bool want_logprobs;
  int64_t text_offset;     // completions logprobs: characters of the text so far
  std::string echo_text;   // completions with echo: the prompt, sent first
  std::vector<TokenLogprobs> logprobs;  // tokens whose logprobs are not yet sent
  std::optional<ReasoningSplitter> reasoning_splitter;  // chat with --reasoning-parser
  std::string reasoning_delta;   // reasoning not yet taken (take_reasoning)
  bool reasoning_seen = false;
  std::optional<ToolCallSplitter> tool_splitter;  // chat with tools, a template with a call format
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  json tool_calls;                                // null, or the parsed calls once finished
  int64_t prompt_tokens;
  int64_t completion_tokens = 0;
  bool finished = false, final_sent = false;
  std::string finish_reason;
  std::string error;
  // Latency is measured from the request's arrival (parsed and tokenized,
  // before its choices were submitted) to the times its events reached the
  // channel (ChoiceEvent::at), not to when this flow rendered them.
  Clock::time_point t0;
  Clock::time_point first_token_at{}, last_token_at{};
  double ttft_s = 0;
  FinishedChoice record;  // filled in by finish(), observed once the response is delivered

  // Consumes one event, received at `at`; returns the text that may be sent now.
  std::string consume(const TokenEvent& e, Clock::time_point at) {
    if (finished) return "";
    if (want_logprobs) {
      for (const TokenLogprobs& t : e.prompt_logprobs) logprobs.push_back(t);
    }
    std::string text;
    if (e.token >= 0) {
      if (completion_tokens == 0) {
        ttft_s = seconds(at - t0);
        first_token_at = at;
        record.queue_s = e.queue_s;
        record.prefill_s = e.prefill_s;
        metrics->observe_first_token(ttft_s);
      } else {
        metrics->observe_token_gap(seconds(at - last_token_at));
      }
      last_token_at = at;
      completion_tokens = std::max(completion_tokens + 1, e.completion_tokens);
      if (want_logprobs) logprobs.push_back({e.token, e.logprob, e.top_logprobs});
      text = stop.push(decoder.push(e.token));
      if (stop.stopped()) {
        backend->abort(id);  // a stop string ends generation here
        finish("stop", at);
        return route(text);
      }
    }
    if (e.finished) {
      if (e.finish_reason == "error") error = e.error.empty() ? "generation failed" : e.error;
      text += stop.push(decoder.flush());
      if (stop.stopped()) {
        finish("stop", at);
        return route(text);
      }
      text += stop.flush();
      finish(e.finish_reason, at);
    }
    return route(text);
  }
  // With a reasoning parser, the thinking is set aside (take_reasoning());
  // with tools, content streams until a call begins, and at the end the kept
  // rest becomes tool_calls, or content again when it does not parse.
  std::string route(const std::string& raw) {
    std::string text = raw;
    if (reasoning_splitter) {
      ReasoningSplitter::Parts parts = reasoning_splitter->push(raw);
      if (finished) {
        ReasoningSplitter::Parts rest = reasoning_splitter->flush();
        parts.reasoning += rest.reasoning;
        parts.content += rest.content;
      }
      reasoning_delta += parts.reasoning;
      reasoning_seen = reasoning_seen || !parts.reasoning.empty();
      text = std::move(parts.content);
    }
    if (!tool_splitter) return text;
    std::string out = tool_splitter->push(text);
    if (!finished) return out;
    out += tool_splitter->flush();
    if (tool_splitter->started()) {
      if (auto calls = parse_tool_calls(tool_format, tool_splitter->kept())) {
        tool_calls = std::move(*calls);
        if (finish_reason == "stop") finish_reason = "tool_calls";
      } else {
        out += tool_splitter->kept();
      }
    }
    tool_splitter.reset();
    return out;
  }
  std::string take_reasoning() {
    std::string r;
    r.swap(reasoning_delta);
    return r;
  }
  void finish(const std::string& reason, Clock::time_point at) {
    finished = true;
    finish_reason = reason;  // route() may make a "stop" "tool_calls"; the record keeps the engine's
    const double e2e = seconds(at - t0);
    if (error.empty() && reason != "abort") metrics->observe_request(ttft_s, e2e, completion_tokens);
    record.finish_reason = reason;
    record.prompt_tokens = prompt_tokens;
    record.generation_tokens = completion_tokens;
    record.e2e_s = e2e;
    record.ttft_s = ttft_s;
    record.decode_s = completion_tokens > 0 ? seconds(last_token_at - first_token_at) : 0;
  }
};

// One prompt, tokenized and checked against the limits.
struct PreparedPrompt {
  std::vector<int32_t> tokens;
  std::string echo_text;
  int64_t max_tokens = 0;
};

struct Prepared {
  CompletionParams params;
  std::vector<PreparedPrompt> prompts;  // chat: one
};

PreparedPrompt prepare_prompt(const CompletionContext& ctx, const CompletionParams& cp, const PromptInput* in) {
  const bool chat = cp.chat;
  const Tokenizer& tok = ctx.backend.tokenizer();
  PreparedPrompt p;
  if (chat) {
    const std::string text = ctx.chat.render(cp.messages, /*add_generation_prompt=*/true, cp.tools, cp.chat_template_kwargs);
    p.tokens = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  } else if (in->is_tokens) {
    for (int32_t t : in->tokens) {
      if (t >= tok.n_vocab()) throw bad_request("token id " + std::to_string(t) + " is outside the vocabulary", "prompt");
    }
    p.tokens = in->tokens;
    if (cp.echo) p.echo_text = tok.decode(p.tokens);
  } else {
    p.tokens = tok.encode(in->text, /*add_special=*/true, /*parse_special=*/true);
    if (cp.echo) p.echo_text = in->text;
  }
  if (p.tokens.empty()) throw bad_request("the prompt is empty", chat ? "messages" : "prompt");
  const int64_t max_len = ctx.backend.max_model_len();
  const int64_t n_prompt = static_cast<int64_t>(p.tokens.size());
  const int64_t max_in = ctx.options.max_input_tokens > 0 ? std::min(ctx.options.max_input_tokens, max_len) : max_len;
  if (n_prompt > max_in || n_prompt >= max_len) {
    throw ApiError(400, "the prompt has " + std::to_string(n_prompt) + " tokens; this server accepts at most " +
                            std::to_string(std::min(max_in, max_len - 1)) + " input tokens",
                   "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded");
  }
  const int64_t room = max_len - n_prompt;
  const int64_t max_out = ctx.options.max_output_tokens > 0 ? ctx.options.max_output_tokens : max_len;
  if (cp.max_tokens) {
    if (*cp.max_tokens > max_out) {
      throw bad_request("'max_tokens' is " + std::to_string(*cp.max_tokens) + "; this server allows at most " +
                            std::to_string(max_out),
                        "max_tokens");
    }
    if (*cp.max_tokens > room) {
      throw ApiError(400, "the prompt (" + std::to_string(n_prompt) + " tokens) plus 'max_tokens' (" +
                              std::to_string(*cp.max_tokens) + ") exceeds the maximum model length of " +
                              std::to_string(max_len) + " tokens",
                     "invalid_request_error", "max_tokens", "context_length_exceeded");
    }
    p.max_tokens = *cp.max_tokens;
  } else {
    p.max_tokens = std::min({chat ? room : int64_t{16}, room, max_out});
  }
  return p;
}

Prepared prepare(const CompletionContext& ctx, const std::string& body, bool chat) {
  Prepared p;
  p.params = parse_completion_request(body, chat, request_json_limits(ctx.options));
  const CompletionParams& cp = p.params;
  if (!cp.model.empty() && !serves_model(ctx.options, cp.model)) {
    throw ApiError(404, "model '" + cp.model + "' does not exist; this server serves '" + ctx.options.served_model_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
  const int32_t n_vocab = ctx.backend.tokenizer().n_vocab();
  for (int32_t id : cp.stop_token_ids) {
    if (id >= n_vocab) {
      throw bad_request("'stop_token_ids' holds " + std::to_string(id) + ", outside the vocabulary (" +
                            std::to_string(n_vocab) + " tokens)",
                        "stop_token_ids");
    }
  }
  for (const auto& [id, bias] : cp.sampling.logit_bias) {
    if (id >= n_vocab) {
      throw bad_request("'logit_bias' token id " + std::to_string(id) + " is outside the vocabulary (" +
                            std::to_string(n_vocab) + " tokens)",
                        "logit_bias");
    }
  }
  if (chat) {
    p.prompts.push_back(prepare_prompt(ctx, cp, nullptr));
  } else {
    for (const PromptInput& in : cp.prompts) p.prompts.push_back(prepare_prompt(ctx, cp, &in));
  }
  return p;
}

// All choices of one request: prompts x n generations over one channel.
struct Choices {
  std::vector<std::unique_ptr<Generation>> gens;  // by choice index
  int64_t prompt_tokens = 0;                      // each prompt counted once, as OpenAI's usage does

  bool all_finished() const {
    return std::all_of(gens.begin(), gens.end(), [](const auto& g) { return g->finished; });
  }
  const Generation* failed() const {
    for (const auto& g : gens) {
      if (!g->error.empty()) return g.get();
    }
    return nullptr;
  }
  void abort_unfinished() {
    for (const auto& g : gens) {
      if (!g->finished) g->backend->abort(g->id);
    }
  }
  json usage() const {
    int64_t completion = 0;
    for (const auto& g : gens) completion += g->completion_tokens;
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens + completion}};
  }
};

json chunk_base(const std::string& id, int64_t created, const std::string& model, bool chat) {
  return {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created}, {"model", model}};
}

// The logprobs of the tokens a choice has not reported yet (null without logprobs).
json take_logprobs(const Tokenizer& tok, Generation& g, bool chat) {
  if (!g.want_logprobs) return nullptr;
  json out = chat ? chat_logprobs_json(tok, g.logprobs) : completion_logprobs_json(tok, g.logprobs, &g.text_offset);
  g.logprobs.clear();
  return out;
}

json stream_choice(bool chat, size_t index, const std::string& text, json logprobs, const json& finish, bool first) {
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    return {{"index", index}, {"delta", delta}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
  }
  return {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
}

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
    std::lock_guard<std::mutex> lock(mu_);
    submit(ctx);
    if (active_) active_->add(shared_from_this());
    begin(&ctx.metrics);
  }

 private:
  void submit(const CompletionContext& ctx) {
    const CompletionParams& cp = prepared_->params;
    const size_t n = static_cast<size_t>(cp.n);
    const ToolCallFormat tool_format = chat_ && !cp.tools.is_null() ? ctx.chat.tool_call_format() : ToolCallFormat::kNone;
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
        sreq.prompt_logprobs = cp.echo && cp.logprobs >= 0;
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
        if (chat_ && ctx.options.reasoning_format != ReasoningFormat::kNone) g.reasoning_splitter.emplace(ctx.options.reasoning_format);
        if (tool_format != ToolCallFormat::kNone) {
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

  // After submit(): the exchange's callbacks, the stream's head, a first pump.
  void begin(ServerMetrics* metrics) {
    std::weak_ptr<CompletionFlow> weak = weak_from_this();
    auto outcome = outcome_;
    exchange_->on_finished([metrics, outcome](bool delivered) {
      // Only a response that reached the client whole counts as a success
      // (parallm: per response, vllm: per choice, by its finish reason).
      if (!delivered) return;
      std::lock_guard<std::mutex> lock(outcome->mu);
      if (!outcome->success) return;
      metrics->requests_ok++;
      for (const FinishedChoice& c : outcome->choices) metrics->observe_delivered(c);
    });
    exchange_->on_gone([weak] {
      if (auto f = weak.lock()) f->client_gone();
    });
    if (stream_) {
      net::HttpHeaders h = {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
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
      exchange_->end_stream("data: " + dump(e.body()) + "\n\ndata: [DONE]\n\n");
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
        if (g.reasoning_splitter) message["reasoning_content"] = g.reasoning_seen ? json(reasonings_[i]) : json(nullptr);
        if (!g.tool_calls.is_null()) {
          message["tool_calls"] = g.tool_calls;
          if (texts_[i].find_first_not_of(" \n\t\r") == std::string::npos) message["content"] = nullptr;
        }
        out_choices.push_back({{"index", i}, {"message", std::move(message)}, {"logprobs", lp}, {"finish_reason", g.finish_reason}});
      } else {
        out_choices.push_back({{"index", i}, {"text", texts_[i]}, {"logprobs", lp}, {"finish_reason", g.finish_reason}});
      }
    }
    json out = {{"id", id_},           {"object", chat_ ? "chat.completion" : "text_completion"},
                {"created", created_}, {"model", model_},
                {"choices", out_choices}, {"usage", choices_.usage()}};
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
    return "data: " + dump(c) + "\n\n";
  }

  void pump_stream() {
    std::string out;
    if (!sent_first_) {
      sent_first_ = true;
      for (const auto& g : choices_.gens) {
        if (chat_ || !g->echo_text.empty()) out += event(stream_choice(chat_, g->index, g->echo_text, nullptr, nullptr, true), nullptr);
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
      if (!text.empty()) out += event(stream_choice(chat_, g.index, text, take_logprobs(tok_, g, chat_), nullptr, false), nullptr);
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
        out += "data: " + dump(ApiError(500, "generation failed: " + f->error, "server_error").body()) + "\n\n";
      } else {
        mark_success();
        if (include_usage_) out += event(nullptr, choices_.usage());
      }
      out += "data: [DONE]\n\n";
    }
    const int64_t now = now_ns();
    if (out.empty() && now - last_write_ns_.load() >= heartbeat_.count()) {
      out = ": keep-alive\n\n";  // proxies keep the stream open; a dead peer shows on the write
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
  std::vector<std::string> texts_, reasonings_;           // whole responses: so far
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
