// Expression builders (see expr.h). utf8_range splits a code point range at
// the boundaries where the UTF-8 length or a leading byte changes, so each
// piece is a sequence of byte ranges (the classic construction used by
// regex engines that match bytes).
#include "constrain/expr.h"

#include <algorithm>

namespace parallm::constrain {

ExprPtr byte_set(const ByteSet& bytes) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kBytes;
  e->bytes = bytes;
  return e;
}

ExprPtr literal(const std::string& bytes) {
  std::vector<ExprPtr> items;
  for (unsigned char c : bytes) {
    ByteSet b;
    b.set(c);
    items.push_back(byte_set(b));
  }
  return items.size() == 1 ? items[0] : seq(std::move(items));
}

ExprPtr seq(std::vector<ExprPtr> items) {
  if (items.size() == 1) return items[0];
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kSeq;
  e->items = std::move(items);
  return e;
}

ExprPtr alt(std::vector<ExprPtr> items) {
  if (items.size() == 1) return items[0];
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kAlt;
  e->items = std::move(items);
  return e;
}

ExprPtr repeat(ExprPtr item, int32_t min, int32_t max) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kRepeat;
  e->items = {std::move(item)};
  e->min = min;
  e->max = max;
  return e;
}

ExprPtr optional(ExprPtr item) { return repeat(std::move(item), 0, 1); }

ExprPtr rule_ref(int32_t rule) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::kRule;
  e->rule = rule;
  return e;
}

ExprPtr nothing() { return alt({}); }
ExprPtr empty() { return seq({}); }

namespace {

ExprPtr byte_range(uint32_t lo, uint32_t hi) {
  ByteSet b;
  for (uint32_t c = lo; c <= hi; ++c) b.set(c);
  return byte_set(b);
}

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, unsigned char* out) {
  switch (utf8_len(cp)) {
    case 1:
      out[0] = static_cast<unsigned char>(cp);
      break;
    case 2:
      out[0] = static_cast<unsigned char>(0xC0 | (cp >> 6));
      out[1] = static_cast<unsigned char>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<unsigned char>(0xE0 | (cp >> 12));
      out[1] = static_cast<unsigned char>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<unsigned char>(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = static_cast<unsigned char>(0xF0 | (cp >> 18));
      out[1] = static_cast<unsigned char>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<unsigned char>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<unsigned char>(0x80 | (cp & 0x3F));
  }
}

// [lo, hi] of one UTF-8 length: split until every continuation byte spans
// its full range below the first differing byte.
void same_length(uint32_t lo, uint32_t hi, std::vector<ExprPtr>* out) {
  const int n = utf8_len(lo);
  if (n == 1) {
    out->push_back(byte_range(lo, hi));
    return;
  }
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low 6*i bits
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        same_length(lo, lo | m, out);
        same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        same_length(lo, (hi & ~m) - 1, out);
        same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  unsigned char a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  std::vector<ExprPtr> s;
  for (int i = 0; i < n; ++i) s.push_back(byte_range(a[i], b[i]));
  out->push_back(seq(std::move(s)));
}

}  // namespace

ExprPtr utf8_range(uint32_t lo, uint32_t hi) { return utf8_ranges({{lo, hi}}); }

ExprPtr utf8_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::vector<ExprPtr> out;
  ByteSet ascii;
  for (auto [lo, hi] : ranges) {
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    // Surrogates are not code points UTF-8 may encode.
    std::vector<std::pair<uint32_t, uint32_t>> parts;
    if (lo < 0xD800 && hi >= 0xD800) {
      parts.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) parts.push_back({0xE000, hi});
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi > 0xDFFF) parts.push_back({0xE000, hi});
    } else if (lo <= hi) {
      parts.push_back({lo, hi});
    }
    for (auto [a, b] : parts) {
      for (const uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
        if (a <= edge && b > edge) {
          if (a < 0x80) {
            for (uint32_t c = a; c <= edge; ++c) ascii.set(c);
          } else {
            same_length(a, edge, &out);
          }
          a = edge + 1;
        }
      }
      if (a > b) continue;
      if (b < 0x80) {
        for (uint32_t c = a; c <= b; ++c) ascii.set(c);
      } else {
        same_length(a, b, &out);
      }
    }
  }
  if (ascii.any()) out.insert(out.begin(), byte_set(ascii));
  return alt(std::move(out));
}

std::vector<std::pair<uint32_t, uint32_t>> normalize(std::vector<std::pair<uint32_t, uint32_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<std::pair<uint32_t, uint32_t>> complement(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalize(ranges)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

}  // namespace parallm::constrain
