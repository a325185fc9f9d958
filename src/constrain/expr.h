// The expressions every constraint compiles to: byte sets, sequences,
// alternatives, bounded or unbounded repetition and references to other
// rules of the same grammar. Regexes (regex_parser.h), EBNF / Lark grammars
// (ebnf_parser.h), JSON schemas (json_schema.h) and choice lists all build
// these; grammar.h turns each rule's expression into a DFA over bytes and
// rule calls. Text is UTF-8: a code point range becomes the byte sequences
// that encode it (utf8_range).
#pragma once
#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace parallm::constrain {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;
using ByteSet = std::bitset<256>;

struct Expr {
  enum class Kind { kBytes, kSeq, kAlt, kRepeat, kRule };
  Kind kind = Kind::kSeq;
  ByteSet bytes;               // kBytes: one byte out of these (empty: matches nothing)
  std::vector<ExprPtr> items;  // kSeq (empty: the empty string), kAlt (empty: nothing), kRepeat: one item
  int32_t min = 0, max = -1;   // kRepeat: max -1 = unbounded
  int32_t rule = -1;           // kRule: the rule's index in its grammar
};

ExprPtr byte_set(const ByteSet& bytes);
ExprPtr literal(const std::string& bytes);
ExprPtr seq(std::vector<ExprPtr> items);
ExprPtr alt(std::vector<ExprPtr> items);
ExprPtr repeat(ExprPtr item, int32_t min, int32_t max);
ExprPtr optional(ExprPtr item);
ExprPtr rule_ref(int32_t rule);
ExprPtr nothing();  // matches no string
ExprPtr empty();    // matches the empty string only

// One code point in [lo, hi] (surrogates excluded), as UTF-8.
ExprPtr utf8_range(uint32_t lo, uint32_t hi);
// One code point in any of the sorted, disjoint ranges.
ExprPtr utf8_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);
// The complement of sorted disjoint ranges within [0, 0x10FFFF].
std::vector<std::pair<uint32_t, uint32_t>> complement(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);
// Sorts and merges overlapping or adjacent ranges.
std::vector<std::pair<uint32_t, uint32_t>> normalize(std::vector<std::pair<uint32_t, uint32_t>> ranges);

}  // namespace parallm::constrain
