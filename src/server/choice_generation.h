// One choice of a completion request as the server follows it: its tokens
// detokenized (UTF-8 safe), stop strings, reasoning and tool-call splitting,
// logprobs not yet sent, and its latency record; and Choices, all of one
// request's choices (prompts x n) over one channel. Plain bookkeeping, shared
// by the JSON and the SSE answer (completion_flow.cpp).
#pragma once
#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/completion_flow.h"
#include "server/logprobs_json.h"
#include "server/openai_request.h"
#include "server/reasoning.h"
#include "server/stop_matcher.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace parallm {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Text and bookkeeping of one choice, shared by both answer modes.
struct Generation {
  Generation(const CompletionContext& c, const CompletionParams& p, size_t index, uint64_t backend_id, std::string echo,
             Clock::time_point arrival, int64_t n_prompt)
      : backend(&c.backend),
        metrics(&c.metrics),
        index(index),
        id(backend_id),
        decoder(c.backend.tokenizer(), p.skip_special_tokens),
        stop(p.stop, p.include_stop_str_in_output),
        want_logprobs(p.logprobs >= 0),
        echo_logprobs(p.echo && p.logprobs >= 0),
        want_prompt_logprobs(p.prompt_logprobs >= 0),
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
  bool echo_logprobs;                          // the prompt's tokens lead the completion's logprobs (echo)
  bool want_prompt_logprobs;                   // vLLM's prompt_logprobs field
  std::vector<TokenLogprobs> prompt_logprobs;  // [n_prompt] with want_prompt_logprobs, once the first event is in
  int64_t text_offset;                         // completions logprobs: characters of the text so far
  std::string echo_text;                       // completions with echo: the prompt, sent first
  std::vector<TokenLogprobs> logprobs;         // tokens whose logprobs are not yet sent
  std::optional<ReasoningSplitter> reasoning_splitter;  // chat with --reasoning-parser
  std::string reasoning_delta;                          // reasoning not yet taken (take_reasoning)
  bool reasoning_seen = false;
  std::optional<ToolCallSplitter> tool_splitter;  // chat with tools, a template with a call format
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  nlohmann::json tool_calls;  // null, or the parsed calls once finished
  // tool_choice "required" or naming a function: the whole (constrained)
  // output becomes tool_calls at the end; nothing streams as content.
  bool tool_forced = false;
  std::string forced_function;  // named: the function; required: empty
  std::string forced_text;
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
    if (echo_logprobs) {
      for (const TokenLogprobs& t : e.prompt_logprobs) logprobs.push_back(t);
    }
    if (want_prompt_logprobs && !e.prompt_logprobs.empty()) prompt_logprobs = e.prompt_logprobs;
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
    if (tool_forced) {
      forced_text += text;
      if (!finished) return "";
      tool_forced = false;
      if (auto calls = forced_tool_calls(forced_text, forced_function)) {
        tool_calls = std::move(*calls);
        if (finish_reason == "stop") finish_reason = "tool_calls";
        return "";
      }
      return forced_text;  // cut short (length): the text as it came
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
  nlohmann::json usage() const {
    int64_t completion = 0;
    for (const auto& g : gens) completion += g->completion_tokens;
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens + completion}};
  }
};

}  // namespace parallm
