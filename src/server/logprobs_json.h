// The `logprobs` fields of OpenAI responses, from the tokens a choice
// generated:
//   completions  {"tokens", "token_logprobs", "top_logprobs": [{piece: lp}],
//                 "text_offset"}  (the legacy format; the sampled token is in
//                 each top_logprobs dict beside the `logprobs` most likely;
//                 with echo the prompt's tokens come first, the very first
//                 with null logprob and top_logprobs)
//   chat         {"content": [{"token", "logprob", "bytes",
//                 "top_logprobs": [{"token", "logprob", "bytes"}]}]}
// A token's string is its decoded bytes (byte-level and SentencePiece
// markers undone); bytes that are not valid UTF-8 on their own (a piece of a
// multi-byte character) become U+FFFD when the JSON is written, and `bytes`
// keeps them exactly. Logprobs below -9999 (-inf included) are written as
// -9999, as vLLM does, since JSON has no infinity.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "sampling/logprobs.h"

namespace parallm {

class Tokenizer;

// *text_offset: characters of the choice's text before these tokens (the
// echoed prompt included); advanced past them.
nlohmann::json completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens,
                                        int64_t* text_offset);
nlohmann::json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens);
// vLLM's prompt_logprobs: [null, {"<token id>": {"logprob", "rank", "decoded_token"}, ...}, ...], one entry
// per prompt token; each map holds the prompt's own token (its rank: 1 +
// the tokens more likely) and the position's k most likely tokens (ranks
// 1..k; the prompt token, when among them, takes its place in that list as
// its rank, as vLLM's dict does).
nlohmann::json vllm_prompt_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& prompt);

// Characters (code points; each invalid byte counts as the one U+FFFD it becomes) in s.
int64_t count_characters(const std::string& s);

}  // namespace parallm
