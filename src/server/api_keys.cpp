#include "server/api_keys.h"

#include <cstdlib>
#include <fstream>

#include "util/check.h"

namespace parallm {

bool constant_time_equal(std::string_view candidate, std::string_view key) {
  if (key.empty()) return false;
  // Length difference folded in; every byte of the candidate is compared
  // against the key (cycled), so the loop's length is the candidate's.
  unsigned diff = static_cast<unsigned>(candidate.size() ^ key.size());
  for (size_t i = 0; i < candidate.size(); ++i) {
    diff |= static_cast<unsigned>(static_cast<unsigned char>(candidate[i]) ^
                                  static_cast<unsigned char>(key[i % key.size()]));
  }
  return diff == 0;
}

ApiKeys::ApiKeys(std::vector<std::string> keys) {
  for (std::string& k : keys) {
    if (!k.empty()) keys_.push_back(std::move(k));
  }
}

bool ApiKeys::accepts(std::string_view candidate) const {
  bool ok = false;
  for (const std::string& k : keys_) ok = constant_time_equal(candidate, k) || ok;  // no early exit
  return ok;
}

std::vector<std::string> ApiKeys::read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError("--api-key-file: cannot read '" + path + "'");
  std::vector<std::string> keys;
  for (std::string line; std::getline(f, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    keys.push_back(line.substr(b));
  }
  if (keys.empty()) throw InputError("--api-key-file: '" + path + "' holds no key (one per line)");
  return keys;
}

std::string ApiKeys::from_environment() {
  for (const char* name : {"PARALLM_API_KEY", "VLLM_API_KEY"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return v;
  }
  return "";
}

}  // namespace parallm
