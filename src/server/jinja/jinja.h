// A small Jinja2 interpreter, enough for the chat templates that models carry
// in their metadata (`tokenizer.chat_template`): text with {{ }}, {% %} and
// {# #} tags, whitespace control (`-`), and Hugging Face's environment options
// trim_blocks and lstrip_blocks; statements if/elif/else, for (with tuple
// targets, an `if` filter, `else`, the `loop` object, break and continue),
// set (names, namespace attributes, blocks), macro, filter blocks;
// expressions with literals, lists, dicts, attribute/item access, slices with
// steps, calls, filters, tests, arithmetic (** included), `~`, comparisons,
// `in`, and/or/not and inline if. Strings are indexed, sliced, iterated and
// measured by character, as in Python. Globals: raise_exception, namespace,
// range, dict. Templates come from model files and requests come from
// clients, so every failure is an InputError (the server answers 400), never a
// crash: recursion depth and output size are bounded.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace parallm::jinja {

struct Template;

class CompiledTemplate {
 public:
  // Throws InputError on a syntax error (with the line).
  explicit CompiledTemplate(std::string_view source);
  ~CompiledTemplate();
  CompiledTemplate(CompiledTemplate&&) noexcept;
  CompiledTemplate& operator=(CompiledTemplate&&) noexcept;

  // context: a JSON object of variables. Throws InputError (raise_exception,
  // type errors, limits).
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::unique_ptr<Template> tpl_;
};

// Parses (jinja_parser.cpp). Throws InputError.
std::unique_ptr<Template> parse_template(std::string_view source);

}  // namespace parallm::jinja
