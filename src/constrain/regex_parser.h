// Regular expressions (vLLM's guided_regex, structured_outputs.regex, a
// JSON schema's "pattern") to expressions over UTF-8 bytes. The whole
// output must match (as vLLM's backends do): a leading ^ and trailing $ are
// accepted and change nothing.
//
// Supported: literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \u{H...},
// escaped punctuation), . (any code point but \n), classes [a-z], [^...]
// with \d \w \s inside, \d \D \w \W \s \S, groups (...), (?:...),
// (?P<name>...), (?<name>...), alternation |, and the quantifiers * + ? {n}
// {n,} {n,m} with their lazy (?) or possessive (+) forms (the language is
// the same). Anything else (backreferences, lookaround, \b, inline flags,
// anchors in the middle) is an InputError naming it, never ignored.
#pragma once
#include <string>

#include "constrain/expr.h"

namespace parallm::constrain {

// Largest {n,m} bound: each repetition costs automaton states.
constexpr int32_t kMaxRegexRepeat = 1000;

ExprPtr parse_regex(const std::string& pattern);

}  // namespace parallm::constrain
