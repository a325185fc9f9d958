// A grammar: named rules, each an expression (expr.h) compiled into a DFA
// whose edges read a byte or call another rule (a recursive transition
// network, the shape xgrammar and llguidance run as a pushdown automaton).
// compile() builds the DFAs by subset construction, drops every state and
// call from which no complete string is reachable, measures each state's
// shortest distance (in bytes) to the end of its rule, and refuses what
// cannot be matched: a grammar whose root accepts nothing, left recursion,
// a DFA past the size limit. Errors are InputError with a message naming the
// problem (the server answers 400 with it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "constrain/expr.h"

namespace parallm::constrain {

// Bounds on what one constraint may cost to compile and hold.
struct GrammarLimits {
  int64_t max_nfa_states = 2'000'000;
  int64_t max_dfa_states = 200'000;  // all rules together
  // Steps of the subset construction (NFA states scanned and byte targets
  // collected), all rules together. The state counts alone do not bound the
  // time: a few thousand DFA states over large NFA subsets (a star next to a
  // long counted repeat of an overlapping class) took minutes.
  int64_t max_compile_work = 20'000'000;
};

constexpr int32_t kUnreachable = INT32_MAX / 4;

struct ByteEdge {
  uint8_t lo = 0, hi = 0;  // bytes lo..hi (inclusive)
  int32_t next = -1;
};
struct CallEdge {
  int32_t rule = -1;  // the rule to match here
  int32_t next = -1;  // the state to return to after it
};
struct DfaState {
  bool accept = false;
  std::vector<ByteEdge> bytes;  // sorted, disjoint
  std::vector<CallEdge> calls;
  int32_t dist = kUnreachable;  // shortest number of bytes to an accepting state of this rule
  int32_t next_on(uint8_t c) const {
    for (const ByteEdge& e : bytes) {
      if (c < e.lo) return -1;
      if (c <= e.hi) return e.next;
    }
    return -1;
  }
};
struct Rule {
  std::string name;
  ExprPtr expr;
  std::vector<DfaState> states;  // state 0 is the start
};

class Grammar {
 public:
  // Rules are declared first (so expressions may refer to rules not yet defined).
  int32_t add_rule(const std::string& name);
  int32_t find_rule(const std::string& name) const;  // -1 when absent
  void define(int32_t rule, ExprPtr expr);
  void set_root(int32_t rule) { root_ = rule; }

  // Throws InputError (see above).
  void compile(const GrammarLimits& limits = GrammarLimits{});

  int32_t root() const { return root_; }
  const std::vector<Rule>& rules() const { return rules_; }
  const DfaState& state(int32_t rule, int32_t s) const { return rules_[rule].states[s]; }
  int64_t n_states() const;

 private:
  std::vector<Rule> rules_;
  int32_t root_ = 0;
};

}  // namespace parallm::constrain
