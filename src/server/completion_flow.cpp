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
#include <memory>
#include <mutex>
#include <optional>
#include <random>

#include "server/api_error.h"
#include "server/logprobs_json.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"
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

// Events of one request's choices (several with `n` > 1 or a batch of
// prompts), in the order the backend made them.
struct ChoiceEvent {
  size_t choice;
  TokenEvent event;
};

struct RequestChannel {
  RequestChannel(bool ends_only, int64_t interval) : ends_only(ends_only), interval(interval) {}

  std::mutex mu;
  std::condition_variable cv;
  std::deque<ChoiceEvent> events;
  const bool ends_only;    // wake only for the first and the final events
  const int64_t interval;  // tokens per wake-up, or kStreamIntervalAuto
  int64_t tokens = 0, unwoken = 0;

  int64_t tokens_per_wake(const TokenEvent& e) const {
    if (interval != kStreamIntervalAuto) return interval;
    return std::max<int64_t>(1, (e.step_tokens + kWakesPerStep - 1) / kWakesPerStep);
  }
  void push(size_t choice, const TokenEvent& e) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back({choice, e});
      if (e.token >= 0) ++tokens, ++unwoken;
      wake = e.finished || tokens == 1 || (!ends_only && unwoken >= tokens_per_wake(e));
      if (wake) unwoken = 0;
    }
    if (wake) cv.notify_one();
  }
  // Waits up to timeout for events; returns those available.
  std::deque<ChoiceEvent> take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, timeout, [&] { return !events.empty() && unwoken == 0; });
    std::deque<ChoiceEvent> out;
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

// Text and bookkeeping of one choice, shared by both answer modes.
struct Generation {
  Generation(const CompletionContext& c, const CompletionParams& p, size_t index, uint64_t backend_id,
             std::string echo)
      : backend(&c.backend),
        metrics(&c.metrics),
        index(index),
        id(backend_id),
        decoder(c.backend.tokenizer(), p.skip_special_tokens),
        stop(p.stop, p.include_stop_str_in_output),
        want_logprobs(p.logprobs >= 0),
        // With echo and logprobs the prompt's tokens come first, from offset 0.
        text_offset(p.echo && p.logprobs >= 0 ? 0 : count_characters(echo)),
        echo_text(std::move(echo)) {}

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
  int64_t completion_tokens = 0;
  bool finished = false, final_sent = false;
  std::string finish_reason;
  std::string error;
  Clock::time_point t0 = Clock::now();
  double ttft_s = 0;

  // Consumes one event; returns the text that may be sent now.
  std::string consume(const TokenEvent& e) {
    if (finished) return "";
    if (want_logprobs) {
      for (const TokenLogprobs& t : e.prompt_logprobs) logprobs.push_back(t);
    }
    std::string text;
    if (e.token >= 0) {
      if (completion_tokens == 0) ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
      completion_tokens = std::max(completion_tokens + 1, e.completion_tokens);
      if (want_logprobs) logprobs.push_back({e.token, e.logprob, e.top_logprobs});
      text = stop.push(decoder.push(e.token));
      if (stop.stopped()) {
        backend->abort(id);  // a stop string ends generation here
        finish("stop");
        return route(text);
      }
    }
    if (e.finished) {
      if (e.finish_reason == "error") error = e.error.empty() ? "generation failed" : e.error;
      text += stop.push(decoder.flush());
      if (stop.stopped()) {
        finish("stop");
        return route(text);
      }
      text += stop.flush();
      finish(e.finish_reason == "length" ? "length" : e.finish_reason == "stop" ? "stop" : e.finish_reason);
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
  void finish(const std::string& reason) {
    finished = true;
    finish_reason = reason;
    const double e2e = std::chrono::duration<double>(Clock::now() - t0).count();
    if (error.empty() && reason != "abort") metrics->observe_request(ttft_s, e2e, completion_tokens);
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
  p.params = parse_completion_request(body, chat);
  const CompletionParams& cp = p.params;
  if (!cp.model.empty() && cp.model != ctx.options.served_model_name) {
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

}  // namespace

void handle_completion(const CompletionContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat) {
  auto prepared = std::make_shared<Prepared>(prepare(ctx, req.body, chat));
  const CompletionParams& cp = prepared->params;
  const size_t n = static_cast<size_t>(cp.n);

  const ToolCallFormat tool_format = chat && !cp.tools.is_null() ? ctx.chat.tool_call_format() : ToolCallFormat::kNone;
  auto channel = std::make_shared<RequestChannel>(!cp.stream && cp.stop.empty(), ctx.options.stream_interval);
  auto choices = std::make_shared<Choices>();
  // Choice p * n + j is prompt p's j-th generation; with a seed, generation j
  // draws with seed + j (as vLLM seeds parallel samples), so choices differ
  // and the same request still gives the same choices.
  for (size_t p = 0; p < prepared->prompts.size(); ++p) {
    const PreparedPrompt& pp = prepared->prompts[p];
    choices->prompt_tokens += static_cast<int64_t>(pp.tokens.size());
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
      const SubmitStatus st = ctx.backend.submit(
          std::move(sreq), [channel, index](const TokenEvent& e) { channel->push(index, e); }, &backend_id);
      if (st != SubmitStatus::kOk) {
        choices->abort_unfinished();  // the choices already queued
        if (st == SubmitStatus::kQueueFull) {
          res.set_header("Retry-After", "1");
          throw ApiError(429, "the server is at its queue limit (--max-queue); retry later", "rate_limit_error", "",
                         "queue_full");
        }
        throw ApiError(400, "the prompt plus 'max_tokens' can never fit in the KV cache of this server",
                       "invalid_request_error", "max_tokens", "context_length_exceeded");
      }
      choices->gens.push_back(std::make_unique<Generation>(ctx, cp, index, backend_id, pp.echo_text));
      if (chat && ctx.options.reasoning_format != ReasoningFormat::kNone) {
        choices->gens.back()->reasoning_splitter.emplace(ctx.options.reasoning_format);
      }
      if (tool_format != ToolCallFormat::kNone) {
        choices->gens.back()->tool_format = tool_format;
        choices->gens.back()->tool_splitter.emplace(tool_format);
      }
    }
  }

  const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string model = ctx.options.served_model_name;
  const Tokenizer& tok = ctx.backend.tokenizer();

  if (!cp.stream) {
    std::vector<std::string> texts, reasonings(choices->gens.size());
    for (const auto& g : choices->gens) texts.push_back(g->echo_text);
    std::vector<std::vector<TokenLogprobs>> logged(choices->gens.size());
    while (!choices->all_finished()) {
      for (const ChoiceEvent& ce : channel->take(std::chrono::milliseconds(1000))) {
        Generation& g = *choices->gens[ce.choice];
        texts[ce.choice] += g.consume(ce.event);
        reasonings[ce.choice] += g.take_reasoning();
        for (TokenLogprobs& t : g.logprobs) logged[ce.choice].push_back(std::move(t));
        g.logprobs.clear();
      }
      if (choices->failed() != nullptr) choices->abort_unfinished();
    }
    if (const Generation* f = choices->failed()) throw ApiError(500, "generation failed: " + f->error, "server_error");
    json out_choices = json::array();
    for (size_t i = 0; i < choices->gens.size(); ++i) {
      Generation& g = *choices->gens[i];
      json lp = nullptr;
      if (g.want_logprobs) {
        lp = chat ? chat_logprobs_json(tok, logged[i]) : completion_logprobs_json(tok, logged[i], &g.text_offset);
      }
      if (chat) {
        json message = {{"role", "assistant"}, {"content", texts[i]}};
        if (g.reasoning_splitter) message["reasoning_content"] = g.reasoning_seen ? json(reasonings[i]) : json(nullptr);
        if (!g.tool_calls.is_null()) {
          message["tool_calls"] = g.tool_calls;
          if (texts[i].find_first_not_of(" \n\t\r") == std::string::npos) message["content"] = nullptr;
        }
        out_choices.push_back(
            {{"index", i}, {"message", std::move(message)}, {"logprobs", lp}, {"finish_reason", g.finish_reason}});
      } else {
        out_choices.push_back({{"index", i}, {"text", texts[i]}, {"logprobs", lp}, {"finish_reason", g.finish_reason}});
      }
    }
    json out = {{"id", id},           {"object", chat ? "chat.completion" : "text_completion"},
                {"created", created}, {"model", model},
                {"choices", out_choices}, {"usage", choices->usage()}};
    res.set_content(dump(out), "application/json");
    return;
  }

  const bool include_usage = cp.include_usage;
  const double heartbeat_s = ctx.options.heartbeat_s;
  auto sent_first = std::make_shared<bool>(false);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [prepared, channel, choices, &tok, id, created, model, chat, include_usage, heartbeat_s, sent_first](
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
          for (const auto& g : choices->gens) {
            if (chat || !g->echo_text.empty()) {
              out += event(stream_choice(chat, g->index, g->echo_text, nullptr, nullptr, true), nullptr);
            }
          }
        }
        auto deadline = Clock::now() + std::chrono::duration<double>(heartbeat_s);
        while (out.empty() && !choices->all_finished() && Clock::now() < deadline) {
          for (const ChoiceEvent& ce : channel->take(std::chrono::milliseconds(100))) {
            Generation& g = *choices->gens[ce.choice];
            if (g.final_sent) continue;
            const std::string text = g.consume(ce.event);
            const std::string reasoning = g.take_reasoning();
            if (!reasoning.empty()) {
              json ch = stream_choice(chat, g.index, "", take_logprobs(tok, g, chat), nullptr, false);
              ch["delta"] = {{"reasoning_content", reasoning}};
              out += event(ch, nullptr);
            }
            if (!text.empty()) {
              out += event(stream_choice(chat, g.index, text, take_logprobs(tok, g, chat), nullptr, false), nullptr);
            }
            if (g.finished && g.error.empty()) {
              if (!g.tool_calls.is_null()) {
                json delta_calls = g.tool_calls;
                for (size_t k = 0; k < delta_calls.size(); ++k) delta_calls[k]["index"] = k;
                json ch = stream_choice(chat, g.index, "", nullptr, nullptr, false);
                ch["delta"] = {{"tool_calls", delta_calls}};
                out += event(ch, nullptr);
              }
              json lp = g.logprobs.empty() ? json(nullptr) : take_logprobs(tok, g, chat);
              out += event(stream_choice(chat, g.index, "", std::move(lp), g.finish_reason, false), nullptr);
              g.final_sent = true;
            }
          }
          if (choices->failed() != nullptr) choices->abort_unfinished();
        }
        const bool done = choices->all_finished();
        if (done) {
          if (const Generation* f = choices->failed()) {
            out += "data: " + dump(ApiError(500, "generation failed: " + f->error, "server_error").body()) + "\n\n";
          } else if (include_usage) {
            out += event(nullptr, choices->usage());
          }
          out += "data: [DONE]\n\n";
        }
        if (out.empty()) out = ": keep-alive\n\n";  // a write that fails tells us the client left
        if (!sink.write(out.data(), out.size())) {
          choices->abort_unfinished();
          return false;
        }
        if (done) sink.done();
        return true;
      },
      [choices](bool) { choices->abort_unfinished(); });  // the client went away mid-stream
}

}  // namespace parallm
