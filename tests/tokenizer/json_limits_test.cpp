// tokenizer.json and its neighbours are parsed with the file depth limit (64):
// a Sequence normalizer / pre-tokenizer nested 50,000 deep is an InputError
// naming the limit (it crashed the loader), while Sequences nested as deep as
// the limit allows still load and recurse correctly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace parallm {
namespace {

namespace fs = std::filesystem;

const char* const kModel =
    R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0120": 2, "ab": 3},
    "merges": ["a b"]})";

// {"type": "Sequence", "<list>": [ ... inner ... ]} nested `depth` times.
std::string sequence(int depth, const std::string& list, const std::string& inner) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += R"({"type": "Sequence", ")" + list + R"(": [)";
  s += inner;
  for (int i = 0; i < depth; ++i) s += "]}";
  return s;
}

std::string tokenizer_json(int pre_depth, int norm_depth) {
  return std::string("{") + kModel + R"(, "pre_tokenizer": )" +
         sequence(pre_depth, "pretokenizers", R"({"type": "ByteLevel", "add_prefix_space": false})") +
         R"(, "normalizer": )" + sequence(norm_depth, "normalizers", R"({"type": "NFC"})") + "}";
}

fs::path write_dir(const std::string& name, const std::string& tokenizer, const std::string& config = "") {
  const fs::path dir = fs::path(testing::TempDir()) / name;
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tokenizer;
  if (!config.empty()) std::ofstream(dir / "tokenizer_config.json") << config;
  return dir;
}

std::string load_error(const std::string& path) {
  try {
    load_tokenizer(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerJsonLimits, DeepSequencesAreRefusedAtParse) {
  const std::string limit = "JSON nested deeper than the limit of 64 levels";
  for (const auto& [pre, norm] : {std::pair{50'000, 1}, std::pair{1, 50'000}, std::pair{33, 1}}) {
    const fs::path dir = write_dir("deep_sequence", tokenizer_json(pre, norm));
    for (const fs::path& p : {dir, dir / "tokenizer.json"}) {
      const std::string err = load_error(p.string());
      EXPECT_NE(err.find("tokenizer.json: " + limit), std::string::npos) << pre << "/" << norm << ": " << err;
    }
  }
  const std::string deep_config = "{\"x\": " + std::string(50'000, '[') + std::string(50'000, ']') + "}";
  EXPECT_NE(load_error(write_dir("deep_config", tokenizer_json(1, 1), deep_config).string())
                .find("tokenizer_config.json: " + limit),
            std::string::npos);
  const fs::path dir = write_dir("deep_chat_template", tokenizer_json(1, 1));
  std::ofstream(dir / "chat_template.json")
      << "{\"chat_template\": " << std::string(100, '[') << std::string(100, ']') << "}";
  EXPECT_NE(load_error(dir.string()).find("chat_template.json is malformed: " + limit), std::string::npos)
      << load_error(dir.string());
}

TEST(TokenizerJsonLimits, SequencesWithinTheLimitLoad) {
  // 31 Sequences (62 levels) between the root object and the innermost one: 64, the limit.
  const auto flat = parse_tokenizer_json(tokenizer_json(0, 0), "");
  const auto nested = load_tokenizer(write_dir("nested_sequence", tokenizer_json(31, 31)).string());
  for (const std::string text : {"ab", "ab ab", "ba a"}) {
    EXPECT_EQ(nested->encode(text, false), flat->encode(text, false)) << text;
  }
  EXPECT_EQ(nested->encode("ab", false), std::vector<int32_t>{3});
}

}  // namespace
}  // namespace parallm
