// `parallm tokenize`: text -> token ids with any tokenizer parallm loads.
// Prints the ids separated by single spaces (BOS etc. unless --no-special),
// or with --json {"ids": [...], "pieces": [...]} (pieces as decoded text,
// partial UTF-8 replaced by U+FFFD so the JSON stays valid).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "tokenizer/tokenizer.h"

namespace parallm {
namespace {

struct TokenizeOptions {
  std::string tokenizer_path;
  std::string text;
  bool no_special = false;
  bool json = false;
};

int run_tokenize(const TokenizeOptions& opt) {
  const auto tokenizer = load_tokenizer(opt.tokenizer_path);
  const bool special = !opt.no_special;
  const auto ids = tokenizer->encode(opt.text, /*add_special=*/special, /*parse_special=*/special);
  if (opt.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tokenizer->token_to_piece(id));
    nlohmann::json out = {
        {"ids", ids}, {"pieces", pieces}, {"n_tokens", ids.size()}, {"tokenizer", tokenizer->kind_name()}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::string line;
  for (int32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  return 0;
}

const bool registered = register_command(
    {"tokenize", "Print the token ids of a text", [](CLI::App& sub) -> CommandAction {
       auto opt = std::make_shared<TokenizeOptions>();
       sub.add_option("--tokenizer", opt->tokenizer_path,
                      "GGUF model/vocab, tokenizer.json (or its folder), or llama2.c tokenizer file")
           ->required();
       sub.add_option("--text", opt->text, "Text to tokenize")->required();
       sub.add_flag("--no-special", opt->no_special, "No BOS/EOS; special tokens in the text stay text");
       sub.add_flag("--json", opt->json, "Print {\"ids\", \"pieces\"} as JSON");
       return [opt] { return run_tokenize(*opt); };
     }});

}  // namespace
}  // namespace parallm
