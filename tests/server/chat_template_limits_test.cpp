// Chat-template limits: a hostile template (model file or --chat-template)
// or request gives an InputError / ApiError naming the limit, never a stack
// overflow. Parser nesting and expression height (256), evaluation depth
// (1024), macro recursion (64) and the depth of stored values (512); and
// templates within the limits still render.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/jinja/jinja.h"
#include "util/check.h"

namespace parallm {
namespace {

using nlohmann::ordered_json;

std::string render(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  return jinja::CompiledTemplate(src).render(ctx);
}

// The InputError's message, or "" when `src` renders.
std::string error_of(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  try {
    render(src, ctx);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

constexpr const char* kParseLimit = "nested deeper than the limit of 256 levels";

TEST(ChatTemplateLimits, DeepNestingIsASyntaxErrorNamingTheLimit) {
  const int n = 50'000;
  const std::vector<std::string> deep = {
      "{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}",
      "{{ " + repeat("[", n) + "1" + repeat("]", n) + " }}",
      "{{ " + repeat("{'a': ", n) + "1" + repeat("}", n) + " }}",
      "{{ " + repeat("not ", n) + "1 }}",
      "{{ " + repeat("-", n) + "1 }}",
      repeat("{% if true %}", n) + "x" + repeat("{% endif %}", n),
      repeat("{% for i in [1] %}", n) + repeat("{% endfor %}", n),
      repeat("{% macro m() %}", n) + repeat("{% endmacro %}", n),
      // Chains that the parser builds in a loop, without recursing.
      "{{ x" + repeat(".a", n) + " }}",
      "{{ x" + repeat("[0]", n) + " }}",
      "{{ f" + repeat("()", n) + " }}",
      "{{ 1" + repeat(" + 1", n) + " }}",
      "{{ 'a'" + repeat(" ~ 'a'", n) + " }}",
      "{{ 1" + repeat(" and 1", n) + " }}",
      "{{ 1" + repeat(" == 1", n) + " }}",
      "{{ x" + repeat(" | string", n) + " }}",
      "{{ x" + repeat(" is defined", n) + " }}",
      "{% filter upper" + repeat(" | lower", n) + " %}x{% endfilter %}",
  };
  for (const auto& src : deep) {
    const std::string err = error_of(src);
    EXPECT_NE(err.find("chat template syntax error"), std::string::npos) << src.substr(0, 40) << ": " << err;
    EXPECT_NE(err.find(kParseLimit), std::string::npos) << src.substr(0, 40) << ": " << err;
  }
  // --chat-template: the same message, from the server's constructor.
  EXPECT_THROW(ChatFormatter(deep[0], "<s>", "</s>"), InputError);
}

TEST(ChatTemplateLimits, NestingWithinTheLimitRenders) {
  EXPECT_EQ(render("{{ " + repeat("(", 100) + "7" + repeat(")", 100) + " }}"), "7");
  EXPECT_EQ(render("{{ 0" + repeat(" + 1", 200) + " }}"), "200");
  EXPECT_EQ(render("{{ x" + repeat(".a", 200) + " is defined }}"), "False");
  EXPECT_EQ(render(repeat("{% if true %}", 100) + "x" + repeat("{% endif %}", 100)), "x");
  EXPECT_EQ(render("{{ " + repeat("[", 100) + "1" + repeat("]", 100) + " | length }}"), "1");
}

TEST(ChatTemplateLimits, SelfRecursiveMacrosEndInAnError) {
  // Unbounded recursion: the macro limit.
  std::string err = error_of("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}");
  EXPECT_NE(err.find("macros nested too deep"), std::string::npos) << err;
  // Few calls, each deep: the evaluation limit.
  const std::string deep_body = "{% macro m(n) %}{% if n > 0 %}" + repeat("{% if true %}", 120) + "{{ m(n - 1)" +
                                repeat(" ~ ''", 120) + " }}" + repeat("{% endif %}", 120) +
                                "{% endif %}{% endmacro %}{{ m(60) }}";
  err = error_of(deep_body);
  EXPECT_NE(err.find("evaluation nested deeper than the limit of 1024 levels"), std::string::npos) << err;
  // Through the server's formatter: a 400.
  const ChatFormatter f("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", "<s>", "</s>");
  try {
    f.render(ordered_json::parse(R"([{"role":"user","content":"hi"}])"), true);
    ADD_FAILURE() << "rendered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
  }
}

// A schema-printing macro as tool-calling templates carry it (Hermes' json_to_python_type),
// over a schema nested as deep as the macro limit allows.
TEST(ChatTemplateLimits, RecursiveSchemaMacroWithinTheLimitsRenders) {
  const std::string tpl =
      "{%- macro py_type(spec) %}"
      "{%- set basic = {'string': 'str', 'integer': 'int'} %}"
      "{%- if basic[spec.type] is defined %}{{- basic[spec.type] }}"
      "{%- elif spec.type == 'array' %}{{- 'list[' + py_type(spec['items']) + ']' }}"
      "{%- elif spec.type == 'object' and spec.additionalProperties is defined %}"
      "{{- 'dict[str, ' + py_type(spec.additionalProperties) + ']' }}"
      "{%- else %}{{- 'Any' }}{%- endif %}"
      "{%- endmacro %}"
      "{{- py_type(tools[0].function.parameters) }}";
  ordered_json schema = {{"type", "string"}};
  std::string want = "str";
  for (int i = 0; i < 60; ++i) {
    schema = i % 2 ? ordered_json{{"type", "array"}, {"items", schema}}
                   : ordered_json{{"type", "object"}, {"additionalProperties", schema}};
    want = (i % 2 ? "list[" : "dict[str, ") + want + "]";
  }
  const ordered_json ctx = {{"tools", {{{"type", "function"}, {"function", {{"parameters", schema}}}}}}};
  EXPECT_EQ(render(tpl, ctx), want);
}

TEST(ChatTemplateLimits, StoredValuesAreBounded) {
  const std::string grow =
      "{% set ns = namespace(x=0) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor "
      "%}{{ ns.x }}";
  std::string err = error_of(grow);
  EXPECT_NE(err.find("a value nested deeper than the limit of 512 levels"), std::string::npos) << err;
  err = error_of(
      "{% macro m(v, n) %}{% if n > 0 %}{{ m([[[[[[[[[[v]]]]]]]]]], n - 1) }}{% endif %}{% "
      "endmacro %}"
      "{{ m(0, 60) }}");
  EXPECT_NE(err.find("a value nested deeper than the limit of 512 levels"), std::string::npos) << err;
  // Request values (at most 128 deep) pass through set.
  ordered_json deep = 1;
  for (int i = 0; i < 127; ++i) deep = ordered_json::array({deep});
  EXPECT_EQ(render("{% set y = v %}{{ y | length }}", {{"v", deep}}), "1");
}

}  // namespace
}  // namespace parallm
