// The multi-letter single-dash flags of vLLM and llama-server (-tp, -pp, -dp,
// -np, -ngl), rewritten to their long names before CLI11 parses: CLI11's
// short options are one character, so `-tp 2` would otherwise read as `-t p`
// followed by a stray `2`. Only an argument equal to one of these flags, or
// such a flag followed by `=VALUE`, is rewritten (`-tp=2` becomes
// `--tensor-parallel-size=2`); anything after a bare `--` is left alone.
// The table is docs/server.md's "vLLM and llama-server flags".
#pragma once
#include <string>
#include <vector>

namespace parallm {

// args: the whole command line, argv[0] first.
std::vector<std::string> rewrite_dash_aliases(const std::vector<std::string>& args);

}  // namespace parallm
