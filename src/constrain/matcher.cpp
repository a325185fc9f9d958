// Pushdown matching over persistent stacks (see matcher.h).
#include "constrain/matcher.h"

#include <algorithm>

#include "util/check.h"

namespace parallm::constrain {

Matcher::Matcher(const Grammar* grammar) : g_(grammar) {
  frames_.reserve(1024);
  expand(push_frame(g_->root(), 0, -1, 1), &cur_);
}

int32_t Matcher::push_frame(int32_t rule, int32_t state, int32_t parent, int32_t depth) {
  frames_.push_back({rule, state, parent, depth});
  return static_cast<int32_t>(frames_.size() - 1);
}

bool Matcher::same(int32_t a, int32_t b) const {
  while (a != b) {
    if (a < 0 || b < 0) return false;
    const Frame& x = frames_[static_cast<size_t>(a)];
    const Frame& y = frames_[static_cast<size_t>(b)];
    if (x.rule != y.rule || x.state != y.state || x.depth != y.depth) return false;
    a = x.parent, b = y.parent;
  }
  return true;
}

void Matcher::add_unique(int32_t frame, Set* out) {
  for (int32_t f : *out) {
    if (same(f, frame)) return;
  }
  if (out->size() < kMaxStacks) out->push_back(frame);
}

// Takes every call and return that can happen before the next byte.
void Matcher::expand(int32_t id, Set* out) {
  // A nullable rule called in a loop returns to the state that calls it
  // again: without this check that is an endless call/return cycle (a stack
  // overflow found by fuzz_grammar). A frame equal to one already expanded
  // in this expansion adds nothing new.
  const bool top = expanding_depth_++ == 0;
  if (top) expanded_.clear();
  struct Leave {
    int32_t* d;
    ~Leave() { --*d; }
  } leave{&expanding_depth_};
  for (int32_t e : expanded_) {
    if (same(e, id)) return;
  }
  expanded_.push_back(id);
  const Frame f = frames_[static_cast<size_t>(id)];
  const DfaState& s = g_->state(f.rule, f.state);
  if (!s.bytes.empty() || (s.accept && f.parent < 0)) add_unique(id, out);
  if (s.accept && f.parent >= 0) expand(f.parent, out);  // the caller resumes at its return state
  if (f.depth >= kMaxStackDepth) return;
  for (const CallEdge& c : s.calls) {
    const int32_t ret = push_frame(f.rule, c.next, f.parent, f.depth);
    expand(push_frame(c.rule, 0, ret, f.depth + 1), out);
  }
}

void Matcher::step(const Set& from, uint8_t c, Set* to) {
  to->clear();
  for (int32_t id : from) {
    const Frame f = frames_[static_cast<size_t>(id)];
    const int32_t next = g_->state(f.rule, f.state).next_on(c);
    if (next >= 0) expand(push_frame(f.rule, next, f.parent, f.depth), to);
  }
}

bool Matcher::feed(const std::string& bytes) {
  const size_t m = mark();
  Set a = cur_, b;
  for (unsigned char c : bytes) {
    step(a, c, &b);
    if (b.empty()) {
      release(m);
      return false;
    }
    a.swap(b);
  }
  cur_ = std::move(a);
  if (frames_.size() > 65536) compact();
  return true;
}

bool Matcher::accepting(const Set& s) const {
  for (int32_t id : s) {
    const Frame& f = frames_[static_cast<size_t>(id)];
    if (f.parent < 0 && g_->state(f.rule, f.state).accept) return true;
  }
  return false;
}

bool Matcher::can_continue(const Set& s) const {
  for (int32_t id : s) {
    const Frame& f = frames_[static_cast<size_t>(id)];
    if (!g_->state(f.rule, f.state).bytes.empty()) return true;
  }
  return false;
}

int32_t Matcher::distance(const Set& s) const {
  int32_t best = kUnreachable;
  for (int32_t id : s) {
    int64_t d = 0;
    for (int32_t f = id; f >= 0; f = frames_[static_cast<size_t>(f)].parent) {
      const Frame& fr = frames_[static_cast<size_t>(f)];
      d += g_->state(fr.rule, fr.state).dist;
    }
    best = static_cast<int32_t>(std::min<int64_t>(best, d));
  }
  return best;
}

std::vector<uint32_t> Matcher::key(const Set& s) const {
  std::vector<std::vector<uint32_t>> stacks;
  for (int32_t id : s) {
    std::vector<uint32_t> st;
    for (int32_t f = id; f >= 0; f = frames_[static_cast<size_t>(f)].parent) {
      st.push_back(static_cast<uint32_t>(frames_[static_cast<size_t>(f)].rule));
      st.push_back(static_cast<uint32_t>(frames_[static_cast<size_t>(f)].state));
    }
    stacks.push_back(std::move(st));
  }
  std::sort(stacks.begin(), stacks.end());
  std::vector<uint32_t> out;
  for (const auto& st : stacks) {
    out.insert(out.end(), st.begin(), st.end());
    out.push_back(UINT32_MAX);
  }
  return out;
}

// Copies the frames the current set reaches into a fresh arena, so a long
// generation does not grow it without bound.
void Matcher::compact() {
  std::vector<Frame> old;
  old.swap(frames_);
  frames_.reserve(1024);
  std::vector<int32_t> moved(old.size(), -1);
  std::vector<int32_t> chain;
  Set next;
  for (int32_t id : cur_) {
    chain.clear();
    for (int32_t f = id; f >= 0 && moved[static_cast<size_t>(f)] < 0; f = old[static_cast<size_t>(f)].parent)
      chain.push_back(f);
    for (size_t i = chain.size(); i-- > 0;) {
      const Frame& f = old[static_cast<size_t>(chain[i])];
      const int32_t parent = f.parent < 0 ? -1 : moved[static_cast<size_t>(f.parent)];
      moved[static_cast<size_t>(chain[i])] = push_frame(f.rule, f.state, parent, f.depth);
    }
    next.push_back(moved[static_cast<size_t>(id)]);
  }
  cur_ = std::move(next);
}

}  // namespace parallm::constrain
