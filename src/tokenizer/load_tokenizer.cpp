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
#include "util/json_parse.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

namespace fs = std::filesystem;

nlohmann::json parse_file_json(const fs::path& path, const std::string& text) {
  JsonError e;
  auto j = try_parse_json<nlohmann::json>(text, JsonLimits{kFileJsonDepth}, &e);
  if (!j) throw InputError(path.string() + " is malformed: " + e.message);
  return std::move(*j);
}

// The chat template saved beside tokenizer_config.json rather than in it:
// chat_template.jinja (transformers 4.43 and later) or chat_template.json.
std::optional<std::string> separate_chat_template(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
    return read_text_file((dir / "chat_template.jinja").string());
  }
  if (fs::is_regular_file(dir / "chat_template.json", ec)) {
    const auto j = parse_file_json(dir / "chat_template.json", read_text_file((dir / "chat_template.json").string()));
    if (j.is_object() && j.contains("chat_template") && j.at("chat_template").is_string()) {
      return j.at("chat_template").get<std::string>();
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
    nlohmann::json c = config.empty() ? nlohmann::json::object() : parse_file_json(config_path, config);
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
    throw InputError(path + " is not a GGUF, tokenizer.json or llama2.c tokenizer file (" + e.what() + ")");
  }
}

}  // namespace parallm
