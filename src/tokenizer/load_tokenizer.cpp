// load_tokenizer(): picks the format from the path's content. GGUF by its
// magic, tokenizer.json by a leading '{' (or a folder holding one), and
// anything else is read as a llama2.c tokenizer file. A tokenizer.json takes
// tokenizer_config.json from its folder, and the chat template from
// chat_template.jinja / .json there when the config has none.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "loader/gguf_reader.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

namespace fs = std::filesystem;

// The chat template saved beside tokenizer_config.json rather than in it:
// chat_template.jinja (transformers 4.43 and later) or chat_template.json.
std::optional<std::string> separate_chat_template(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
    return read_text_file((dir / "chat_template.jinja").string());
  }
  if (fs::is_regular_file(dir / "chat_template.json", ec)) {
    try {
      const auto j = nlohmann::json::parse(read_text_file((dir / "chat_template.json").string()));
      if (j.is_object() && j.contains("chat_template") && j.at("chat_template").is_string()) {
        return j.at("chat_template").get<std::string>();
      }
    } catch (const nlohmann::json::exception& e) {
      throw InputError((dir / "chat_template.json").string() + " is malformed: " + e.what());
    }
  }
  return std::nullopt;
}

std::unique_ptr<Tokenizer> load_json(const fs::path& json_path) {
  const std::string text = read_text_file(json_path.string());
  const fs::path config_path = json_path.parent_path() / "tokenizer_config.json";
  std::string config;
  std::error_code ec;
  if (fs::is_regular_file(config_path, ec)) config = read_text_file(config_path.string());
  if (auto tpl = separate_chat_template(json_path.parent_path())) {
    nlohmann::json c;
    try {
      c = config.empty() ? nlohmann::json::object() : nlohmann::json::parse(config);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(config_path.string() + " is malformed: " + e.what());
    }
    if (c.is_object() && !c.contains("chat_template")) {
      c["chat_template"] = *tpl;
      config = c.dump();
    }
  }
  return parse_tokenizer_json(text, config);
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    const fs::path json_path = p / "tokenizer.json";
    if (!fs::is_regular_file(json_path, ec)) {
      throw InputError("tokenizer folder " + path + " has no tokenizer.json");
    }
    return load_json(json_path);
  }
  if (!fs::exists(p, ec)) throw InputError("tokenizer file not found: " + path);

  char head[8] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot open tokenizer file " + path);
    in.read(head, sizeof(head));
  }
  if (std::string_view(head, 4) == "GGUF") {
    const GgufFile gguf(path);
    return tokenizer_from_gguf(gguf);
  }
  size_t first = 0;
  while (first < sizeof(head) && std::isspace(static_cast<unsigned char>(head[first]))) ++first;
  if ((first < sizeof(head) && head[first] == '{') || p.extension() == ".json") return load_json(p);
  const MappedFile file(path);
  try {
    return parse_llama2c_tokenizer(file.data(), file.size());
  } catch (const InputError& e) {
    throw InputError(path + " is not a GGUF, tokenizer.json or llama2.c tokenizer file (" +
                     e.what() + ")");
  }
}

}  // namespace parallm
