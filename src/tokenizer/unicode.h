// UTF-8 helpers, Unicode normalization (utf8proc) and GPT-2's byte <->
// unicode table: the Unicode handling the tokenizers need beyond PCRE2.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace parallm {

// Length of a UTF-8 sequence from its lead byte (1 for continuation or
// invalid lead bytes), as llama.cpp's SentencePiece tokenizer counts chars.
size_t utf8_seq_len(uint8_t lead);

void utf8_append(std::string& out, uint32_t codepoint);

// Decodes the code point at `pos` and advances `pos`; on an invalid or
// truncated sequence returns -1 and advances by one byte.
int32_t utf8_next(std::string_view text, size_t& pos);

// Length of the longest prefix of `bytes` made of complete UTF-8 sequences
// or bytes that can never start/continue one (those are emitted as U+FFFD by
// utf8_sanitize). The rest is an incomplete sequence that may still complete.
size_t utf8_complete_prefix(std::string_view bytes);

// Copies `bytes`, replacing each invalid byte by U+FFFD.
std::string utf8_sanitize(std::string_view bytes);

enum class UnicodeForm { kNone, kNfc, kNfkc, kNfd, kNfkd };

// `text` in the given normalization form. Invalid UTF-8 bytes are kept as
// they are and the valid stretches between them normalized one by one.
std::string unicode_normalize(std::string_view text, UnicodeForm form);

// Letter case as Python's str methods change it, by code point (utf8proc's
// simple case mappings): upper(), lower(), capitalize() (first character
// upper, the rest lower), title() (each run of letters starts upper). Invalid
// bytes are kept.
enum class LetterCase { kUpper, kLower, kCapitalize, kTitle };
std::string change_case(std::string_view text, LetterCase how);

// GPT-2 byte-level mapping: every byte to a printable code point and back
// (-1 when the code point is not in the table).
uint32_t byte_to_unicode(uint8_t byte);
int32_t unicode_to_byte(uint32_t codepoint);

}  // namespace parallm
