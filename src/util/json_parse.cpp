// Bounded, linear-time JSON parsing (see json_parse.h): a SAX handler that
// builds the DOM as nlohmann's json_sax_dom_parser does (a stack of the open
// arrays and objects, each new value placed in the top one), plus a depth
// check on every open and, for ordered_json, a key index per open object.
#include "util/json_parse.h"

#include <cstring>
#include <memory>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "util/check.h"

namespace parallm {
namespace {

// NOTE: members are added to the containers directly (not through basic_json's
// operator[]), which skips the parent pointers nlohmann keeps only in its
// diagnostics mode.
static_assert(!JSON_DIAGNOSTICS, "json_parse.cpp does not maintain JSON_DIAGNOSTICS parent pointers");

// ordered_json objects below this many members find a duplicate key by a
// linear scan; from here on through a hash index (built once, then kept up to
// date). Most objects are small and never pay for an index.
constexpr size_t kIndexFromMembers = 16;

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line
// 1, column 5: syntax error while parsing ..."; the byte offset replaces the
// line and column.
std::string error_detail(const std::string& what) {
  std::string_view d = what;
  if (!d.empty() && d.front() == '[') {
    const size_t e = d.find("] ");
    if (e != std::string_view::npos) d.remove_prefix(e + 2);
  }
  if (d.rfind("parse error", 0) == 0) {
    const size_t e = d.find(": ");
    if (e != std::string_view::npos) d.remove_prefix(e + 2);
  }
  return std::string(d);
}

template <class Json>
class BoundedDomBuilder final : public nlohmann::json_sax<Json> {
 public:
  using typename nlohmann::json_sax<Json>::number_integer_t;
  using typename nlohmann::json_sax<Json>::number_unsigned_t;
  using typename nlohmann::json_sax<Json>::number_float_t;
  using typename nlohmann::json_sax<Json>::string_t;
  using typename nlohmann::json_sax<Json>::binary_t;

  BoundedDomBuilder(Json* root, int max_depth, size_t max_members, JsonError* error)
      : root_(root), max_depth_(max_depth), max_members_(max_members), error_(error) {}

  bool null() override { return scalar(Json(nullptr)); }
  bool boolean(bool v) override { return scalar(Json(v)); }
  bool number_integer(number_integer_t v) override { return scalar(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(Json(v)); }
  // The lexer hands its buffer by non-const reference and clears it before
  // the next token: taking it saves a copy of every string.
  bool string(string_t& v) override { return scalar(Json(std::move(v))); }
  bool binary(binary_t& v) override { return scalar(Json::binary(std::move(v))); }

  bool start_object(size_t) override { return open(Json::object()); }
  bool start_array(size_t) override { return open(Json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    Open& top = stack_.back();
    auto& members = top.value->template get_ref<Object&>();
    if constexpr (kOrdered) {
      top.member = &members_slot(top, members, std::move(k))->second;
    } else {
      top.member = &members[std::move(k)];  // std::map: a duplicate finds the first entry
    }
    if (max_members_ > 0 && members.size() > max_members_) {
      error_->too_wide = true;
      error_->message = "a JSON object has more than the limit of " + std::to_string(max_members_) + " members";
      return false;
    }
    return true;
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    error_->too_deep = false;
    error_->byte = position;
    error_->detail = error_detail(e.what());
    error_->message = "invalid JSON at byte " + std::to_string(position) + ": " + error_->detail;
    return false;
  }

 private:
  using Object = typename Json::object_t;
  static constexpr bool kOrdered = std::is_same_v<Json, nlohmann::ordered_json>;

  // ordered_json's object is an ordered_map: a vector of (key, value) pairs.
  // The index holds positions in it, hashed and compared by their keys, so no
  // key is stored twice and a reallocation of the vector invalidates nothing.
  struct Members {
    using Vector = std::vector<std::pair<const std::string, Json>>;
    const Vector* v;
    const std::string& key(size_t i) const { return (*v)[i].first; }
  };
  struct KeyHash {
    Members m;
    size_t operator()(size_t i) const { return std::hash<std::string>{}(m.key(i)); }
  };
  struct KeyEqual {
    Members m;
    bool operator()(size_t a, size_t b) const { return m.key(a) == m.key(b); }
  };
  using KeyIndex = std::unordered_set<size_t, KeyHash, KeyEqual>;

  struct Open {
    Json* value;                      // the array or object being filled
    Json* member = nullptr;           // objects: where the value after key() goes
    std::unique_ptr<KeyIndex> index;  // ordered objects of kIndexFromMembers or more
  };

  // Appends key `k` to an ordered object, or finds its earlier entry (which
  // then gets the new value in its old place, as ordered_map::operator[]).
  template <class OrderedMap>
  auto* members_slot(Open& top, OrderedMap& map, std::string&& k) {
    static_assert(std::is_base_of_v<typename Members::Vector, OrderedMap>);
    auto& v = static_cast<typename Members::Vector&>(map);
    v.emplace_back(std::move(k), Json());
    const size_t last = v.size() - 1;
    size_t found = last;
    if (top.index) {
      found = *top.index->insert(last).first;
    } else {
      for (size_t i = 0; i < last; ++i) {
        if (v[i].first == v[last].first) {
          found = i;
          break;
        }
      }
      if (found == last && v.size() >= kIndexFromMembers) {
        const Members m{&v};
        top.index = std::make_unique<KeyIndex>(2 * v.size(), KeyHash{m}, KeyEqual{m});
        for (size_t i = 0; i <= last; ++i) top.index->insert(i);
      }
    }
    if (found != last) v.pop_back();
    return &v[found];
  }

  // Puts a finished value where the parse stands: the root, the next array
  // element, or the member named by the last key().
  Json* place(Json&& value) {
    if (stack_.empty()) {
      *root_ = std::move(value);
      return root_;
    }
    Open& top = stack_.back();
    if (top.value->is_array()) {
      auto& a = top.value->template get_ref<typename Json::array_t&>();
      a.push_back(std::move(value));
      return &a.back();
    }
    *top.member = std::move(value);
    return top.member;
  }

  bool scalar(Json&& value) {
    place(std::move(value));
    return true;
  }

  bool open(Json&& empty) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      error_->too_deep = true;
      error_->message = "JSON nested deeper than the limit of " + std::to_string(max_depth_) + " levels";
      return false;
    }
    Json* v = place(std::move(empty));
    stack_.push_back(Open{v, nullptr, nullptr});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  Json* root_;
  const int max_depth_;
  const size_t max_members_;
  JsonError* error_;
  std::vector<Open> stack_;
};

}  // namespace

template <class Json>
std::optional<Json> try_parse_json(std::string_view text, const JsonLimits& limits, JsonError* error) {
  JsonError local;
  JsonError* e = error ? error : &local;
  *e = JsonError{};
  // nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0junk"
  // would parse; JSON text never holds a raw NUL (inside strings it must be
  // escaped), so one is a syntax error here.
  if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
    e->byte = static_cast<size_t>(static_cast<const char*>(nul) - text.data());
    e->detail = "a NUL byte (JSON text cannot hold one)";
    e->message = "invalid JSON at byte " + std::to_string(e->byte) + ": " + e->detail;
    return std::nullopt;
  }
  Json root;
  BoundedDomBuilder<Json> builder(&root, limits.max_depth, limits.max_members, e);
  // strict: the whole input is one value; no comments.
  if (!Json::sax_parse(text.data(), text.data() + text.size(), &builder)) return std::nullopt;
  return root;
}

template <class Json>
Json parse_json(std::string_view text, const JsonLimits& limits) {
  JsonError e;
  auto j = try_parse_json<Json>(text, limits, &e);
  if (!j) throw InputError(e.message);
  return std::move(*j);
}

template std::optional<nlohmann::json> try_parse_json<nlohmann::json>(std::string_view, const JsonLimits&, JsonError*);
template std::optional<nlohmann::ordered_json> try_parse_json<nlohmann::ordered_json>(std::string_view,
                                                                                      const JsonLimits&, JsonError*);
template nlohmann::json parse_json<nlohmann::json>(std::string_view, const JsonLimits&);
template nlohmann::ordered_json parse_json<nlohmann::ordered_json>(std::string_view, const JsonLimits&);

}  // namespace parallm
