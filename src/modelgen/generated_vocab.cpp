// Generation of the built-in SentencePiece-style vocabulary (see the header).
#include "modelgen/generated_vocab.h"

#include <cstdio>
#include <set>

#include "util/check.h"

namespace parallm {

namespace {

// U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's word-boundary marker.
const std::string kSpace = "\xe2\x96\x81";

// Frequent English words: their prefixes become the first merged pieces, so
// ordinary text tokenizes into a few pieces per word.
constexpr const char* kWords[] = {
    "the",    "and",   "to",   "of",       "a",     "in",    "is",      "it",    "you",    "that",   "he",    "was",
    "for",    "on",    "are",  "with",     "as",    "his",   "they",    "be",    "at",     "one",    "have",  "this",
    "from",   "or",    "had",  "by",       "not",   "word",  "but",     "what",  "some",   "we",     "can",   "out",
    "other",  "were",  "all",  "there",    "when",  "up",    "use",     "your",  "how",    "said",   "an",    "each",
    "she",    "which", "do",   "their",    "time",  "if",    "will",    "way",   "about",  "many",   "then",  "them",
    "write",  "would", "like", "so",       "these", "her",   "long",    "make",  "thing",  "see",    "him",   "two",
    "has",    "look",  "more", "day",      "could", "go",    "come",    "did",   "number", "sound",  "no",    "most",
    "people", "my",    "over", "know",     "water", "than",  "call",    "first", "who",    "may",    "down",  "side",
    "been",   "now",   "find", "any",      "new",   "work",  "part",    "take",  "get",    "place",  "made",  "live",
    "where",  "after", "back", "little",   "only",  "round", "man",     "year",  "came",   "show",   "every", "good",
    "me",     "give",  "our",  "under",    "name",  "very",  "through", "just",  "form",   "great",  "think", "say",
    "help",   "low",   "line", "before",   "turn",  "cause", "same",    "mean",  "move",   "right",  "boy",   "old",
    "too",    "does",  "tell", "sentence", "set",   "three", "want",    "air",   "well",   "also",   "play",  "small",
    "end",    "put",   "home", "read",     "hand",  "large", "once",    "upon",  "story",  "happy",  "girl",  "dog",
    "cat",    "sun",   "tree", "friend",   "day",   "big",   "saw",     "went",  "played", "wanted", "ing",   "ed",
    "er",     "ly",    "tion", "Hello",    "world", "The",   "Once",    "She",   "He",
};

}  // namespace

SpmVocab generate_spm_vocab(int64_t n_vocab) {
  if (n_vocab < 300 || n_vocab > (1 << 22)) {
    throw InputError("a generated vocabulary needs 300..4194304 tokens, not " + std::to_string(n_vocab));
  }
  SpmVocab v;
  auto add = [&](const std::string& piece, float score, int32_t type) {
    v.tokens.push_back(piece);
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, 0.0f, 6);
  }

  std::set<std::string> seen(v.tokens.begin(), v.tokens.end());
  float score = -1.0f;
  auto piece = [&](const std::string& p) {
    if (static_cast<int64_t>(v.tokens.size()) >= n_vocab || !seen.insert(p).second) return;
    add(p, score, 1);
    score -= 1.0f;
  };
  // Single characters first (every longer piece is built from them).
  const std::string chars = "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ0123456789.,!?'\"-:;()";
  piece(kSpace);
  for (char c : chars) piece(std::string(1, c));
  // Word prefixes, with and without the boundary marker: "▁t", "▁th", "▁the".
  for (const char* w : kWords) {
    std::string word = w;
    for (size_t n = 1; n <= word.size(); ++n) piece(kSpace + word.substr(0, n));
    for (size_t n = 2; n <= word.size(); ++n) piece(word.substr(0, n));
  }
  // Filler up to n_vocab: letter pairs, then triples, each extending a piece
  // that already exists ("▁a" + "b" -> "▁ab"; "ab" + "c" -> "abc").
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  for (char a : letters) {
    piece(kSpace + a);
    for (char b : letters) piece(kSpace + a + b);
  }
  for (char a : letters) {
    for (char b : letters) piece(std::string{a, b});
  }
  for (char a : letters) {
    for (char b : letters) {
      for (char c : letters) {
        piece(kSpace + a + b + c);
        piece(std::string{a, b, c});
      }
    }
  }
  for (int64_t k = 0; static_cast<int64_t>(v.tokens.size()) < n_vocab; ++k) {
    // Beyond ~36k pieces: numbered filler pieces (reachable through digits).
    piece(kSpace + std::to_string(k));
  }
  PARALLM_CHECK(static_cast<int64_t>(v.tokens.size()) == n_vocab);
  return v;
}

}  // namespace parallm
