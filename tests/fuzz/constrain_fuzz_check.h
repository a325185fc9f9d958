// Shared by the constraint compilers' fuzz targets: a compiled grammar must
// keep its promise that every state it can reach completes. From the start,
// following bytes that lower the shortest distance to completion must reach
// an accepting state in exactly that many bytes; anything else aborts.
#pragma once
#include <cstdlib>

#include "constrain/grammar.h"
#include "constrain/matcher.h"

inline void check_completes(const parallm::constrain::Grammar& g) {
  parallm::constrain::Matcher m(&g);
  const int32_t d0 = m.distance();
  if (d0 >= parallm::constrain::kUnreachable) std::abort();
  parallm::constrain::Matcher::Set next;
  for (int32_t step = 0; step < d0; ++step) {
    bool moved = false;
    for (int c = 0; c < 256 && !moved; ++c) {
      m.step(m.current(), static_cast<uint8_t>(c), &next);
      if (!next.empty() && m.distance(next) == m.distance() - 1) moved = m.feed(std::string(1, static_cast<char>(c)));
    }
    if (!moved) std::abort();
  }
  if (!m.accepting()) std::abort();
}
