// Hugging Face config.json -> ModelSpec, through the reader the engine uses
// (config/hf_config.h): every architecture the engine describes is known to
// the planner with the same shapes. Features the engine cannot run
// (ModelConfig::unsupported) do not stop a plan: the planner counts the
// shapes, and says which of them parallm itself would refuse.
#include "config/hf_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "planner/model_catalog.h"
#include "planner/model_source.h"
#include "util/check.h"

namespace parallm::planner {

ModelSpec model_from_hf_config_text(const std::string& text, const std::string& origin) {
  const ModelConfig c = read_hf_config(text, origin);
  try {
    return spec_from_config(c, origin);
  } catch (const InputError& e) {
    std::string msg = e.what();
    throw InputError(origin + ": " + msg.substr(msg.find(": ") + 2));
  }
}

ModelSpec model_from_hf_config_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return model_from_hf_config_text(ss.str(), path);
}

ModelSpec load_model_spec(const std::string& ref) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(ref, ec)) {
    fs::path cfg = fs::path(ref) / "config.json";
    if (!fs::exists(cfg, ec)) throw InputError(ref + ": directory without config.json");
    return model_from_hf_config_file(cfg.string());
  }
  if (fs::is_regular_file(ref, ec)) {
    std::ifstream f(ref, std::ios::binary);
    char magic[4] = {0, 0, 0, 0};
    f.read(magic, 4);
    if (std::string(magic, 4) == "GGUF") return model_from_gguf(ref);
    return model_from_hf_config_file(ref);
  }
  return catalog_model(ref);
}

}  // namespace parallm::planner
