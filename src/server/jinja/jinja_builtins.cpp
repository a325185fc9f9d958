// Built-in filters, tests and methods for chat templates, with Python's value
// semantics where templates depend on them (str(), truthiness, json.dumps).
#include "server/jinja/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/unicode.h"
#include "util/check.h"

namespace parallm::jinja {
namespace {

[[noreturn]] void fail(const std::string& m) { throw InputError("chat template: " + m); }

std::string trim_chars(const std::string& s, bool left, bool right, const std::string& chars = " \t\n\r\f\v") {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && chars.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {  // shortest round-trip form, as Python prints
    std::snprintf(buf, sizeof(buf), "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string json_string(const std::string& s) { return Value(s).dump(-1, ' ', false, Value::error_handler_t::replace); }

void dump_json(const Value& v, int indent, int level, std::string* out) {
  const std::string nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (level + 1)), ' ') : "";
  const std::string nl_end = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * level), ' ') : "";
  const std::string sep = indent >= 0 ? "," : ", ";
  if (v.is_object()) {
    if (v.empty()) return void(*out += "{}");
    *out += "{";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) *out += sep;
      first = false;
      *out += nl + json_string(it.key()) + ": ";
      dump_json(it.value(), indent, level + 1, out);
    }
    *out += nl_end + "}";
  } else if (v.is_array()) {
    if (v.empty()) return void(*out += "[]");
    *out += "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) *out += sep;
      *out += nl;
      dump_json(v[i], indent, level + 1, out);
    }
    *out += nl_end + "]";
  } else if (v.is_number_float()) {
    *out += float_repr(v.get<double>());
  } else if (v.is_string()) {
    *out += json_string(v.get<std::string>());
  } else if (v.is_discarded()) {
    *out += "null";
  } else {
    *out += v.dump();
  }
}

std::string py_repr(const Value& v) {
  if (v.is_string()) {
    std::string s = "'";
    for (char c : v.get<std::string>()) {
      if (c == '\'' || c == '\\') s += '\\';
      if (c == '\n')
        s += "\\n";
      else
        s += c;
    }
    return s + "'";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + py_repr(v[i]);
    return s + "]";
  }
  if (v.is_object()) {
    std::string s = "{";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      s += (first ? "'" : ", '") + it.key() + "': " + py_repr(it.value());
      first = false;
    }
    return s + "}";
  }
  return to_str(v);
}

Value items_of(const Value& v) {
  Value out = Value::array();
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) out.push_back(Value::array({it.key(), it.value()}));
  } else if (!v.is_null() && !v.is_discarded()) {
    fail("items() needs a mapping");
  }
  return out;
}

Value attr_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  while (b <= path.size()) {
    size_t e = path.find('.', b);
    if (e == std::string::npos) e = path.size();
    const std::string key = path.substr(b, e - b);
    if (!cur.is_object() || !cur.contains(key)) return undefined_value();
    cur = cur[key];
    b = e + 1;
  }
  return cur;
}

const Value& arg(const std::vector<Value>& args, size_t i, const std::string& who) {
  if (i >= args.size()) fail(who + ": missing argument");
  return args[i];
}

const Value* kwarg(const Kwargs& kwargs, const std::string& name) {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace

Value as_list(const Value& v) {
  if (v.is_array()) return v;
  Value out = Value::array();
  if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    for (size_t i = 0; i < str.size();) {
      size_t j = i + 1;
      while (j < str.size() && (static_cast<unsigned char>(str[j]) & 0xC0) == 0x80) ++j;
      out.push_back(str.substr(i, j - i));
      i = j;
    }
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) out.push_back(it.key());
  } else if (!v.is_null() && !v.is_discarded()) {
    fail("value is not iterable");
  }
  return out;
}

bool truthy(const Value& v) {
  if (v.is_discarded() || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>() != 0;
  if (v.is_number_float()) return v.get<double>() != 0.0;
  // nlohmann's empty() is false for every string, "" included.
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
}

std::string to_str(const Value& v) {
  if (v.is_discarded()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_float()) return float_repr(v.get<double>());
  if (v.is_number()) return v.dump();
  return py_repr(v);
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  dump_json(v, indent, 0, &out);
  return out;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_discarded() || b.is_discarded()) return a.is_discarded() && b.is_discarded();
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.is_boolean() != b.is_boolean()) return false;
  return a == b;
}

bool contains(const Value& h, const Value& n) {
  if (h.is_string()) {
    if (!n.is_string()) fail("'in <string>' requires a string on the left");
    return h.get<std::string>().find(n.get<std::string>()) != std::string::npos;
  }
  if (h.is_array()) {
    return std::any_of(h.begin(), h.end(), [&](const Value& x) { return values_equal(x, n); });
  }
  if (h.is_object()) return n.is_string() && h.contains(n.get<std::string>());
  if (h.is_discarded() || h.is_null()) return false;
  fail("'in' needs a string, list or mapping on the right");
}

int64_t length_of(const Value& v) {
  if (v.is_string()) {  // Python's len(): code points (nlohmann's size() of a string is 1)
    int64_t n = 0;
    for (unsigned char c : v.get_ref<const std::string&>()) n += (c & 0xC0) != 0x80;
    return n;
  }
  if (v.is_array() || v.is_object()) return static_cast<int64_t>(v.size());
  if (v.is_discarded()) return 0;
  fail("object has no length");
}

bool apply_test(const std::string& name, const Value& v, const std::vector<Value>& args) {
  if (name == "defined") return !v.is_discarded();
  if (name == "undefined") return v.is_discarded();
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_number_integer();
  if (name == "float") return v.is_number_float();
  if (name == "boolean") return v.is_boolean();
  if (name == "true") return v.is_boolean() && v.get<bool>();
  if (name == "false") return v.is_boolean() && !v.get<bool>();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_string();
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object();
  if (name == "callable") return false;
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return values_equal(v, arg(args, 0, name));
  if (name == "ne" || name == "!=") return !values_equal(v, arg(args, 0, name));
  if (name == "in") return contains(arg(args, 0, name), v);
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_number_integer()) fail("test '" + name + "' needs an integer");
    const int64_t x = v.get<int64_t>();
    if (name == "odd") return x % 2 != 0;
    if (name == "even") return x % 2 == 0;
    const Value& d = arg(args, 0, name);
    if (!d.is_number_integer() || d.get<int64_t>() == 0) fail("divisibleby needs a non-zero integer");
    return x % d.get<int64_t>() == 0;
  }
  if (name == "lt" || name == "gt" || name == "le" || name == "ge") {
    const Value& o = arg(args, 0, name);
    if (!v.is_number() || !o.is_number()) fail("test '" + name + "' needs numbers");
    const double a = v.get<double>(), b = o.get<double>();
    return name == "lt" ? a < b : name == "gt" ? a > b : name == "le" ? a <= b : a >= b;
  }
  fail("unknown test '" + name + "'");
}

Value apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  if (name == "trim" || name == "strip") return trim_chars(to_str(v), true, true);
  if (name == "length" || name == "count") return length_of(v);
  if (name == "string") return to_str(v);
  if (name == "safe") return v.is_string() ? v : Value(to_str(v));
  if (name == "e" || name == "escape") {  // as markupsafe: & < > " '
    std::string out;
    for (char c : to_str(v)) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out += c;
      }
    }
    return out;
  }
  if (name == "upper") return change_case(to_str(v), LetterCase::kUpper);
  if (name == "lower") return change_case(to_str(v), LetterCase::kLower);
  if (name == "capitalize") return change_case(to_str(v), LetterCase::kCapitalize);
  if (name == "tojson") {
    const Value* ind = kwarg(kwargs, "indent");
    if (!ind && !args.empty()) ind = &args[0];
    return to_json(v, ind && ind->is_number_integer() ? static_cast<int>(ind->get<int64_t>()) : -1);
  }
  if (name == "join") {
    const std::string sep = args.empty() ? "" : to_str(args[0]);
    const Value* attr = kwarg(kwargs, "attribute");
    std::string out;
    const Value l = as_list(v);
    for (size_t i = 0; i < l.size(); ++i) out += (i ? sep : "") + to_str(attr ? attr_of(l[i], to_str(*attr)) : l[i]);
    return out;
  }
  if (name == "list") return as_list(v);
  if (name == "items") return items_of(v);
  if (name == "first" || name == "last") {
    const Value l = as_list(v);
    if (l.empty()) return undefined_value();
    return name == "first" ? l.front() : l.back();
  }
  if (name == "default" || name == "d") {
    const bool boolean = args.size() > 1 && truthy(args[1]);
    if (v.is_discarded() || (boolean && !truthy(v))) return args.empty() ? Value("") : args[0];
    return v;
  }
  if (name == "int") {
    if (v.is_number()) return static_cast<int64_t>(v.get<double>());
    try {
      return static_cast<int64_t>(std::stoll(to_str(v)));
    } catch (...) {
      return 0;
    }
  }
  if (name == "float") return v.is_number() ? v.get<double>() : 0.0;
  if (name == "abs") {
    if (!v.is_number()) fail("abs needs a number");
    return v.is_number_float() ? Value(std::fabs(v.get<double>())) : Value(std::llabs(v.get<int64_t>()));
  }
  if (name == "replace") {
    std::string s = to_str(v);
    const std::string from = to_str(arg(args, 0, name)), to = to_str(arg(args, 1, name));
    if (from.empty()) return s;
    std::string out;
    size_t p = 0, q;
    while ((q = s.find(from, p)) != std::string::npos) {
      out += s.substr(p, q - p) + to;
      p = q + from.size();
    }
    return out + s.substr(p);
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name.size() > 6;
    const bool keep = name.rfind("select", 0) == 0;
    Value out = Value::array();
    const size_t t0 = by_attr ? 1 : 0;
    const std::string attr = by_attr ? to_str(arg(args, 0, name)) : "";
    const std::vector<Value> targs(args.begin() + static_cast<long>(std::min(args.size(), t0 + 1)), args.end());
    for (const Value& x : as_list(v)) {
      const Value subject = by_attr ? attr_of(x, attr) : x;
      const bool pass = args.size() > t0 ? apply_test(to_str(args[t0]), subject, targs) : truthy(subject);
      if (pass == keep) out.push_back(x);
    }
    return out;
  }
  if (name == "map") {
    const Value* attr = kwarg(kwargs, "attribute");
    Value out = Value::array();
    for (const Value& x : as_list(v)) {
      if (attr)
        out.push_back(attr_of(x, to_str(*attr)));
      else
        out.push_back(apply_filter(to_str(arg(args, 0, name)), x, {}, {}));
    }
    return out;
  }
  if (name == "unique") {
    Value out = Value::array();
    for (const Value& x : as_list(v))
      if (!contains(out, x)) out.push_back(x);
    return out;
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::string out;
      const Value chars = as_list(v);
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->get_ref<const std::string&>();
      return out;
    }
    Value l = as_list(v);
    std::reverse(l.begin(), l.end());
    return l;
  }
  if (name == "sort" || name == "dictsort" || name == "min" || name == "max") {
    // Jinja compares strings case-insensitively unless told otherwise.
    const Value* cs = kwarg(kwargs, "case_sensitive");
    const bool case_sensitive = cs ? truthy(*cs) : (name == "sort" && args.size() > 1 && truthy(args[1]));
    const Value* attr = kwarg(kwargs, "attribute");
    const bool dict = name == "dictsort";
    Value l = dict ? items_of(v) : as_list(v);
    auto key = [&](const Value& x) {
      Value k = dict ? x[0] : attr ? attr_of(x, to_str(*attr)) : x;
      if (k.is_string() && !case_sensitive) {
        std::string s = k.get<std::string>();
        for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        k = s;
      }
      return k;
    };
    auto less = [&](const Value& a, const Value& b) {
      const Value ka = key(a), kb = key(b);
      if (ka.is_number() && kb.is_number()) return ka.get<double>() < kb.get<double>();
      if (ka.is_string() && kb.is_string()) return ka.get_ref<const std::string&>() < kb.get_ref<const std::string&>();
      fail("'" + name + "' cannot compare " + std::string(ka.type_name()) + " and " + kb.type_name());
    };
    if (name == "min" || name == "max") {
      if (l.empty()) return undefined_value();
      return name == "min" ? *std::min_element(l.begin(), l.end(), less) : *std::max_element(l.begin(), l.end(), less);
    }
    std::stable_sort(l.begin(), l.end(), less);
    const Value* rev = kwarg(kwargs, "reverse");
    if (rev ? truthy(*rev) : (name == "sort" && !args.empty() && truthy(args[0]))) std::reverse(l.begin(), l.end());
    return l;
  }
  if (name == "sum") {
    const Value* attr = kwarg(kwargs, "attribute");
    const Value* start = kwarg(kwargs, "start");
    bool all_int = !start || start->is_number_integer();
    double total = start ? start->get<double>() : 0.0;
    for (const Value& x : as_list(v)) {
      const Value k = attr ? attr_of(x, to_str(*attr)) : x;
      if (!k.is_number()) fail("sum of a value that is not a number");
      all_int = all_int && k.is_number_integer();
      total += k.get<double>();
    }
    return all_int ? Value(static_cast<int64_t>(total)) : Value(total);
  }
  if (name == "round") {
    const int precision = args.empty() ? 0 : static_cast<int>(args[0].get<int64_t>());
    const std::string method = args.size() > 1 ? to_str(args[1]) : "common";
    if (!v.is_number()) fail("round of a value that is not a number");
    const double scale = std::pow(10.0, precision), x = v.get<double>() * scale;
    const double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
    return r / scale;
  }
  if (name == "indent") {  // Jinja 3: every line but the first, blank lines left alone
    const Value* w = kwarg(kwargs, "width");
    const Value width = w ? *w : args.empty() ? Value(4) : args[0];
    const std::string pad = width.is_string() ? width.get<std::string>() : std::string(width.get<int64_t>(), ' ');
    const Value* f = kwarg(kwargs, "first");
    const Value* b = kwarg(kwargs, "blank");
    const bool first = f ? truthy(*f) : args.size() > 1 && truthy(args[1]);
    const bool blank = b ? truthy(*b) : args.size() > 2 && truthy(args[2]);
    std::vector<std::string> lines;  // str.splitlines() of the text plus "\n"
    const std::string text = to_str(v) + "\n";
    for (size_t i = 0, start = 0; i < text.size(); ++i) {
      if (text[i] != '\n' && text[i] != '\r') continue;
      lines.push_back(text.substr(start, i - start));
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      start = i + 1;
    }
    std::string out = first ? pad : "";
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n";
      out += (i > 0 && (blank || !lines[i].empty()) ? pad : "") + lines[i];
    }
    return out;
  }
  if (name == "wordcount") {  // runs of word characters (bytes >= 0x80 count as letters)
    int64_t words = 0;
    bool in_word = false;
    for (unsigned char c : to_str(v)) {
      const bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      words += w && !in_word;
      in_word = w;
    }
    return words;
  }
  fail("unknown filter '" + name + "'");
}

Value call_method(const Value& obj, const std::string& name, const std::vector<Value>& args, bool* found) {
  *found = true;
  if (obj.is_object()) {
    if (name == "items") return items_of(obj);
    if (name == "keys" || name == "values") {
      Value out = Value::array();
      for (auto it = obj.begin(); it != obj.end(); ++it) out.push_back(name == "keys" ? Value(it.key()) : it.value());
      return out;
    }
    if (name == "get") {
      const std::string key = to_str(arg(args, 0, name));
      if (obj.contains(key)) return obj[key];
      return args.size() > 1 ? args[1] : Value(nullptr);
    }
  }
  if (obj.is_string()) {
    const std::string s = obj.get<std::string>();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const std::string chars = args.empty() || args[0].is_null() ? " \t\n\r\f\v" : to_str(args[0]);
      return trim_chars(s, name != "rstrip", name != "lstrip", chars);
    }
    if (name == "upper" || name == "lower" || name == "capitalize") return apply_filter(name, obj, {}, {});
    if (name == "title") return change_case(s, LetterCase::kTitle);
    if (name == "startswith") return s.rfind(to_str(arg(args, 0, name)), 0) == 0;
    if (name == "endswith") {
      const std::string suf = to_str(arg(args, 0, name));
      return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
    }
    if (name == "replace") return apply_filter("replace", obj, args, {});
    if (name == "split") {
      Value out = Value::array();
      if (args.empty() || args[0].is_null()) {
        size_t p = 0;
        while (p < s.size()) {
          while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
          size_t e = p;
          while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e]))) ++e;
          if (e > p) out.push_back(s.substr(p, e - p));
          p = e;
        }
        return out;
      }
      const std::string sep = to_str(args[0]);
      if (sep.empty()) fail("split: empty separator");
      size_t p = 0, q;
      while ((q = s.find(sep, p)) != std::string::npos) {
        out.push_back(s.substr(p, q - p));
        p = q + sep.size();
      }
      out.push_back(s.substr(p));
      return out;
    }
  }
  if (obj.is_array() && name == "index") {
    for (size_t i = 0; i < obj.size(); ++i)
      if (values_equal(obj[i], arg(args, 0, name))) return static_cast<int64_t>(i);
    fail("index: value not in list");
  }
  *found = false;
  return undefined_value();
}

}  // namespace parallm::jinja
