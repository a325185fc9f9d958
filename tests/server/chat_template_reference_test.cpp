// Chat templates against Python's jinja2, run at test time the way Hugging
// Face transformers runs them (jinja_reference.py): every template in
// shared/models/vocab/templates and the chat templates that ship in the npm
// tokenizer packages' tokenizer_config.json (Llama 3, 3.1, Qwen3, DeepSeek
// V3, Gemma), over several conversations, with and without the generation
// prompt. Output text, or the raised error's message, must be identical.
// Skips when python3's jinja2 is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/command_output.h"
#include "server/jinja/jinja.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

using nlohmann::json;
using test::command_output;

// "<s>", {"content": "<s>"} or absent.
std::string token_text(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) return v.value("content", "");
  return "";
}

struct Source {
  std::string name, text, bos, eos;
};

std::vector<Source> template_sources() {
  std::vector<Source> out;
  const std::string dir = std::string(PARALLM_SHARED_DIR) + "/models/vocab/templates";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".jinja") {
      out.push_back({entry.path().filename().string(), read_text_file(entry.path().string()), "<s>", "</s>"});
    }
  }
  // Families not installed (gemma3, gptoss: large packages) are left out.
  for (const char* family : {"llama3", "llama3_1", "qwen3", "deepseek_v3", "gemini", "gemma3", "gptoss"}) {
    const std::string path = std::string(PARALLM_TOKENIZER_NPM_DIR) + "/node_modules/@lenml/tokenizer-" +
                             family + "/models/tokenizer_config.json";
    if (!std::filesystem::exists(path)) continue;
    const json config = json::parse(read_text_file(path));
    if (!config.contains("chat_template") || !config.at("chat_template").is_string()) continue;
    out.push_back({family, config.at("chat_template").get<std::string>(), token_text(config, "bos_token"),
                   token_text(config, "eos_token")});
  }
  return out;
}

const char* const kConversations = R"([
  [{"role": "user", "content": "Hi there!"}],
  [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there!"},
   {"role": "assistant", "content": " Hello. "}, {"role": "user", "content": "Name a color."}],
  [{"role": "user", "content": "Hi there!"}, {"role": "assistant", "content": "Hello."},
   {"role": "user", "content": "2+2?"}],
  [{"role": "user", "content": "Line one\nline two\n\n  indented"},
   {"role": "assistant", "content": "Sure: \"quoted\" & <tag> {braces} 'single'"},
   {"role": "user", "content": "\u00fcn\u00efc\u00f6d\u00e9 \u4f60\u597d \ud83d\ude00"}],
  [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
  [{"role": "system", "content": "Only a system message."}]
])";

TEST(ChatTemplateReference, EqualsPythonJinja2) {
  const std::string python = PARALLM_PYTHON;
  if (command_output(python + " -c 'import jinja2' 2>/dev/null && echo yes").empty()) {
    GTEST_SKIP() << "python3 jinja2 not installed (Debian: python3-jinja2)";
  }
  const auto sources = template_sources();
  ASSERT_GE(sources.size(), 5u);
  const json conversations = json::parse(kConversations);
  json cases = json::array();
  std::vector<std::string> labels;
  for (const auto& src : sources) {
    for (size_t c = 0; c < conversations.size(); ++c) {
      for (bool gen : {true, false}) {
        cases.push_back({{"template", src.text},
                         {"context", {{"messages", conversations[c]},
                                      {"add_generation_prompt", gen},
                                      {"bos_token", src.bos},
                                      {"eos_token", src.eos}}}});
        labels.push_back(src.name + " conversation " + std::to_string(c) + (gen ? " +gen" : ""));
      }
    }
  }
  const std::string cases_path = testing::TempDir() + "chat_template_cases.json";
  std::ofstream(cases_path) << cases.dump();
  const std::string out =
      command_output(python + " " + PARALLM_SERVER_TEST_DIR + "/jinja_reference.py " + cases_path);
  std::filesystem::remove(cases_path);
  ASSERT_FALSE(out.empty()) << "jinja_reference.py gave no output";
  const json reference = json::parse(out);
  ASSERT_EQ(reference.size(), cases.size());

  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string got, error;
    try {
      jinja::CompiledTemplate t(cases[i]["template"].get<std::string>());
      got = t.render(cases[i]["context"]);
    } catch (const InputError& e) {
      error = e.what();
    }
    if (reference[i].contains("ok")) {
      const std::string want = reference[i]["ok"].get<std::string>();
      mismatches += !error.empty() || got != want;
      EXPECT_EQ(error, "") << labels[i];
      EXPECT_EQ(got, want) << labels[i];
    } else {
      // The template raised (or failed): so must we, with its message when it
      // raised one itself.
      mismatches += error.empty();
      EXPECT_FALSE(error.empty()) << labels[i] << ": jinja2 said " << reference[i]["error"];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace parallm
