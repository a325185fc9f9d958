// SentencePiece-style BPE with scores, the algorithm of llama2.c's run.c
// encode() and of llama.cpp's SPM tokenizer: split the (escaped) text into
// UTF-8 characters, map characters without a piece to byte-fallback pieces,
// then repeatedly merge the adjacent pair whose concatenation is a piece with
// the highest score (ties: leftmost first). A priority queue with stale-entry
// checks makes it O(n log n) instead of run.c's O(n^2) rescans; the merge
// order, and so the result, is the same.
//
// With ranked merges (a tokenizer.json of a SentencePiece model, e.g. Llama 2
// or Mistral: Metaspace + byte fallback) the pair to merge is instead the one
// with the lowest merge rank, as the Hugging Face BPE model picks it.
#include <queue>
#include <string>

#include "tokenizer/encoders.h"
#include "tokenizer/unicode.h"

namespace parallm {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

struct Symbol {
  size_t start = 0;       // byte range in the escaped text
  size_t len = 0;         // 0 once merged into its left neighbour
  int32_t id = -1;        // piece id of the symbol's text
  int32_t fixed_id = -1;  // byte fallback / unknown: never merges
  int prev = -1, next = -1;
};

struct Bigram {
  int left = 0, right = 0;
  float score = 0.0f;
  size_t len = 0;  // combined length when queued; stale if it changed
  int32_t merged_id = 0;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// Length of the character at `pos`: run.c takes a lead byte plus following
// continuation bytes (at most 4); llama.cpp trusts the lead byte.
size_t char_len(const TokenizerData& data, std::string_view text, size_t pos) {
  size_t len = 1;
  if (data.llama2c) {
    while (pos + len < text.size() && len < 4 && (static_cast<uint8_t>(text[pos + len]) & 0xC0) == 0x80) {
      ++len;
    }
  } else {
    len = utf8_seq_len(static_cast<uint8_t>(text[pos]));
  }
  return std::min(len, text.size() - pos);
}

}  // namespace

void spm_encode(const TokenizerData& data, std::string_view text, bool add_prefix, std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::string escaped;
  escaped.reserve(text.size() + 8);
  const std::string_view space = data.llama2c ? std::string_view(" ") : kSpaceMark;
  if (add_prefix) escaped += space;
  for (char c : text) {
    if (c == ' ') {
      escaped += space;
    } else {
      escaped += c;
    }
  }

  std::vector<Symbol> symbols;
  symbols.reserve(escaped.size());
  auto push_symbol = [&](size_t start, size_t len, int32_t id, int32_t fixed_id) {
    Symbol s;
    s.start = start, s.len = len, s.id = id, s.fixed_id = fixed_id;
    s.prev = static_cast<int>(symbols.size()) - 1;
    s.next = static_cast<int>(symbols.size()) + 1;
    symbols.push_back(s);
  };
  for (size_t pos = 0; pos < escaped.size();) {
    const size_t len = char_len(data, escaped, pos);
    auto it = data.piece_to_id.find(std::string_view(escaped).substr(pos, len));
    if (it != data.piece_to_id.end()) {
      push_symbol(pos, len, it->second, -1);
    } else {
      for (size_t i = 0; i < len; ++i) {
        const int32_t byte_id = data.byte_ids[static_cast<uint8_t>(escaped[pos + i])];
        const int32_t id = byte_id >= 0 ? byte_id : data.unk_id;
        if (id >= 0) push_symbol(pos + i, 1, id, id);
      }
    }
    pos += len;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  const bool ranked = !data.merges.empty();
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (l.fixed_id >= 0 || r.fixed_id >= 0) return;
    if (ranked) {
      auto it = data.merges.find(merge_key(l.id, r.id));
      if (it == data.merges.end()) return;
      queue.push(Bigram{left, right, -static_cast<float>(it->second.rank), l.len + r.len, it->second.merged_id});
      return;
    }
    auto it = data.piece_to_id.find(std::string_view(escaped).substr(l.start, l.len + r.len));
    if (it == data.piece_to_id.end()) return;
    queue.push(Bigram{left, right, data.scores[it->second], l.len + r.len, it->second});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len || l.next != b.right) continue;
    l.len += r.len;
    l.id = b.merged_id;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = 0; i >= 0; i = symbols[i].next) {
    out.push_back(symbols[i].id);
  }
}

}  // namespace parallm
