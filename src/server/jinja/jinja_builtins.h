// Value semantics (truthiness, str(), tojson) and the built-in filters, tests
// and methods of the Jinja subset, shared by the evaluator (jinja_eval.cpp).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "server/jinja/jinja_ast.h"

namespace parallm::jinja {

using Kwargs = std::vector<std::pair<std::string, Value>>;

bool truthy(const Value& v);
// Python's str(): strings as-is, None, True/False, 1.0, lists and dicts as repr.
std::string to_str(const Value& v);
// Python json.dumps with Hugging Face's tojson defaults (", " and ": "; indent).
std::string to_json(const Value& v, int indent);
// Python-style equality (1 == 1.0; undefined equals only undefined).
bool values_equal(const Value& a, const Value& b);
// `needle in haystack` for strings, lists and dicts.
bool contains(const Value& haystack, const Value& needle);
int64_t length_of(const Value& v);
// What a for loop walks: a list's items, an object's keys, a string's
// characters (code points, as Python iterates them).
Value as_list(const Value& v);

// Each throws InputError for an unknown name or bad arguments.
Value apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs);
bool apply_test(const std::string& name, const Value& v, const std::vector<Value>& args);
// obj.name(args): string, list and dict methods; *found = false if none applies.
Value call_method(const Value& obj, const std::string& name, const std::vector<Value>& args, bool* found);

}  // namespace parallm::jinja
