// Running a compiled grammar over bytes: a pushdown automaton whose stack
// frames are (rule, DFA state) and whose stacks are persistent linked lists
// in an arena (a frame points at its caller), so that trying a byte copies
// nothing but one frame. A position in the text is a small set of stacks
// (grammars may be ambiguous); each stack's top either reads a byte next or
// is the root rule at an accepting state. Calls and returns are taken
// eagerly (expand()), so feeding a byte is one DFA step per stack.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "constrain/grammar.h"

namespace parallm::constrain {

class Matcher {
 public:
  // Deepest stack of rule calls (JSON nesting, recursive grammar rules):
  // deeper calls are not taken, so the output stays shallower than this.
  static constexpr int32_t kMaxStackDepth = 64;
  // Most stacks held at once (ambiguous grammars); more are dropped, which
  // narrows what is allowed but never allows text the grammar rejects.
  static constexpr size_t kMaxStacks = 64;

  using Set = std::vector<int32_t>;  // frame ids: the stack tops

  explicit Matcher(const Grammar* grammar);

  const Set& current() const { return cur_; }
  // Feeds one byte to `from`, writing the next set to `to` (empty: rejected).
  void step(const Set& from, uint8_t c, Set* to);
  bool feed(const std::string& bytes);  // all or nothing on the current set
  bool accepting(const Set& s) const;
  bool accepting() const { return accepting(cur_); }
  // Whether any byte can follow (false once the output is complete).
  bool can_continue(const Set& s) const;
  // Shortest number of bytes that completes the root rule from `s`.
  int32_t distance(const Set& s) const;
  int32_t distance() const { return distance(cur_); }
  // The set as plain data: equal keys for equal positions, whatever the
  // frame ids (the token-mask cache's key).
  std::vector<uint32_t> key(const Set& s) const;

  // Frames made after the mark (by step() on trial sets) can be dropped.
  size_t mark() const { return frames_.size(); }
  void release(size_t mark) { frames_.resize(mark); }

 private:
  struct Frame {
    int32_t rule, state, parent, depth;
  };
  int32_t push_frame(int32_t rule, int32_t state, int32_t parent, int32_t depth);
  void expand(int32_t frame, Set* out);
  bool same(int32_t a, int32_t b) const;
  void add_unique(int32_t frame, Set* out);
  void compact();

  const Grammar* g_;
  std::vector<Frame> frames_;
  std::vector<int32_t> expanded_;  // frames expanded by the current top-level expand()
  int32_t expanding_depth_ = 0;
  Set cur_;
};

}  // namespace parallm::constrain
