// UTF-8 and GPT-2 byte-level tables (see unicode.h). The byte table follows
// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in byte order.
#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>

namespace parallm {

size_t utf8_seq_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int32_t utf8_next(std::string_view text, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  size_t len = 0;
  uint32_t cp = 0, min_cp = 0;
  if (lead < 0x80) {
    ++pos;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    len = 2, cp = lead & 0x1F, min_cp = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3, cp = lead & 0x0F, min_cp = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4, cp = lead & 0x07, min_cp = 0x10000;
  } else {
    ++pos;
    return -1;
  }
  if (pos + len > text.size()) {
    ++pos;
    return -1;
  }
  for (size_t i = 1; i < len; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) {
      ++pos;
      return -1;
    }
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++pos;
    return -1;
  }
  pos += len;
  return static_cast<int32_t>(cp);
}

size_t utf8_complete_prefix(std::string_view bytes) {
  // Only the last (up to) 3 bytes can be the start of an incomplete sequence.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = utf8_seq_len(b);
    if (need > back && b >= 0xC0) {
      // A lead byte whose sequence is not complete yet, provided the bytes
      // after it are all continuation bytes (they are, by the loop).
      return n - back;
    }
    break;
  }
  return n;
}

std::string utf8_sanitize(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t start = pos;
    if (utf8_next(bytes, pos) < 0) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(bytes.substr(start, pos - start));
    }
  }
  return out;
}

namespace {

// Appends `valid` (well-formed UTF-8) normalized to `out`.
void append_normalized(std::string_view valid, utf8proc_option_t options, std::string& out) {
  if (valid.empty()) return;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                                          static_cast<utf8proc_ssize_t>(valid.size()), &mapped, options);
  if (n < 0) {  // cannot happen for valid UTF-8 but for memory: keep the text
    out.append(valid);
  } else {
    out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
  }
  std::free(mapped);
}

}  // namespace

std::string unicode_normalize(std::string_view text, UnicodeForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::kNone:
      return std::string(text);
    case UnicodeForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case UnicodeForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case UnicodeForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case UnicodeForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  std::string out;
  out.reserve(text.size());
  size_t valid_start = 0, pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    if (utf8_next(text, pos) >= 0) continue;
    append_normalized(text.substr(valid_start, start - valid_start), static_cast<utf8proc_option_t>(options), out);
    out.append(text.substr(start, pos - start));  // the invalid byte, as it is
    valid_start = pos;
  }
  append_normalized(text.substr(valid_start), static_cast<utf8proc_option_t>(options), out);
  return out;
}

std::string change_case(std::string_view text, LetterCase how) {
  std::string out;
  out.reserve(text.size());
  bool first = true, word_start = true;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const int32_t cp = utf8_next(text, pos);
    if (cp < 0) {
      out.append(text.substr(start, pos - start));
      continue;
    }
    const auto category = utf8proc_category(cp);
    const bool letter = category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
    bool upper = false;
    switch (how) {
      case LetterCase::kUpper:
        upper = true;
        break;
      case LetterCase::kLower:
        upper = false;
        break;
      case LetterCase::kCapitalize:
        upper = first;
        break;
      case LetterCase::kTitle:
        upper = word_start;
        break;
    }
    utf8_append(out, static_cast<uint32_t>(upper ? utf8proc_toupper(cp) : utf8proc_tolower(cp)));
    first = false;
    word_start = !letter;
  }
  return out;
}

namespace {

struct ByteTables {
  std::array<uint32_t, 256> to_unicode{};
  std::array<int16_t, 512> to_byte{};
  ByteTables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      to_unicode[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_unicode[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

uint32_t byte_to_unicode(uint8_t byte) { return byte_tables().to_unicode[byte]; }

int32_t unicode_to_byte(uint32_t codepoint) {
  if (codepoint >= 512) return -1;
  return byte_tables().to_byte[codepoint];
}

}  // namespace parallm
