// Renders a parsed template (jinja_ast.h) against a JSON context. Scopes follow
// Jinja: a for loop opens a scope (so a `set` inside it does not leak out,
// which is why templates use namespace()), if does not. Limits keep a hostile
// template or request from exhausting the server: output size, loop iterations,
// and the stack: the evaluator recurses over the tree (whose height the parser
// bounds) and into macros, and values recurse when copied, compared or
// printed, so evaluation depth and the depth of stored values are bounded.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <utility>
#include <vector>

#include "server/jinja/jinja.h"
#include "server/jinja/jinja_ast.h"
#include "server/jinja/jinja_builtins.h"
#include "util/check.h"

namespace parallm::jinja {
namespace {

constexpr size_t kMaxOutputBytes = 64u << 20;
constexpr int64_t kMaxIterations = 10'000'000;
constexpr int kMaxMacroDepth = 64;  // a macro calling itself must end, not overflow the stack
// Nested eval / exec calls, macros included. Each level takes up to ~1 KB of
// stack (~2 KB under AddressSanitizer): 1024 levels stay well inside a
// thread's 8 MiB. A schema-printing macro recursing kMaxMacroDepth times
// takes ~8 levels per call, ~500 in all.
constexpr int kMaxEvalDepth = 1024;
// Nesting of a value a template stores (set, macro arguments): requests bring
// at most kRequestJsonDepth (128), but `{% set ns.x = [ns.x] %}` in a loop
// would grow without end.
constexpr int kMaxValueDepth = 512;

[[noreturn]] void fail(const std::string& m) { throw InputError("chat template: " + m); }

// Levels of arrays / objects in v (a scalar: 0), counted without recursion
// and only as far as limit + 1.
int value_depth(const Value& v, int limit) {
  std::vector<std::pair<const Value*, int>> stack{{&v, 0}};
  int deepest = 0;
  while (!stack.empty()) {
    const auto [x, d] = stack.back();
    stack.pop_back();
    if (!x->is_array() && !x->is_object()) continue;
    deepest = std::max(deepest, d + 1);
    if (deepest > limit) break;
    for (const Value& child : *x) stack.emplace_back(&child, d + 1);
  }
  return deepest;
}

void check_stored(const Value& v) {
  if (value_depth(v, kMaxValueDepth) > kMaxValueDepth) {
    fail("a value nested deeper than the limit of " + std::to_string(kMaxValueDepth) + " levels");
  }
}

class Renderer {
 public:
  explicit Renderer(const Value& context) {
    scopes_.emplace_back();
    if (context.is_object()) {
      for (auto it = context.begin(); it != context.end(); ++it) scopes_.back()[it.key()] = it.value();
    }
  }

  void exec(const Body& body, std::string* out) {
    for (const auto& s : body) {
      exec(*s, out);
      if (flow_ != Flow::kNormal) return;  // a break / continue leaves the enclosing bodies
    }
  }

 private:
  using Scope = std::map<std::string, Value>;

  struct DepthGuard {
    Renderer* r;
    explicit DepthGuard(Renderer* renderer) : r(renderer) {
      if (++r->depth_ > kMaxEvalDepth) {
        fail("evaluation nested deeper than the limit of " + std::to_string(kMaxEvalDepth) + " levels");
      }
    }
    ~DepthGuard() { --r->depth_; }
  };

  Value* find_var(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  void append(std::string* out, const std::string& s) {
    if (out->size() + s.size() > kMaxOutputBytes) fail("output exceeds 64 MiB");
    *out += s;
  }

  void exec(const Stmt& s, std::string* out) {
    DepthGuard g(this);
    switch (s.kind) {
      case StmtKind::kText:
        append(out, s.text);
        break;
      case StmtKind::kOutput:
        append(out, to_str(eval(*s.expr)));
        break;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (truthy(eval(*cond))) return exec(body, out);
        }
        exec(s.else_body, out);
        break;
      case StmtKind::kFor:
        exec_for(s, out);
        break;
      case StmtKind::kSet:
        assign(s, eval(*s.expr));
        break;
      case StmtKind::kSetBlock: {
        std::string text;
        exec(s.body, &text);
        assign(s, text);
        break;
      }
      case StmtKind::kBreak:
        flow_ = Flow::kBreak;
        break;
      case StmtKind::kContinue:
        flow_ = Flow::kContinue;
        break;
      case StmtKind::kMacro:
        macros_[s.text] = &s;
        break;
      case StmtKind::kFilterBlock: {
        std::string text;
        exec(s.body, &text);
        append(out, to_str(filter_chain(*s.expr, text)));
        break;
      }
    }
  }

  // A `{% filter %}` chain: the innermost filter (no subject) takes `input`.
  Value filter_chain(const Expr& e, const Value& input) {
    const Value v = e.args[0] ? filter_chain(*e.args[0], input) : input;
    return apply_filter_call(e, v);
  }

  Value apply_filter_call(const Expr& e, const Value& v) {
    std::vector<Value> args;
    for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
    Kwargs kwargs;
    for (const auto& [k, x] : e.kwargs) kwargs.emplace_back(k, eval(*x));
    return apply_filter(e.name, v, args, kwargs);
  }

  // Renders macro `m` with its parameters bound: positional arguments first,
  // then keywords, then defaults; the rest are undefined.
  Value call_macro(const Stmt& m, const std::vector<Value>& args, const Kwargs& kwargs) {
    if (args.size() > m.targets.size())
      fail("macro '" + m.text + "' takes " + std::to_string(m.targets.size()) + " arguments");
    if (macro_depth_ >= kMaxMacroDepth) fail("macros nested too deep");
    Scope scope;
    for (size_t i = 0; i < m.targets.size(); ++i) {
      if (i < args.size()) check_stored(args[i]);
      scope[m.targets[i]] = i < args.size() ? args[i] : undefined_value();
    }
    for (const auto& [k, v] : kwargs) {
      if (std::find(m.targets.begin(), m.targets.end(), k) == m.targets.end()) {
        fail("macro '" + m.text + "' has no parameter '" + k + "'");
      }
      check_stored(v);
      scope[k] = v;
    }
    for (const auto& [k, def] : m.defaults) {
      if (scope[k].is_discarded()) scope[k] = eval(*def);
    }
    scopes_.push_back(std::move(scope));
    ++macro_depth_;
    std::string text;
    exec(m.body, &text);
    --macro_depth_;
    scopes_.pop_back();
    return text;
  }

  void assign(const Stmt& s, Value v) {
    check_stored(v);
    if (s.attr.empty()) {
      scopes_.back()[s.targets[0]] = std::move(v);
      return;
    }
    Value* ns = find_var(s.targets[0]);
    if (!ns || !ns->is_object()) fail("cannot set attribute of '" + s.targets[0] + "' (not a namespace)");
    (*ns)[s.attr] = std::move(v);
  }

  void exec_for(const Stmt& s, std::string* out) {
    Value items = as_list(eval(*s.expr));

    scopes_.emplace_back();
    auto bind = [&](const Value& item) {
      if (s.targets.size() == 1) {
        scopes_.back()[s.targets[0]] = item;
        return;
      }
      if (!item.is_array() || item.size() != s.targets.size()) fail("for: cannot unpack item");
      for (size_t k = 0; k < s.targets.size(); ++k) scopes_.back()[s.targets[k]] = item[k];
    };
    if (s.filter) {  // `for x in xs if cond`: loop.* counts only the kept items
      Value kept = Value::array();
      for (const Value& item : items) {
        bind(item);
        if (truthy(eval(*s.filter))) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      if (++iterations_ > kMaxIterations) fail("too many loop iterations");
      bind(items[static_cast<size_t>(i)]);
      Value loop = {{"index", i + 1}, {"index0", i},       {"first", i == 0},       {"last", i == n - 1},
                    {"length", n},    {"revindex", n - i}, {"revindex0", n - i - 1}};
      loop["previtem"] = i > 0 ? items[static_cast<size_t>(i - 1)] : undefined_value();
      loop["nextitem"] = i + 1 < n ? items[static_cast<size_t>(i + 1)] : undefined_value();
      scopes_.back()["loop"] = std::move(loop);
      exec(s.body, out);
      const Flow flow = flow_;
      flow_ = Flow::kNormal;
      if (flow == Flow::kBreak) break;
    }
    scopes_.pop_back();
    if (n == 0) exec(s.else_body, out);
  }

  // The stored value `e` names (a variable, or an attribute or item of one)
  // without copying it; nullptr when `e` names no stored value, and the
  // caller evaluates it into a temporary instead. NOTE: eval() returns by
  // value, so without this `messages[-1]` or `messages|length` inside a loop
  // over the messages copied the whole list at each use: rendering was
  // quadratic in the number of messages.
  const Value* lookup(const Expr& e) {
    DepthGuard g(this);
    switch (e.kind) {
      case ExprKind::kName:
        return find_var(e.name);
      case ExprKind::kGetAttr: {
        const Value* obj = lookup(*e.args[0]);
        return obj ? item_ref(*obj, Value(e.name)) : nullptr;
      }
      case ExprKind::kGetItem: {
        const Value* obj = lookup(*e.args[0]);
        if (!obj || !(obj->is_object() || obj->is_array()) || !e.args[1]->pure) return nullptr;
        return item_ref(*obj, eval(*e.args[1]));
      }
      default:
        return nullptr;
    }
  }

  // Calls f with the value of `e`: the stored one when lookup() finds it and
  // what f evaluates (`then`, each pure or null) cannot change a variable,
  // else a temporary.
  template <class F>
  decltype(auto) with_value(const Expr& e, std::initializer_list<const Expr*> then, F&& f) {
    bool pure = true;
    for (const Expr* x : then) pure = pure && (x == nullptr || x->pure);
    if (const Value* v = pure ? lookup(e) : nullptr) return f(*v);
    const Value tmp = eval(e);
    return f(tmp);
  }

  // obj[key] when it is an element stored in obj (an object's member or an
  // array's item); nullptr otherwise (missing, or a string's character).
  static const Value* item_ref(const Value& obj, const Value& key) {
    if (obj.is_object() && key.is_string()) {
      auto f = obj.find(key.get_ref<const std::string&>());
      return f == obj.end() ? nullptr : &*f;
    }
    if (obj.is_array() && key.is_number_integer()) {
      int64_t i = key.get<int64_t>();
      const int64_t n = static_cast<int64_t>(obj.size());
      if (i < 0) i += n;
      return i < 0 || i >= n ? nullptr : &obj[static_cast<size_t>(i)];
    }
    return nullptr;
  }

  static Value get_item(const Value& obj, const Value& key) {
    if (obj.is_object() && key.is_string()) {
      auto f = obj.find(key.get<std::string>());
      return f == obj.end() ? undefined_value() : *f;
    }
    if ((obj.is_array() || obj.is_string()) && key.is_number_integer()) {
      const Value list = obj.is_array() ? Value() : as_list(obj);  // a string's characters
      const Value& items = obj.is_array() ? obj : list;
      int64_t i = key.get<int64_t>();
      const int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return undefined_value();
      return items[static_cast<size_t>(i)];
    }
    return undefined_value();
  }

  // Python's obj[lo:hi:step]: lists by element, strings by code point.
  Value slice(const Value& obj, const Expr* lo_e, const Expr* hi_e, const Expr* step_e) {
    if (!obj.is_array() && !obj.is_string()) fail("slice of a value that is not a list or string");
    std::vector<size_t> starts;  // strings: byte offset of each code point, then the end
    if (obj.is_string()) {
      const std::string& str = obj.get_ref<const std::string&>();
      for (size_t i = 0; i < str.size(); ++i) {
        if ((static_cast<unsigned char>(str[i]) & 0xC0) != 0x80) starts.push_back(i);
      }
      starts.push_back(str.size());
    }
    const int64_t n = obj.is_array() ? static_cast<int64_t>(obj.size()) : static_cast<int64_t>(starts.size()) - 1;
    auto integer = [&](const Expr* e) -> std::optional<int64_t> {
      if (!e) return std::nullopt;
      Value v = eval(*e);
      if (v.is_null()) return std::nullopt;
      if (!v.is_number_integer()) fail("slice bounds must be integers");
      return v.get<int64_t>();
    };
    const int64_t step = integer(step_e).value_or(1);
    if (step == 0) fail("slice step cannot be zero");
    // Bounds as Python clamps them: [0, n] going forward, [-1, n-1] backward.
    const int64_t min = step > 0 ? 0 : -1, max = step > 0 ? n : n - 1;
    auto bound = [&](const Expr* e, int64_t dflt) {
      const auto x = integer(e);
      if (!x) return dflt;
      return std::clamp<int64_t>(*x < 0 ? *x + n : *x, min, max);
    };
    const int64_t lo = bound(lo_e, step > 0 ? 0 : n - 1), hi = bound(hi_e, step > 0 ? n : -1);
    std::vector<int64_t> picked;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) picked.push_back(i);
    if (obj.is_string()) {
      const std::string& str = obj.get_ref<const std::string&>();
      std::string out;
      for (int64_t i : picked) out.append(str, starts[i], starts[i + 1] - starts[i]);
      return out;
    }
    Value out = Value::array();
    for (int64_t i : picked) out.push_back(obj[static_cast<size_t>(i)]);
    return out;
  }

  static double num(const Value& v, const std::string& op) {
    if (!v.is_number() && !v.is_boolean()) fail("unsupported operand for '" + op + "'");
    return v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<double>();
  }
  static bool both_int(const Value& a, const Value& b) {
    return (a.is_number_integer() || a.is_boolean()) && (b.is_number_integer() || b.is_boolean());
  }
  static int64_t as_int(const Value& v) { return v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<int64_t>(); }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    return with_value(*e.args[0], {e.args[1].get()}, [&](const Value& a) {
      return with_value(*e.args[1], {}, [&](const Value& b) { return binary_op(op, a, b); });
    });
  }

  Value binary_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") return to_str(a) + to_str(b);
    if (op == "==") return values_equal(a, b);
    if (op == "!=") return !values_equal(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (a.is_string() && b.is_string()) {
        c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
      } else {
        const double x = num(a, op), y = num(b, op);
        c = x < y ? -1 : x > y ? 1 : 0;
      }
      return op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
      if (a.is_array() && b.is_array()) {
        Value out = a;
        for (const auto& x : b) out.push_back(x);
        return out;
      }
      if (a.is_string() || b.is_string() || a.is_array() || b.is_array()) {
        fail("cannot add " + std::string(a.type_name()) + " and " +
             std::string(b.is_discarded() ? "undefined" : b.type_name()));
      }
      if (both_int(a, b)) return as_int(a) + as_int(b);
      return num(a, op) + num(b, op);
    }
    if (op == "*" && a.is_string() && b.is_number_integer()) {
      std::string out;
      for (int64_t i = 0; i < b.get<int64_t>() && out.size() < kMaxOutputBytes; ++i) out += a.get<std::string>();
      return out;
    }
    if (op == "-") return both_int(a, b) ? Value(as_int(a) - as_int(b)) : Value(num(a, op) - num(b, op));
    if (op == "*") return both_int(a, b) ? Value(as_int(a) * as_int(b)) : Value(num(a, op) * num(b, op));
    if (op == "**") {
      if (both_int(a, b) && as_int(b) >= 0) {  // exact while it fits, as Python's ints
        const double p = std::pow(static_cast<double>(as_int(a)), static_cast<double>(as_int(b)));
        if (std::fabs(p) < 9.0e15) return static_cast<int64_t>(std::llround(p));
        return p;
      }
      return std::pow(num(a, op), num(b, op));
    }
    const double y = num(b, op);
    if (y == 0) fail("division by zero");
    if (op == "/") return num(a, op) / y;
    if (op == "//")
      return both_int(a, b) ? Value(static_cast<int64_t>(std::floor(num(a, op) / y)))
                            : Value(std::floor(num(a, op) / y));
    if (op == "%") {
      if (both_int(a, b)) {
        const int64_t m = as_int(a) % as_int(b);
        return (m != 0 && ((m < 0) != (as_int(b) < 0))) ? m + as_int(b) : m;
      }
      return std::fmod(num(a, op), y);
    }
    fail("unknown operator '" + op + "'");
  }

  Value call(const Expr& e) {
    std::vector<Value> args;
    for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
    Kwargs kwargs;
    for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
    const Expr& callee = *e.args[0];
    if (callee.kind == ExprKind::kGetAttr) {
      const Value obj = eval(*callee.args[0]);
      bool found = false;
      Value r = call_method(obj, callee.name, args, &found);
      if (found) return r;
      fail("no method '" + callee.name + "'");
    }
    if (callee.kind == ExprKind::kName) {
      const std::string& f = callee.name;
      if (auto m = macros_.find(f); m != macros_.end()) return call_macro(*m->second, args, kwargs);
      if (f == "raise_exception")
        throw InputError(args.empty() ? "chat template raised an exception" : to_str(args[0]));
      if (f == "dict") {
        Value d = Value::object();
        for (auto& [k, v] : kwargs) d[k] = v;
        return d;
      }
      if (f == "namespace") {
        Value ns = Value::object();
        for (auto& [k, v] : kwargs) ns[k] = v;
        return ns;
      }
      if (f == "range") {
        int64_t lo = 0, hi = 0, step = 1;
        for (const auto& a : args)
          if (!a.is_number_integer()) fail("range needs integers");
        if (args.size() == 1)
          hi = args[0].get<int64_t>();
        else if (args.size() >= 2)
          lo = args[0].get<int64_t>(), hi = args[1].get<int64_t>();
        if (args.size() == 3) step = args[2].get<int64_t>();
        if (step == 0) fail("range step is 0");
        Value out = Value::array();
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
          if (out.size() > 1'000'000) fail("range too long");
          out.push_back(i);
        }
        return out;
      }
      fail("unknown function '" + f + "'");
    }
    fail("value is not callable");
  }

  Value eval(const Expr& e) {
    DepthGuard g(this);
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName: {
        const Value* v = find_var(e.name);
        return v ? *v : undefined_value();
      }
      case ExprKind::kGetAttr:
        return with_value(*e.args[0], {}, [&](const Value& obj) { return get_item(obj, Value(e.name)); });
      case ExprKind::kGetItem:
        return with_value(*e.args[0], {e.args[1].get()},
                          [&](const Value& obj) { return get_item(obj, eval(*e.args[1])); });
      case ExprKind::kSlice:
        return with_value(*e.args[0], {e.args[1].get(), e.args[2].get(), e.args[3].get()}, [&](const Value& obj) {
          return slice(obj, e.args[1].get(), e.args[2].get(), e.args[3].get());
        });
      case ExprKind::kCall:
        return call(e);
      case ExprKind::kFilter:
        return with_value(*e.args[0], {&e}, [&](const Value& v) { return apply_filter_call(e, v); });
      case ExprKind::kTest:
        return with_value(*e.args[0], {&e}, [&](const Value& v) {
          std::vector<Value> args;
          for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
          return Value(apply_test(e.name, v, args) != e.negated);
        });
      case ExprKind::kUnary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return !truthy(v);
        if (!v.is_number()) fail("unary '" + e.name + "' needs a number");
        if (e.name == "+") return v;
        return v.is_number_float() ? Value(-v.get<double>()) : Value(-v.get<int64_t>());
      }
      case ExprKind::kBinary:
        return binary(e);
      case ExprKind::kCond:
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : undefined_value();
      case ExprKind::kList: {
        Value out = Value::array();
        for (const auto& a : e.args) out.push_back(eval(*a));
        return out;
      }
      case ExprKind::kDict: {
        Value out = Value::object();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) out[to_str(eval(*e.args[i]))] = eval(*e.args[i + 1]);
        return out;
      }
    }
    fail("bad expression");
  }

  enum class Flow { kNormal, kBreak, kContinue };

  std::vector<Scope> scopes_;
  int64_t iterations_ = 0;
  Flow flow_ = Flow::kNormal;                  // set by break / continue
  std::map<std::string, const Stmt*> macros_;  // defined so far, by name
  int macro_depth_ = 0;
  int depth_ = 0;  // eval / exec calls in progress
};

}  // namespace

CompiledTemplate::CompiledTemplate(std::string_view source) : tpl_(parse_template(source)) {}
CompiledTemplate::~CompiledTemplate() = default;
CompiledTemplate::CompiledTemplate(CompiledTemplate&&) noexcept = default;
CompiledTemplate& CompiledTemplate::operator=(CompiledTemplate&&) noexcept = default;

std::string CompiledTemplate::render(const nlohmann::ordered_json& context) const {
  Renderer r(context);
  std::string out;
  r.exec(tpl_->body, &out);
  return out;
}

}  // namespace parallm::jinja
