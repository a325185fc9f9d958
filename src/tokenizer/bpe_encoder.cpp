// Byte-level BPE with ranked merges (GPT-2, Llama 3, Qwen2; the Hugging Face
// `tokenizers` BPE model): the pre-tokenizer splits the fragment, each
// pre-token's bytes become the pieces of their GPT-2 byte-to-unicode chars,
// then the adjacent pair with the lowest merge rank is merged until none is
// left (ties: leftmost first). With ignore_merges (Llama 3) a pre-token that
// is a piece by itself is emitted whole, as the reference tokenizer does.
#include <queue>
#include <string>

#include "tokenizer/encoders.h"
#include "tokenizer/unicode.h"

namespace parallm {
namespace {

struct Symbol {
  int32_t id = 0;
  bool mergeable = true;
  bool alive = true;
  int prev = -1, next = -1;
};

struct Candidate {
  int32_t rank = 0;
  int left = 0, right = 0;
  int32_t left_id = 0, right_id = 0;  // ids when queued; stale if either changed
  int32_t merged_id = 0;
};

struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

void encode_word(const TokenizerData& data, std::string_view word, std::vector<int32_t>& out) {
  if (data.ignore_merges) {
    std::string mapped;
    mapped.reserve(word.size() * 2);
    for (char c : word) utf8_append(mapped, byte_to_unicode(static_cast<uint8_t>(c)));
    auto it = data.piece_to_id.find(mapped);
    if (it != data.piece_to_id.end()) {
      out.push_back(it->second);
      return;
    }
  }

  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (char c : word) {
    int32_t id = data.byte_char_ids[static_cast<uint8_t>(c)];
    bool mergeable = true;
    if (id < 0) {  // a vocabulary without this byte: unknown token or nothing
      if (data.unk_id < 0) continue;
      id = data.unk_id;
      mergeable = false;
    }
    Symbol s;
    s.id = id, s.mergeable = mergeable;
    s.prev = static_cast<int>(symbols.size()) - 1;
    s.next = static_cast<int>(symbols.size()) + 1;
    symbols.push_back(s);
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (!l.mergeable || !r.mergeable) return;
    auto it = data.merges.find(merge_key(l.id, r.id));
    if (it == data.merges.end()) return;
    queue.push(Candidate{it->second.rank, left, right, l.id, r.id, it->second.merged_id});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[c.left];
    Symbol& r = symbols[c.right];
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) {
      continue;
    }
    l.id = c.merged_id;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace

void bpe_pretokenize(const TokenizerData& data, std::string_view text, std::vector<std::string>& pieces) {
  pieces.clear();
  if (text.empty()) return;
  auto split = [&](std::string_view part) {
    std::string prefixed;
    if (data.byte_level_prefix_space && part.front() != ' ') {
      prefixed = " ";
      prefixed += part;
      part = prefixed;
    }
    if (!data.pretokenizer) {
      pieces.emplace_back(part);
      return;
    }
    for (std::string_view word : data.pretokenizer->split(part)) pieces.emplace_back(word);
  };
  if (!data.prefix_pretokenizer) return split(text);
  for (std::string_view part : data.prefix_pretokenizer->split(text)) split(part);
}

void bpe_encode(const TokenizerData& data, std::string_view text, std::vector<int32_t>& out) {
  std::vector<std::string> pieces;
  bpe_pretokenize(data, text, pieces);
  for (const std::string& word : pieces) encode_word(data, word, out);
}

}  // namespace parallm
