// JSON Schema to grammar (see json_schema.h). Each $ref target, each object
// member and the generic JSON value are rules of their own, so recursion
// works and optional members cost one call edge each, not copies.
#include "constrain/json_schema.h"

#include <cmath>
#include <map>
#include <set>

#include "constrain/regex_parser.h"
#include "util/check.h"

namespace parallm::constrain {
namespace {

using json = nlohmann::ordered_json;  // properties are written in the schema's order

ExprPtr chars(const std::string& set) {
  ByteSet b;
  for (unsigned char c : set) b.set(c);
  return byte_set(b);
}
ExprPtr digit() { return chars("0123456789"); }
ExprPtr digits(int32_t lo, int32_t hi) { return repeat(digit(), lo, hi); }

// One character of a JSON string: an unescaped code point (no '"', '\' or
// control), or an escape (\u of a non-surrogate only: lone surrogates are
// not text).
ExprPtr string_char() {
  static const ExprPtr e = [] {
    ExprPtr plain = utf8_ranges({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}});
    ExprPtr hex = chars("0123456789abcdefABCDEF");
    ExprPtr u =
        alt({seq({chars("0123456789abcefABCEF"), hex, hex, hex}), seq({chars("dD"), chars("01234567"), hex, hex})});
    ExprPtr esc = seq({literal("\\"), alt({chars("\"\\/bfnrt"), seq({literal("u"), u})})});
    return alt({plain, esc});
  }();
  return e;
}

// Removes bytes a JSON string cannot hold unescaped ('"', '\', controls)
// from a pattern, so its matches are the string's characters as written.
ExprPtr unescaped_only(const ExprPtr& e) {
  if (e->kind == Expr::Kind::kBytes) {
    ByteSet b = e->bytes;
    b.reset('"');
    b.reset('\\');
    for (int c = 0; c < 0x20; ++c) b.reset(static_cast<size_t>(c));
    return byte_set(b);
  }
  if (e->kind == Expr::Kind::kRule) return e;
  auto out = std::make_shared<Expr>(*e);
  for (ExprPtr& it : out->items) it = unescaped_only(it);
  return out;
}

// Decimal strings of equal length a <= b.
ExprPtr digit_range(const std::string& a, const std::string& b) {
  if (a.empty()) return empty();
  if (a.size() == 1) {
    ByteSet s;
    for (char c = a[0]; c <= b[0]; ++c) s.set(static_cast<unsigned char>(c));
    return byte_set(s);
  }
  if (a.find_first_not_of('0') == std::string::npos && b.find_first_not_of('9') == std::string::npos) {
    return digits(static_cast<int32_t>(a.size()), static_cast<int32_t>(a.size()));
  }
  if (a[0] == b[0]) return seq({literal(a.substr(0, 1)), digit_range(a.substr(1), b.substr(1))});
  const size_t n = a.size() - 1;
  std::vector<ExprPtr> alts;
  alts.push_back(seq({literal(a.substr(0, 1)), digit_range(a.substr(1), std::string(n, '9'))}));
  if (b[0] - a[0] > 1) {
    ByteSet s;
    for (char c = static_cast<char>(a[0] + 1); c < b[0]; ++c) s.set(static_cast<unsigned char>(c));
    alts.push_back(seq({byte_set(s), digits(static_cast<int32_t>(n), static_cast<int32_t>(n))}));
  }
  alts.push_back(seq({literal(b.substr(0, 1)), digit_range(std::string(n, '0'), b.substr(1))}));
  return alt(std::move(alts));
}

// Non-negative integers in [lo, hi], written without leading zeros.
ExprPtr natural_range(int64_t lo, int64_t hi) {
  std::vector<ExprPtr> alts;
  int64_t p = 1;  // 10^(len-1)
  for (int len = 1; len <= 18 && (p <= hi || len == 1); ++len, p *= 10) {
    const int64_t a = std::max(lo, len == 1 ? int64_t{0} : p), b = std::min(hi, p * 10 - 1);
    if (a <= b) alts.push_back(digit_range(std::to_string(a), std::to_string(b)));
  }
  return alt(std::move(alts));
}

// Integers in [lo, hi] (lo <= hi).
ExprPtr integer_range(int64_t lo, int64_t hi) {
  std::vector<ExprPtr> alts;
  if (lo < 0) alts.push_back(seq({literal("-"), natural_range(std::max<int64_t>(1, -std::min<int64_t>(hi, -1)), -lo)}));
  if (hi >= 0) alts.push_back(natural_range(std::max<int64_t>(lo, 0), hi));
  return alt(std::move(alts));
}

constexpr int64_t kMaxInt = 9'999'999'999'999'999;  // 16 digits: exact in a double

const std::set<std::string> kAnnotations = {
    "title",         "description", "default",          "examples",       "$schema",     "$id",    "$comment",
    "deprecated",    "readOnly",    "writeOnly",        "$defs",          "definitions", "strict", "name",
    "discriminator", "example",     "contentMediaType", "contentEncoding"};

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  Grammar build() {
    const int32_t r = g_.add_rule("root");
    g_.set_root(r);
    g_.define(r, compile(root_, "#"));
    return std::move(g_);
  }
  Grammar build_any_object() {
    const int32_t r = g_.add_rule("root");
    g_.set_root(r);
    g_.define(r, any_object());
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& what) {
    throw InputError("JSON schema at " + where + ": " + what);
  }

  ExprPtr str(const std::string& s) { return literal(json(s).dump()); }

  int32_t value_rule() {
    if (value_rule_ >= 0) return value_rule_;
    value_rule_ = g_.add_rule("value");
    const int32_t v = value_rule_;
    ExprPtr string_e = seq({literal("\""), repeat(string_char(), 0, -1), literal("\"")});
    ExprPtr number = seq({optional(literal("-")), alt({literal("0"), seq({chars("123456789"), digits(0, 15)})}),
                          optional(seq({literal("."), digits(1, 8)}))});
    ExprPtr members = seq({string_e, literal(":"), rule_ref(v)});
    ExprPtr object =
        seq({literal("{"), optional(seq({members, repeat(seq({literal(","), members}), 0, -1)})), literal("}")});
    ExprPtr array = seq(
        {literal("["), optional(seq({rule_ref(v), repeat(seq({literal(","), rule_ref(v)}), 0, -1)})), literal("]")});
    g_.define(v, alt({object, array, string_e, number, literal("true"), literal("false"), literal("null")}));
    return v;
  }
  ExprPtr any_object() {
    const int32_t v = value_rule();
    ExprPtr members =
        seq({seq({literal("\""), repeat(string_char(), 0, -1), literal("\"")}), literal(":"), rule_ref(v)});
    return seq({literal("{"), optional(seq({members, repeat(seq({literal(","), members}), 0, -1)})), literal("}")});
  }

  const json& resolve(const std::string& ref, const std::string& where) {
    if (ref == "#") return root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.compare(0, p.size(), p) == 0) {
        const std::string name = ref.substr(p.size());
        const std::string key = p.substr(2, p.size() - 3);
        if (root_.contains(key) && root_[key].is_object() && root_[key].contains(name)) return root_[key][name];
        fail(where, "$ref '" + ref + "' names no definition");
      }
    }
    fail(where, "$ref '" + ref + "' is not supported (only '#', '#/$defs/...' and '#/definitions/...')");
  }

  ExprPtr compile(const json& s, const std::string& where) {
    if (++depth_ > 64) fail(where, "nests deeper than 64 levels");
    ExprPtr e = compile_inner(s, where);
    --depth_;
    return e;
  }

  ExprPtr compile_inner(const json& s, const std::string& where) {
    if (s.is_boolean()) return s.get<bool>() ? rule_ref(value_rule()) : nothing();
    if (!s.is_object()) fail(where, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.count(k) || kKnown.count(k)) continue;
      fail(where, "keyword '" + k + "' is not supported");
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(where, "'$ref' must be a string");
      const std::string ref = s["$ref"].get<std::string>();
      for (const auto& [k, v] : s.items()) {
        if (kKnown.count(k) && k != "$ref") fail(where, "'$ref' beside '" + k + "' is not supported");
      }
      auto it = refs_.find(ref);
      if (it != refs_.end()) return rule_ref(it->second);
      const int32_t r = g_.add_rule(ref);
      refs_[ref] = r;
      g_.define(r, compile(resolve(ref, where), ref));
      return rule_ref(r);
    }
    std::vector<ExprPtr> branches;
    if (s.contains("anyOf") || s.contains("oneOf")) {
      const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
      const json& list = s[key];
      if (!list.is_array() || list.empty()) fail(where, std::string("'") + key + "' must be a non-empty array");
      json rest = s;
      rest.erase(key);
      bool plain = true;
      for (const auto& [k, v] : rest.items()) plain = plain && kAnnotations.count(k) > 0;
      for (size_t i = 0; i < list.size(); ++i) {
        json branch = list[i];
        if (!plain) {  // shared keywords apply to every branch
          if (!branch.is_object()) fail(where, std::string("'") + key + "' branches must be objects");
          for (const auto& [k, v] : rest.items()) {
            if (!branch.contains(k)) branch[k] = v;
          }
        }
        branches.push_back(compile(branch, where + "/" + key + "/" + std::to_string(i)));
      }
      return alt(std::move(branches));
    }
    if (s.contains("allOf")) {
      const json& list = s["allOf"];
      if (!list.is_array() || list.size() != 1) fail(where, "'allOf' is supported with exactly one schema");
      json merged = s;
      merged.erase("allOf");
      if (merged.size() > 0) {
        for (const auto& [k, v] : list[0].items()) {
          if (merged.contains(k)) fail(where, "'allOf' repeating keyword '" + k + "' is not supported");
          merged[k] = v;
        }
        return compile(merged, where);
      }
      return compile(list[0], where + "/allOf/0");
    }
    if (s.contains("const")) return literal(s["const"].dump());
    if (s.contains("enum")) {
      const json& list = s["enum"];
      if (!list.is_array()) fail(where, "'enum' must be an array");
      if (list.size() > kMaxEnumValues) {
        fail(where, "'enum' has " + std::to_string(list.size()) + " values; at most " + std::to_string(kMaxEnumValues));
      }
      std::set<std::string> seen;
      for (const json& v : list) {
        std::string text = v.dump();
        if (seen.insert(text).second) branches.push_back(literal(text));
      }
      return alt(std::move(branches));  // empty: the schema accepts nothing (compile() says so)
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array()) {
        for (const json& x : t) {
          if (!x.is_string()) fail(where, "'type' must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(where, "'type' must be a string or an array of strings");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types = {"array"};
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
      types = {"string"};
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types = {"number"};
    } else {
      return rule_ref(value_rule());
    }
    if (s.contains("nullable") && s["nullable"] == true && std::find(types.begin(), types.end(), "null") == types.end())
      types.push_back("null");
    for (const std::string& t : types) {
      if (t == "string") {
        branches.push_back(string_schema(s, where));
      } else if (t == "integer") {
        branches.push_back(number_schema(s, where, true));
      } else if (t == "number") {
        branches.push_back(number_schema(s, where, false));
      } else if (t == "boolean") {
        branches.push_back(alt({literal("true"), literal("false")}));
      } else if (t == "null") {
        branches.push_back(literal("null"));
      } else if (t == "object") {
        branches.push_back(object_schema(s, where));
      } else if (t == "array") {
        branches.push_back(array_schema(s, where));
      } else {
        fail(where, "'type' '" + t + "' is not a JSON Schema type");
      }
    }
    return alt(std::move(branches));
  }

  int64_t get_count(const json& s, const char* key, const std::string& where, int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      fail(where, std::string("'") + key + "' must be a non-negative integer");
    return v.get<int64_t>();
  }

  ExprPtr string_schema(const json& s, const std::string& where) {
    const int64_t lo = get_count(s, "minLength", where, 0), hi = get_count(s, "maxLength", where, -1);
    if (hi >= 0 && hi < lo) fail(where, "'maxLength' is below 'minLength'; nothing matches");
    if (lo > 10000 || hi > 10000) fail(where, "string lengths above 10000 are not supported");
    if (s.contains("pattern") || s.contains("format")) {
      if (s.contains("minLength") || s.contains("maxLength")) {
        fail(where, "'pattern' or 'format' together with 'minLength'/'maxLength' is not supported");
      }
      std::string pattern;
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) fail(where, "'pattern' must be a string");
        if (s.contains("format")) fail(where, "'pattern' together with 'format' is not supported");
        pattern = s["pattern"].get<std::string>();
      } else {
        const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
        // Days stop at 28 so that every date exists; times carry a zone, as
        // RFC 3339 (and ajv-formats) require.
        const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])";
        const std::string time =
            "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?(Z|[+-]([01][0-9]|2[0-3]):[0-"
            "5][0-9])";
        if (f == "date") {
          pattern = date;
        } else if (f == "time") {
          pattern = time;
        } else if (f == "date-time") {
          pattern = date + "T" + time;
        } else if (f == "uuid") {
          pattern = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
        } else if (f == "email") {
          pattern = "[a-z0-9]+(\\.[a-z0-9]+)*@[a-z0-9]+(-[a-z0-9]+)*(\\.[a-z]{2,6})+";
        } else if (f == "ipv4") {
          pattern =
              "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-"
              "9]|[1-9]?[0-9])";
        } else {
          fail(where, "'format' '" + f + "' is not supported (date, time, date-time, uuid, email, ipv4)");
        }
      }
      ExprPtr p;
      try {
        p = parse_regex(pattern);
      } catch (const InputError& e) {
        fail(where, std::string("'pattern': ") + e.what());
      }
      return seq({literal("\""), unescaped_only(p), literal("\"")});
    }
    return seq(
        {literal("\""), repeat(string_char(), static_cast<int32_t>(lo), static_cast<int32_t>(hi)), literal("\"")});
  }

  ExprPtr number_schema(const json& s, const std::string& where, bool integer) {
    if (s.contains("multipleOf")) {
      const json& m = s["multipleOf"];
      if (!(integer && m.is_number() && m.get<double>() == 1.0)) fail(where, "'multipleOf' is not supported");
    }
    // The bounds as a predicate on integers: lo_ok(i) and hi_ok(i).
    double lo = -1e300, hi = 1e300;
    bool lo_ex = false, hi_ex = false;
    auto bound = [&](const char* key, double* v, bool* ex, bool exclusive, bool upper) {
      if (!s.contains(key)) return;
      const json& b = s[key];
      if (b.is_boolean()) {  // draft 4: exclusiveMinimum: true beside minimum
        if (b.get<bool>()) *ex = true;
        return;
      }
      if (!b.is_number()) fail(where, std::string("'") + key + "' must be a number");
      const double x = b.get<double>();
      if (upper ? x < *v || (x == *v && exclusive) : x > *v || (x == *v && exclusive)) *v = x, *ex = exclusive;
    };
    bound("minimum", &lo, &lo_ex, false, false);
    bound("exclusiveMinimum", &lo, &lo_ex, true, false);
    bound("maximum", &hi, &hi_ex, false, true);
    bound("exclusiveMaximum", &hi, &hi_ex, true, true);
    // Integers i with lo <(=) i <(=) hi, clamped to 16 digits.
    auto first_int = [&](double x, bool ex) {
      double c = std::ceil(x);
      if (ex && c == x) c += 1;
      return c < -static_cast<double>(kMaxInt)  ? -kMaxInt
             : c > static_cast<double>(kMaxInt) ? kMaxInt + 1
                                                : static_cast<int64_t>(c);
    };
    auto last_int = [&](double x, bool ex) {
      double f = std::floor(x);
      if (ex && f == x) f -= 1;
      return f > static_cast<double>(kMaxInt)    ? kMaxInt
             : f < -static_cast<double>(kMaxInt) ? -kMaxInt - 1
                                                 : static_cast<int64_t>(f);
    };
    const int64_t a = first_int(lo, lo_ex), b = last_int(hi, hi_ex);
    std::vector<ExprPtr> alts;
    if (a <= b) alts.push_back(integer_range(a, b));
    if (!integer) {
      // i.fff for i >= 0 lies in [i, i + 1): i must meet the lower bound
      // and i + 1 <= hi. -k.fff lies in (-k - 1, -k]: -k must meet the
      // upper bound and -k - 1 >= lo.
      const ExprPtr frac = seq({literal("."), digits(1, 8)});
      const int64_t pa = std::max<int64_t>(a, 0);
      const int64_t pb = hi >= 1e299 ? kMaxInt : last_int(hi, false) - 1;
      if (pa <= pb) alts.push_back(seq({natural_range(pa, std::min(pb, kMaxInt)), frac}));
      const int64_t kmin = std::max<int64_t>(0, -b);
      const int64_t kmax = lo <= -1e299 ? kMaxInt : -first_int(lo, false) - 1;
      if (kmin <= std::min(kmax, kMaxInt))
        alts.push_back(seq({literal("-"), natural_range(kmin, std::min(kmax, kMaxInt)), frac}));
    }
    if (alts.empty()) fail(where, "the numeric bounds leave no value this server can write");
    return alt(std::move(alts));
  }

  ExprPtr object_schema(const json& s, const std::string& where) {
    const json props = s.contains("properties") ? s["properties"] : json::object();
    if (!props.is_object()) fail(where, "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(where, "'required' must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail(where, "'required' must hold strings");
        if (!props.contains(r.get<std::string>())) {
          // A required member the schema does not describe: any value will do.
          if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
            fail(where, "'required' names '" + r.get<std::string>() +
                            "', which 'properties' lacks and "
                            "'additionalProperties' forbids; nothing matches");
          }
        }
        required.insert(r.get<std::string>());
      }
    }
    const json extra = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
    const int64_t min_p = get_count(s, "minProperties", where, 0), max_p = get_count(s, "maxProperties", where, -1);
    if (props.empty() && !(extra.is_boolean() && !extra.get<bool>()) && required.empty()) {
      // A map: any keys, values under additionalProperties.
      ExprPtr value = extra.is_boolean() ? rule_ref(value_rule()) : compile(extra, where + "/additionalProperties");
      const int32_t member = g_.add_rule(where + "/member");
      g_.define(member, seq({seq({literal("\""), repeat(string_char(), 0, -1), literal("\"")}), literal(":"), value}));
      if (max_p >= 0 && max_p < min_p) fail(where, "'maxProperties' is below 'minProperties'");
      if (min_p > 64 || max_p > 64) fail(where, "'minProperties'/'maxProperties' above 64 are not supported");
      // NOTE: keys are free, so two members may repeat a key; a small model
      // rarely does, and the bounds count members as written.
      ExprPtr rest =
          repeat(seq({literal(","), rule_ref(member)}), std::max<int32_t>(0, static_cast<int32_t>(min_p) - 1),
                 max_p < 0 ? -1 : static_cast<int32_t>(max_p) - 1);
      ExprPtr body = seq({rule_ref(member), rest});
      if (max_p == 0) return literal("{}");
      return seq({literal("{"), min_p > 0 ? body : optional(body), literal("}")});
    }
    if (min_p > static_cast<int64_t>(required.size()) || (max_p >= 0 && max_p < static_cast<int64_t>(props.size()))) {
      fail(where, "'minProperties'/'maxProperties' beside 'properties' are not supported");
    }
    // Members in order; m[i] a rule per member. S(i): the tail when nothing
    // was written yet, R(i): after at least one member (each needs a ',').
    std::vector<std::pair<int32_t, bool>> members;
    for (const auto& [name, sub] : props.items()) {
      const int32_t r = g_.add_rule(where + "/properties/" + name);
      g_.define(r, seq({str(name), literal(":"), compile(sub, where + "/properties/" + name)}));
      members.push_back({r, required.count(name) > 0});
    }
    for (const std::string& name : required) {
      if (props.contains(name)) continue;
      const int32_t r = g_.add_rule(where + "/required/" + name);
      g_.define(r, seq({str(name), literal(":"), rule_ref(value_rule())}));
      members.push_back({r, true});
    }
    const size_t n = members.size();
    std::vector<ExprPtr> R(n + 1), S(n + 1);
    R[n] = empty();
    S[n] = empty();
    for (size_t i = n; i-- > 0;) {
      const auto [r, req] = members[i];
      ExprPtr comma_member = seq({literal(","), rule_ref(r)});
      R[i] = seq({req ? comma_member : optional(comma_member), R[i + 1]});
      ExprPtr first = seq({rule_ref(r), R[i + 1]});
      S[i] = req ? first : alt({first, S[i + 1]});
    }
    // NOTE: S(i) holds a copy of R(i + 1) per optional member before it:
    // quadratic in the members, linear per member since each is one call.
    return seq({literal("{"), S[0], literal("}")});
  }

  ExprPtr array_schema(const json& s, const std::string& where) {
    for (const char* k : {"uniqueItems", "contains"}) {
      if (s.contains(k) && !(std::string(k) == "uniqueItems" && s[k] == false)) {
        fail(where, std::string("keyword '") + k + "' is not supported");
      }
    }
    const int64_t lo = get_count(s, "minItems", where, 0), hi = get_count(s, "maxItems", where, -1);
    if (hi >= 0 && hi < lo) fail(where, "'maxItems' is below 'minItems'; nothing matches");
    if (lo > 1000 || hi > 1000) fail(where, "'minItems'/'maxItems' above 1000 are not supported");
    std::vector<ExprPtr> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail(where, "'prefixItems' must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        prefix.push_back(compile(s["prefixItems"][i], where + "/prefixItems/" + std::to_string(i)));
      }
    }
    ExprPtr item;
    if (s.contains("items")) {
      item = s["items"].is_boolean() && !s["items"].get<bool>() ? nullptr : compile(s["items"], where + "/items");
    } else {
      item = rule_ref(value_rule());
    }
    int32_t item_rule = -1;
    if (item) {
      item_rule = g_.add_rule(where + "/items");
      g_.define(item_rule, item);
    }
    // Lengths n in [lo, hi]: the tuple's first min(n, np) items, then items.
    const int64_t np = static_cast<int64_t>(prefix.size());
    std::vector<ExprPtr> alts;
    if (lo == 0) alts.push_back(literal("[]"));
    for (int64_t n = std::max<int64_t>(lo, 1); n <= np && (hi < 0 || n <= hi); ++n) {
      std::vector<ExprPtr> parts{literal("[")};
      for (int64_t i = 0; i < n; ++i) {
        if (i) parts.push_back(literal(","));
        parts.push_back(prefix[static_cast<size_t>(i)]);
      }
      parts.push_back(literal("]"));
      alts.push_back(seq(std::move(parts)));
    }
    if (item_rule >= 0 && (hi < 0 || hi > np)) {  // lengths above np
      std::vector<ExprPtr> parts{literal("[")};
      for (int64_t i = 0; i < np; ++i) {
        parts.push_back(prefix[static_cast<size_t>(i)]);
        parts.push_back(literal(","));
      }
      const int32_t more_lo = static_cast<int32_t>(std::max<int64_t>(0, lo - np - 1));
      const int32_t more_hi = hi < 0 ? -1 : static_cast<int32_t>(hi - np - 1);
      parts.push_back(rule_ref(item_rule));
      parts.push_back(repeat(seq({literal(","), rule_ref(item_rule)}), more_lo, more_hi));
      parts.push_back(literal("]"));
      alts.push_back(seq(std::move(parts)));
    }
    return alt(std::move(alts));
  }

  static inline const std::set<std::string> kKnown = {
      "type",          "enum",        "const",    "properties", "required",         "additionalProperties",
      "items",         "prefixItems", "minItems", "maxItems",   "minLength",        "maxLength",
      "pattern",       "format",      "minimum",  "maximum",    "exclusiveMinimum", "exclusiveMaximum",
      "anyOf",         "oneOf",       "allOf",    "$ref",       "nullable",         "minProperties",
      "maxProperties", "uniqueItems", "contains", "multipleOf"};

  const json& root_;
  Grammar g_;
  std::map<std::string, int32_t> refs_;
  int32_t value_rule_ = -1;
  int depth_ = 0;
};

}  // namespace

Grammar json_schema_grammar(const nlohmann::ordered_json& schema) { return SchemaCompiler(schema).build(); }
Grammar json_object_grammar() { return SchemaCompiler(nlohmann::ordered_json::object()).build_any_object(); }

}  // namespace parallm::constrain
