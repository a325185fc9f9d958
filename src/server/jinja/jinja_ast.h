// The syntax tree of the Jinja subset that chat templates use (see jinja.h).
// Values are nlohmann::ordered_json (objects keep insertion order, as Python
// dicts do, so `tojson` and `items()` follow the request); Jinja's `undefined` is a discarded json value
// (is_discarded()), `none` is null. The tree is produced by jinja_parser.cpp
// and walked by jinja_eval.cpp; it holds no state of a rendering.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace parallm::jinja {

using Value = nlohmann::ordered_json;
inline Value undefined_value() { return Value(Value::value_t::discarded); }

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,  // literal
  kName,     // name
  kGetAttr,  // args[0].name
  kGetItem,  // args[0][args[1]]
  kSlice,    // args[0][args[1]:args[2]:args[3]] (null children = omitted)
  kCall,     // args[0](args[1..], kwargs)
  kFilter,   // args[0] | name(args[1..], kwargs)
  kTest,     // args[0] is [not] name(args[1..])
  kUnary,    // op args[0]: "not", "-", "+"
  kBinary,   // args[0] op args[1]
  kCond,     // args[0] if args[1] else args[2] (args[2] may be null)
  kList,     // [args...]
  kDict,     // {args[0]: args[1], ...}
};

struct Expr {
  ExprKind kind;
  std::string name;      // name / attribute / filter / test / operator
  bool negated = false;  // kTest: `is not`
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  int height = 1;  // levels of this tree (a leaf: 1); the parser bounds it
  // No call in this tree: evaluating it runs no macro or method, so it cannot
  // change a variable (the evaluator may hold a reference across it).
  bool pure = true;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches (cond, body) ..., else_body
  kFor,          // for targets in expr [if cond] ... [else] ...
  kSet,          // set target[.attr] = expr
  kSetBlock,     // set target %} body {% endset
  kBreak,        // break (inside a for body)
  kContinue,     // continue (inside a for body)
  kMacro,        // macro text(targets..., kwargs defaults) body endmacro
  kFilterBlock,  // filter: body rendered, then expr (a kFilter over an empty name) applied
};

struct Stmt {
  StmtKind kind;
  std::string text;
  ExprPtr expr;                                    // output / set value / for iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // if
  Body body, else_body;
  std::vector<std::string> targets;  // for / set (set: target, optional attr in `attr`)
  std::string attr;
  ExprPtr filter;                                         // for ... if filter
  std::vector<std::pair<std::string, ExprPtr>> defaults;  // macro: parameters with a default
};

struct Template {
  Body body;
};

}  // namespace parallm::jinja
