#include "server/logprobs_json.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace parallm {
namespace {

using nlohmann::json;

double finite_logprob(float lp) { return lp >= -9999.0f ? static_cast<double>(lp) : -9999.0; }

json byte_list(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

int64_t count_characters(const std::string& s) {
  int64_t n = 0;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    i += ok ? len : 1;
    ++n;
  }
  return n;
}

json completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens, int64_t* text_offset) {
  json pieces = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string piece = tok.token_to_piece(t.token);
    pieces.push_back(piece);
    if (!t.has_logprob) {  // a prompt's first token: nothing predicts it
      lps.push_back(nullptr);
      tops.push_back(nullptr);
    } else {
      lps.push_back(finite_logprob(t.logprob));
      json top = json::object();
      for (const TokenLogprob& a : t.top) top[tok.token_to_piece(a.token)] = finite_logprob(a.logprob);
      top[piece] = finite_logprob(t.logprob);
      tops.push_back(std::move(top));
    }
    offsets.push_back(*text_offset);
    *text_offset += count_characters(piece);
  }
  return {{"tokens", pieces}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& tokens) {
  json content = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string piece = tok.token_to_piece(t.token);
    json top = json::array();
    for (const TokenLogprob& a : t.top) {
      const std::string p = tok.token_to_piece(a.token);
      top.push_back({{"token", p}, {"logprob", finite_logprob(a.logprob)}, {"bytes", byte_list(p)}});
    }
    content.push_back(
        {{"token", piece}, {"logprob", finite_logprob(t.logprob)}, {"bytes", byte_list(piece)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json vllm_prompt_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& prompt) {
  json out = json::array();
  for (const TokenLogprobs& t : prompt) {
    if (!t.has_logprob) {
      out.push_back(nullptr);
      continue;
    }
    auto entry = [&](int32_t id, float lp, int32_t rank) {
      return json{{"logprob", finite_logprob(lp)}, {"rank", rank}, {"decoded_token", tok.token_to_piece(id)}};
    };
    // A map: its keys are ids (JSON objects are unordered; vLLM's dict lists
    // the prompt token first).
    json m = json::object();
    int32_t own_rank = t.rank;
    for (size_t r = 0; r < t.top.size(); ++r) {
      if (t.top[r].token == t.token) own_rank = static_cast<int32_t>(r + 1);
    }
    for (size_t r = 0; r < t.top.size(); ++r) {
      m[std::to_string(t.top[r].token)] = entry(t.top[r].token, t.top[r].logprob, static_cast<int32_t>(r + 1));
    }
    m[std::to_string(t.token)] = entry(t.token, t.logprob, own_rank);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace parallm
