// Trace reader; the schema is in trace.h.
#include "sim/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "util/check.h"
#include "util/json_parse.h"
#include "util/log.h"

namespace parallm::sim {

namespace {

using nlohmann::json;

// A line is small and flat: depth 2 leaves room for one nested value a trace
// may carry alongside (ignored), members bounded like a request body.
constexpr int kTraceLineDepth = 8;

int64_t token_count(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw InputError(where + ": missing \"" + key + "\" (an integer >= 1)");
  if (!it->is_number_integer())
    throw InputError(where + ": \"" + key + "\" must be an integer >= 1, got " + it->dump().substr(0, 40));
  const bool in_range = it->is_number_unsigned()
                            ? it->get<uint64_t>() >= 1 && it->get<uint64_t>() <= static_cast<uint64_t>(kMaxTraceTokens)
                            : it->get<int64_t>() >= 1 && it->get<int64_t>() <= kMaxTraceTokens;
  if (!in_range)
    throw InputError(where + strfmt(": \"%s\" must be between 1 and %lld, got %s", key,
                                    static_cast<long long>(kMaxTraceTokens), it->dump().substr(0, 40).c_str()));
  return it->get<int64_t>();
}

}  // namespace

std::vector<SimRequest> parse_trace(const std::string& text, const std::string& origin) {
  std::vector<SimRequest> out;
  std::vector<size_t> line_of;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = strfmt("%s:%lld", origin.c_str(), static_cast<long long>(line_no));
    JsonError error;
    std::optional<json> parsed = try_parse_json<json>(line, JsonLimits{kTraceLineDepth, kRequestJsonMembers}, &error);
    if (!parsed) throw InputError(where + ": " + error.message);
    const json& j = *parsed;
    if (!j.is_object())
      throw InputError(where + ": expected an object {\"arrival_s\", \"input_tokens\", \"output_tokens\"}");
    SimRequest r;
    auto at = j.find("arrival_s");
    if (at == j.end()) throw InputError(where + ": missing \"arrival_s\" (seconds from the start, >= 0)");
    if (!at->is_number()) throw InputError(where + ": \"arrival_s\" must be a number, got " + at->dump().substr(0, 40));
    r.arrival_s = at->get<double>();
    if (!std::isfinite(r.arrival_s) || r.arrival_s < 0 || r.arrival_s > kMaxTraceArrivalS)
      throw InputError(where + strfmt(": \"arrival_s\" must be between 0 and %.0f seconds, got %s", kMaxTraceArrivalS,
                                      at->dump().substr(0, 40).c_str()));
    r.input_tokens = token_count(j, "input_tokens", where);
    r.output_tokens = token_count(j, "output_tokens", where);
    out.push_back(r);
  }
  if (out.empty()) throw InputError(origin + ": the trace holds no requests");
  std::stable_sort(out.begin(), out.end(),
                   [](const SimRequest& a, const SimRequest& b) { return a.arrival_s < b.arrival_s; });
  return out;
}

std::vector<SimRequest> load_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("--trace " + path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_trace(ss.str(), path);
}

}  // namespace parallm::sim
