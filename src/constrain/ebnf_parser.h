// Grammars as vLLM takes them in guided_grammar / structured_outputs.grammar:
// GBNF / xgrammar EBNF (`root ::= "a" b*`) and the common subset of Lark
// (`start: "a" b*`, `NAME: /regex/`). The root is `root`, else `start`, else
// the first rule.
//
// Elements: "strings" and 'strings' (with \n \t \\ \" \xHH \uHHHH escapes),
// character classes [a-z] / [^...], /regex/ (regex_parser.h), rule names,
// ( ... ) groups, | alternatives, the quantifiers * + ? {m} {m,} {m,n};
// comments start at # (GBNF) or // (Lark). Lark directives (%import,
// %ignore, ...), templates and priorities are InputErrors naming them.
#pragma once
#include <string>

#include "constrain/grammar.h"

namespace parallm::constrain {

Grammar parse_ebnf(const std::string& text);

}  // namespace parallm::constrain
