// Compile cache (see compile_cache.h).
#include "constrain/compile_cache.h"

#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "constrain/ebnf_parser.h"
#include "constrain/json_schema.h"
#include "constrain/regex_parser.h"
#include "util/check.h"
#include "util/json_parse.h"

namespace parallm::constrain {
namespace {

Grammar build(ConstraintKind kind, const std::string& text) {
  Grammar g;
  switch (kind) {
    case ConstraintKind::kJsonSchema: {
      const nlohmann::ordered_json schema = parse_json<nlohmann::ordered_json>(text, JsonLimits{kRequestJsonDepth});
      return json_schema_grammar(schema);
    }
    case ConstraintKind::kJsonObject:
      return json_object_grammar();
    case ConstraintKind::kRegex: {
      const int32_t r = g.add_rule("root");
      g.define(r, parse_regex(text));
      return g;
    }
    case ConstraintKind::kChoice: {
      const nlohmann::json list = parse_json<nlohmann::json>(text, JsonLimits{kRequestJsonDepth});
      PARALLM_CHECK(list.is_array());
      std::vector<ExprPtr> alts;
      for (const auto& c : list) alts.push_back(literal(c.get<std::string>()));
      const int32_t r = g.add_rule("root");
      g.define(r, alt(std::move(alts)));
      return g;
    }
    case ConstraintKind::kGrammar:
      return parse_ebnf(text);
  }
  return g;
}

struct Cache {
  std::mutex mu;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledConstraint>>> lru;  // front: newest
  std::unordered_map<std::string, decltype(lru)::iterator> index;
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

std::shared_ptr<const CompiledConstraint> compile_constraint(ConstraintKind kind, const std::string& text) {
  const std::string key = std::to_string(static_cast<int>(kind)) + ":" + text;
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      return it->second->second;
    }
  }
  Grammar g = build(kind, text);
  g.compile();
  static const char* names[] = {"json_schema", "json_object", "regex", "choice", "grammar"};
  auto compiled = std::make_shared<const CompiledConstraint>(std::move(g), names[static_cast<int>(kind)]);
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.index.count(key)) {
    c.lru.emplace_front(key, compiled);
    c.index[key] = c.lru.begin();
    while (c.lru.size() > kCompileCacheEntries) {
      c.index.erase(c.lru.back().first);
      c.lru.pop_back();
    }
  }
  return compiled;
}

}  // namespace parallm::constrain
