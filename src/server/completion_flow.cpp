// The completion flow (see completion_flow.h). The backend reports events on
// its step thread into a RequestChannel (a mutex-guarded queue); the HTTP
// thread drains it, detokenizes with a StreamDecoder (UTF-8 safe), applies stop
// strings, and writes. The channel is shared with the callback, so a request
// that ends early (stop string, client gone) can return at once.
#include "server/completion_flow.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

namespace parallm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// NOTE: on this kind of host (2 cores, system calls through a hypervisor) a
// wake-up per token costs ~50 us of the HTTP thread's CPU (futex, poll, send,
// the client's wake-up), taken from the compute threads: ~2 ms of a 17 ms
// step at 32 streams. So the step thread wakes the HTTP thread only when it
// has something to do: the first token (time to first token), every
// `interval` tokens (--stream-interval), and the final event. A request that
// is neither streamed nor has stop strings waits for its final event.
//
// With --stream-interval auto (the default) the interval follows the load: a
// step that gave tokens to n sequences wakes each stream every ceil(n / 4)
// tokens, so a step pays at most ~4 wake-ups whatever the concurrency. Up to
// 4 streams still get every token at once; at 32 the interval is 8, which
// gave 13% more tokens/s than every token (docs/PERFORMANCE.md). The HTTP
// thread also takes what is there every 100 ms, which bounds the delay.
constexpr int64_t kWakesPerStep = 4;

struct RequestChannel {
  RequestChannel(bool ends_only, int64_t interval) : ends_only(ends_only), interval(interval) {}

  std::mutex mu;
  std::condition_variable cv;
  std::deque<TokenEvent> events;
  const bool ends_only;    // wake only for the first and the final event
  const int64_t interval;  // tokens per wake-up, or kStreamIntervalAuto
  int64_t tokens = 0, unwoken = 0;

  int64_t tokens_per_wake(const TokenEvent& e) const {
    if (interval != kStreamIntervalAuto) return interval;
    return std::max<int64_t>(1, (e.step_tokens + kWakesPerStep - 1) / kWakesPerStep);
  }
  void push(const TokenEvent& e) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(e);
      if (e.token >= 0) ++tokens, ++unwoken;
      wake = e.finished || tokens == 1 || (!ends_only && unwoken >= tokens_per_wake(e));
      if (wake) unwoken = 0;
    }
    if (wake) cv.notify_one();
  }
  // Waits up to timeout for events; returns those available.
  std::deque<TokenEvent> take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, timeout, [&] { return !events.empty() && unwoken == 0; });
    std::deque<TokenEvent> out;
    out.swap(events);
    unwoken = 0;
    return out;
  }
};

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += hex[rng() % 16];
  return s;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Text and bookkeeping of one generation, shared by both answer modes.
struct Generation {
  Generation(const CompletionContext& c, const CompletionParams& p, uint64_t backend_id, int64_t n_prompt)
      : backend(&c.backend), metrics(&c.metrics), id(backend_id), decoder(c.backend.tokenizer()), stop(p.stop),
        prompt_tokens(n_prompt) {}

  CompletionBackend* backend;  // outlives the server (streams run after the handler returns)
  ServerMetrics* metrics;
  uint64_t id;
  StreamDecoder decoder;
  StopMatcher stop;
  int64_t prompt_tokens;
  int64_t completion_tokens = 0;
  bool finished = false;
  std::string finish_reason;
  std::string error;
  Clock::time_point t0 = Clock::now();
  double ttft_s = 0;

  // Consumes one event; returns the text that may be sent now.
  std::string consume(const TokenEvent& e) {
    if (finished) return "";
    std::string text;
    if (e.token >= 0) {
      if (completion_tokens == 0) ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
      completion_tokens = std::max(completion_tokens + 1, e.completion_tokens);
      text = stop.push(decoder.push(e.token));
      if (stop.stopped()) {
        backend->abort(id);  // a stop string ends generation here
        finish("stop");
        return text;
      }
    }
    if (e.finished) {
      if (e.finish_reason == "error") error = e.error.empty() ? "generation failed" : e.error;
      text += stop.push(decoder.flush());
      if (stop.stopped()) {
        finish("stop");
        return text;
      }
      text += stop.flush();
      finish(e.finish_reason == "length" ? "length" : e.finish_reason == "stop" ? "stop" : e.finish_reason);
    }
    return text;
  }
  void finish(const std::string& reason) {
    finished = true;
    finish_reason = reason;
    const double e2e = std::chrono::duration<double>(Clock::now() - t0).count();
    if (error.empty() && reason != "abort") metrics->observe_request(ttft_s, e2e, completion_tokens);
  }
  json usage() const {
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
  }
};

struct Prepared {
  CompletionParams params;
  std::vector<int32_t> prompt;
  std::string echo_text;
  int64_t max_tokens = 0;
};

Prepared prepare(const CompletionContext& ctx, const std::string& body, bool chat) {
  Prepared p;
  p.params = parse_completion_request(body, chat);
  const CompletionParams& cp = p.params;
  if (!cp.model.empty() && cp.model != ctx.options.served_model_name) {
    throw ApiError(404, "model '" + cp.model + "' does not exist; this server serves '" + ctx.options.served_model_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
  const Tokenizer& tok = ctx.backend.tokenizer();
  if (chat) {
    const std::string text = ctx.chat.render(cp.messages, /*add_generation_prompt=*/true);
    p.prompt = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  } else if (cp.prompt_is_tokens) {
    for (int32_t t : cp.prompt_tokens) {
      if (t >= tok.n_vocab()) throw bad_request("token id " + std::to_string(t) + " is outside the vocabulary", "prompt");
    }
    p.prompt = cp.prompt_tokens;
    if (cp.echo) p.echo_text = tok.decode(p.prompt);
  } else {
    p.prompt = tok.encode(cp.prompt_text, /*add_special=*/true, /*parse_special=*/true);
    if (cp.echo) p.echo_text = cp.prompt_text;
  }
  if (p.prompt.empty()) throw bad_request("the prompt is empty", chat ? "messages" : "prompt");
  const int64_t max_len = ctx.backend.max_model_len();
  const int64_t n_prompt = static_cast<int64_t>(p.prompt.size());
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

json chunk_base(const std::string& id, int64_t created, const std::string& model, bool chat) {
  return {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created}, {"model", model}};
}

json stream_choice(bool chat, const std::string& text, const json& finish, bool first) {
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    return {{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}};
  }
  return {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}};
}

}  // namespace

void handle_completion(const CompletionContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat) {
  auto prepared = std::make_shared<Prepared>(prepare(ctx, req.body, chat));
  const CompletionParams& cp = prepared->params;

  ServingRequest sreq;
  sreq.prompt = prepared->prompt;
  sreq.max_tokens = prepared->max_tokens;
  sreq.sampling = cp.sampling;
  sreq.ignore_eos = cp.ignore_eos;
  sreq.priority = cp.priority;

  auto channel = std::make_shared<RequestChannel>(!cp.stream && cp.stop.empty(), ctx.options.stream_interval);
  uint64_t backend_id = 0;
  const SubmitStatus st = ctx.backend.submit(std::move(sreq), [channel](const TokenEvent& e) { channel->push(e); }, &backend_id);
  if (st == SubmitStatus::kQueueFull) {
    res.set_header("Retry-After", "1");
    throw ApiError(429, "the server is at its queue limit (--max-queue); retry later", "rate_limit_error", "",
                   "queue_full");
  }
  if (st == SubmitStatus::kTooLong) {
    throw ApiError(400, "the prompt plus 'max_tokens' can never fit in the KV cache of this server", "invalid_request_error",
                   "max_tokens", "context_length_exceeded");
  }

  const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string model = ctx.options.served_model_name;
  auto gen = std::make_shared<Generation>(ctx, prepared->params, backend_id, static_cast<int64_t>(prepared->prompt.size()));

  if (!cp.stream) {
    std::string text = prepared->echo_text;
    while (!gen->finished) {
      for (const TokenEvent& e : channel->take(std::chrono::milliseconds(1000))) text += gen->consume(e);
    }
    if (!gen->error.empty()) throw ApiError(500, "generation failed: " + gen->error, "server_error");
    json choice;
    if (chat) {
      choice = {{"index", 0},
                {"message", {{"role", "assistant"}, {"content", text}}},
                {"logprobs", nullptr},
                {"finish_reason", gen->finish_reason}};
    } else {
      choice = {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", gen->finish_reason}};
    }
    json out = {{"id", id},           {"object", chat ? "chat.completion" : "text_completion"},
                {"created", created}, {"model", model},
                {"choices", {choice}}, {"usage", gen->usage()}};
    res.set_content(dump(out), "application/json");
    return;
  }

  const bool include_usage = cp.include_usage;
  const double heartbeat_s = ctx.options.heartbeat_s;
  auto sent_first = std::make_shared<bool>(false);
  CompletionBackend* backend = &ctx.backend;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [prepared, channel, gen, backend, id, created, model, chat, include_usage, heartbeat_s, sent_first](
          size_t, httplib::DataSink& sink) -> bool {
        auto event = [&](const json& choice_or_null, const json& usage_field) {
          json c = chunk_base(id, created, model, chat);
          c["choices"] = choice_or_null.is_null() ? json::array() : json::array({choice_or_null});
          if (include_usage) c["usage"] = usage_field;
          return "data: " + dump(c) + "\n\n";
        };
        std::string out;
        if (!*sent_first) {
          *sent_first = true;
          const std::string echo = prepared->echo_text;
          if (chat || !echo.empty()) out += event(stream_choice(chat, echo, nullptr, true), nullptr);
        }
        auto deadline = Clock::now() + std::chrono::duration<double>(heartbeat_s);
        while (out.empty() && !gen->finished && Clock::now() < deadline) {
          for (const TokenEvent& e : channel->take(std::chrono::milliseconds(100))) {
            const std::string text = gen->consume(e);
            if (!text.empty()) out += event(stream_choice(chat, text, nullptr, false), nullptr);
          }
        }
        if (gen->finished) {
          if (!gen->error.empty()) {
            out += "data: " + dump(ApiError(500, "generation failed: " + gen->error, "server_error").body()) + "\n\n";
          } else {
            out += event(stream_choice(chat, "", gen->finish_reason, false), nullptr);
            if (include_usage) out += event(nullptr, gen->usage());
          }
          out += "data: [DONE]\n\n";
        }
        if (out.empty()) out = ": keep-alive\n\n";  // a write that fails tells us the client left
        if (!sink.write(out.data(), out.size())) {
          backend->abort(gen->id);
          return false;
        }
        if (gen->finished) sink.done();
        return true;
      },
      [gen, backend](bool success) {
        if (!gen->finished) backend->abort(gen->id);  // the client went away mid-stream
      });
}

}  // namespace parallm
