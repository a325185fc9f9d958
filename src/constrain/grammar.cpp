// Rule DFAs (see grammar.h). Each rule's expression becomes a Thompson NFA
// (repetition {m,n} is unrolled into copies, so its bounds cost states, not
// run-time counters), then a DFA by subset construction: byte edges are
// grouped into ranges of bytes that lead to the same subset, and each called
// rule is one more symbol of the alphabet. Trimming and distances are a
// fixpoint over all rules, since a call costs the callee's shortest string.
#include "constrain/grammar.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "util/check.h"

namespace parallm::constrain {
namespace {

struct NfaEdge {
  enum class Kind : uint8_t { kEps, kBytes, kCall };
  Kind kind;
  int32_t to;
  int32_t label;  // kBytes: index into byte_sets; kCall: rule
};

class Nfa {
 public:
  explicit Nfa(int64_t max_states) : max_states_(max_states) {}
  int32_t add_state() {
    if (static_cast<int64_t>(edges.size()) >= max_states_) {
      throw InputError("the constraint is too large to compile (more than " + std::to_string(max_states_) +
                       " automaton states; lower repetition counts or string lengths)");
    }
    edges.emplace_back();
    return static_cast<int32_t>(edges.size() - 1);
  }
  // Builds `e` between fresh states; returns {start, end}.
  std::pair<int32_t, int32_t> build(const Expr& e) {
    const int32_t s = add_state();
    const int32_t t = add_state();
    build_between(e, s, t);
    return {s, t};
  }
  void build_between(const Expr& e, int32_t s, int32_t t) {
    switch (e.kind) {
      case Expr::Kind::kBytes:
        if (e.bytes.none()) return;
        byte_sets.push_back(e.bytes);
        edges[s].push_back({NfaEdge::Kind::kBytes, t, static_cast<int32_t>(byte_sets.size() - 1)});
        return;
      case Expr::Kind::kRule:
        edges[s].push_back({NfaEdge::Kind::kCall, t, e.rule});
        return;
      case Expr::Kind::kSeq: {
        if (e.items.empty()) {
          eps(s, t);
          return;
        }
        int32_t cur = s;
        for (size_t i = 0; i < e.items.size(); ++i) {
          const int32_t next = i + 1 == e.items.size() ? t : add_state();
          build_between(*e.items[i], cur, next);
          cur = next;
        }
        return;
      }
      case Expr::Kind::kAlt:
        for (const ExprPtr& it : e.items) {
          const int32_t a = add_state(), b = add_state();
          eps(s, a);
          build_between(*it, a, b);
          eps(b, t);
        }
        return;
      case Expr::Kind::kRepeat: {
        const Expr& item = *e.items[0];
        int32_t cur = s;
        for (int32_t i = 0; i < e.min; ++i) {
          const int32_t next = add_state();
          build_between(item, cur, next);
          cur = next;
        }
        if (e.max < 0) {  // cur -> loop -> cur
          const int32_t a = add_state(), b = add_state();
          eps(cur, a);
          build_between(item, a, b);
          eps(b, cur);
          eps(cur, t);
          return;
        }
        for (int32_t i = e.min; i < e.max; ++i) {
          eps(cur, t);
          const int32_t next = add_state();
          build_between(item, cur, next);
          cur = next;
        }
        eps(cur, t);
        return;
      }
    }
  }
  void eps(int32_t a, int32_t b) { edges[a].push_back({NfaEdge::Kind::kEps, b, 0}); }

  std::vector<std::vector<NfaEdge>> edges;
  std::vector<ByteSet> byte_sets;

 private:
  int64_t max_states_;
};

using Subset = std::vector<int32_t>;  // sorted NFA states

void closure(const Nfa& nfa, Subset* set) {
  std::vector<int32_t> stack(set->begin(), set->end());
  std::unordered_map<int32_t, char> in;
  for (int32_t s : *set) in[s] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (const NfaEdge& e : nfa.edges[s]) {
      if (e.kind == NfaEdge::Kind::kEps && !in.count(e.to)) {
        in[e.to] = 1;
        set->push_back(e.to);
        stack.push_back(e.to);
      }
    }
  }
  std::sort(set->begin(), set->end());
}

struct SubsetHash {
  size_t operator()(const Subset& s) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : s) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

[[noreturn]] void too_large(const GrammarLimits& limits) {
  throw InputError("the constraint is too large to compile (more than " + std::to_string(limits.max_dfa_states) +
                   " automaton states or too much work building them; lower repetition counts, string lengths or "
                   "enum sizes, or avoid a repeat next to an overlapping star)");
}

// Subset construction. `dfa_budget` and `work_budget` are shared by all rules.
std::vector<DfaState> to_dfa(const Expr& expr, const GrammarLimits& limits, int64_t* dfa_budget, int64_t* work_budget) {
  Nfa nfa(limits.max_nfa_states);
  const std::pair<int32_t, int32_t> ends = nfa.build(expr);
  const int32_t start = ends.first, end = ends.second;
  auto spend = [&](size_t steps) {
    *work_budget -= static_cast<int64_t>(steps);
    if (*work_budget < 0) too_large(limits);
  };
  std::vector<DfaState> out;
  std::vector<Subset> subsets;
  std::unordered_map<Subset, int32_t, SubsetHash> index;
  auto intern = [&](Subset s) -> int32_t {
    closure(nfa, &s);
    spend(s.size());
    auto it = index.find(s);
    if (it != index.end()) return it->second;
    if (--*dfa_budget < 0) too_large(limits);
    const int32_t id = static_cast<int32_t>(out.size());
    out.emplace_back();
    out.back().accept = std::binary_search(s.begin(), s.end(), end);
    index.emplace(s, id);
    subsets.push_back(std::move(s));
    return id;
  };
  intern({start});
  std::vector<Subset> by_byte(256);
  for (size_t d = 0; d < subsets.size(); ++d) {
    for (Subset& b : by_byte) b.clear();
    std::map<int32_t, Subset> by_rule;
    const Subset cur = subsets[d];
    spend(cur.size());
    for (int32_t s : cur) {
      for (const NfaEdge& e : nfa.edges[s]) {
        if (e.kind == NfaEdge::Kind::kBytes) {
          const ByteSet& bs = nfa.byte_sets[static_cast<size_t>(e.label)];
          spend(bs.count());
          for (size_t c = bs._Find_first(); c < bs.size(); c = bs._Find_next(c)) by_byte[c].push_back(e.to);
        } else if (e.kind == NfaEdge::Kind::kCall) {
          by_rule[e.label].push_back(e.to);
        }
      }
    }
    for (Subset& t : by_byte) {
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end()), t.end());
    }
    // Runs of bytes with the same target subset become one edge.
    std::vector<ByteEdge> bytes;
    for (int c = 0; c < 256;) {
      const Subset& t = by_byte[static_cast<size_t>(c)];
      if (t.empty()) {
        ++c;
        continue;
      }
      int hi = c;
      while (hi + 1 < 256 && by_byte[static_cast<size_t>(hi + 1)] == t) ++hi;
      const int32_t next = intern(t);
      bytes.push_back({static_cast<uint8_t>(c), static_cast<uint8_t>(hi), next});
      c = hi + 1;
    }
    std::vector<CallEdge> calls;
    for (auto& [rule, t] : by_rule) {
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end()), t.end());
      calls.push_back({rule, intern(t)});
    }
    out[d].bytes = std::move(bytes);
    out[d].calls = std::move(calls);
  }
  return out;
}

}  // namespace

int32_t Grammar::add_rule(const std::string& name) {
  rules_.push_back(Rule{name, nullptr, {}});
  return static_cast<int32_t>(rules_.size() - 1);
}

int32_t Grammar::find_rule(const std::string& name) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

void Grammar::define(int32_t rule, ExprPtr expr) { rules_[static_cast<size_t>(rule)].expr = std::move(expr); }

int64_t Grammar::n_states() const {
  int64_t n = 0;
  for (const Rule& r : rules_) n += static_cast<int64_t>(r.states.size());
  return n;
}

void Grammar::compile(const GrammarLimits& limits) {
  PARALLM_CHECK(root_ >= 0 && root_ < static_cast<int32_t>(rules_.size()));
  int64_t budget = limits.max_dfa_states, work = limits.max_compile_work;
  for (Rule& r : rules_) {
    if (!r.expr) throw InputError("grammar rule '" + r.name + "' is used but never defined");
    r.states = to_dfa(*r.expr, limits, &budget, &work);
  }
  // Distances: a fixpoint of dist(s) = min(0 if accepting, 1 + dist(byte
  // target), dist(callee start) + dist(call target)).
  for (bool changed = true; changed;) {
    changed = false;
    for (Rule& r : rules_) {
      for (size_t i = r.states.size(); i-- > 0;) {
        DfaState& s = r.states[i];
        int32_t d = s.accept ? 0 : s.dist;
        for (const ByteEdge& e : s.bytes) d = std::min(d, 1 + r.states[static_cast<size_t>(e.next)].dist);
        for (const CallEdge& c : s.calls) {
          const int32_t callee = rules_[static_cast<size_t>(c.rule)].states[0].dist;
          d = std::min(d, std::min(kUnreachable, callee + r.states[static_cast<size_t>(c.next)].dist));
        }
        if (d < s.dist) s.dist = d, changed = true;
      }
    }
  }
  if (rules_[static_cast<size_t>(root_)].states[0].dist >= kUnreachable) {
    throw InputError(
        "the constraint accepts no output at all (e.g. an empty enum, contradictory bounds, or a "
        "rule that never ends)");
  }
  // Trim: edges into states (or rules) from which nothing completes.
  for (Rule& r : rules_) {
    for (DfaState& s : r.states) {
      std::erase_if(s.bytes,
                    [&](const ByteEdge& e) { return r.states[static_cast<size_t>(e.next)].dist >= kUnreachable; });
      std::erase_if(s.calls, [&](const CallEdge& c) {
        return r.states[static_cast<size_t>(c.next)].dist >= kUnreachable ||
               rules_[static_cast<size_t>(c.rule)].states[0].dist >= kUnreachable;
      });
    }
  }
  // Left recursion: a rule that can call itself before reading a byte would
  // push forever. Edges A -> B when B is called from a state of A reached
  // from its start through calls of rules that can match nothing.
  std::vector<char> nullable(rules_.size());
  for (size_t i = 0; i < rules_.size(); ++i) nullable[i] = rules_[i].states[0].dist == 0;
  std::vector<std::vector<int32_t>> first_calls(rules_.size());
  for (size_t a = 0; a < rules_.size(); ++a) {
    const Rule& r = rules_[a];
    std::vector<char> seen(r.states.size());
    std::vector<int32_t> todo{0};
    seen[0] = 1;
    while (!todo.empty()) {
      const int32_t s = todo.back();
      todo.pop_back();
      for (const CallEdge& c : r.states[static_cast<size_t>(s)].calls) {
        first_calls[a].push_back(c.rule);
        if (nullable[static_cast<size_t>(c.rule)] && !seen[static_cast<size_t>(c.next)]) {
          seen[static_cast<size_t>(c.next)] = 1;
          todo.push_back(c.next);
        }
      }
    }
  }
  std::vector<int> color(rules_.size());  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<int32_t, size_t>> path;
  for (size_t s = 0; s < rules_.size(); ++s) {
    if (color[s]) continue;
    path.push_back({static_cast<int32_t>(s), 0});
    color[s] = 1;
    while (!path.empty()) {
      auto& [a, k] = path.back();
      if (k < first_calls[static_cast<size_t>(a)].size()) {
        const int32_t b = first_calls[static_cast<size_t>(a)][k++];
        if (color[static_cast<size_t>(b)] == 1) {
          throw InputError("grammar rule '" + rules_[static_cast<size_t>(b)].name +
                           "' is left-recursive (it can reach itself before reading any text); write it with "
                           "repetition instead");
        }
        if (color[static_cast<size_t>(b)] == 0) {
          color[static_cast<size_t>(b)] = 1;
          path.push_back({b, 0});
        }
      } else {
        color[static_cast<size_t>(a)] = 2;
        path.pop_back();
      }
    }
  }
}

}  // namespace parallm::constrain
