// End-to-end: `parallm tokenize` prints the ids (BOS first unless
// --no-special), --json gives ids and pieces, bad input exits 2 with one line.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace parallm::test {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;
};

RunResult run(const std::string& args) {
  RunResult r;
  const std::string cmd = std::string(PARALLM_BINARY) + " " + args + " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(PARALLM_BINARY)) GTEST_SKIP() << "parallm binary not built";
  }
};

TEST_F(TokenizeCli, PrintsReferenceIds) {
  const std::string tok = shared_path("models/stories260K/tok512.bin");
  auto r = run("tokenize --tokenizer " + tok + " --text 'Once upon a time'");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "1 403 407 261 378\n");
  r = run("tokenize --no-special --tokenizer " + tok + " --text 'Once upon a time'");
  EXPECT_EQ(r.out, "403 407 261 378\n");
}

TEST_F(TokenizeCli, JsonHasIdsAndPieces) {
  const std::string tok = shared_path("models/vocab/ggml-vocab-gpt-2.gguf");
  const auto r = run("tokenize --json --tokenizer " + tok + " --text 'Hello world'");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("ids"), nlohmann::json({15496, 995}));
  EXPECT_EQ(j.at("pieces"), nlohmann::json({"Hello", " world"}));
}

TEST_F(TokenizeCli, BadInputExitsTwo) {
  EXPECT_EQ(run("tokenize --tokenizer /nonexistent.gguf --text hi").exit_code, 2);
  const std::string model = shared_path("models/stories260K/stories260K.bin");
  EXPECT_EQ(run("tokenize --tokenizer " + model + " --text hi").exit_code, 2);
}

}  // namespace
}  // namespace parallm::test
