// API keys: the bearer tokens a server accepts. Compared in constant time
// (the time depends on the candidate's length only, never on how much of a
// key it matches), so that a client cannot find a key byte by byte.
// Keys come from --api-key, --api-key-file (one per line, '#' comments) and
// the environment (PARALLM_API_KEY, or VLLM_API_KEY as vLLM reads it).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace parallm {

bool constant_time_equal(std::string_view candidate, std::string_view key);

class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys);
  bool enabled() const { return !keys_.empty(); }
  // Every key is compared, whichever matches.
  bool accepts(std::string_view candidate) const;

  // Keys of a file; throws InputError when it cannot be read or holds none.
  static std::vector<std::string> read_file(const std::string& path);
  // PARALLM_API_KEY, then VLLM_API_KEY (empty when neither is set).
  static std::string from_environment();

 private:
  std::vector<std::string> keys_;
};

}  // namespace parallm
