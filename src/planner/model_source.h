// Where a ModelSpec comes from: the catalog, a Hugging Face config.json (file
// or directory holding one), or a GGUF file (metadata and exact tensor bytes,
// read with loader/gguf_reader.h).
#pragma once
#include <string>

#include "planner/model_spec.h"

namespace parallm::planner {

// Parses the fields the planner needs from config.json text; `origin` names
// the file in messages. Throws InputError on bad JSON or missing fields.
ModelSpec model_from_hf_config_text(const std::string& json_text, const std::string& origin);
ModelSpec model_from_hf_config_file(const std::string& path);
// GGUF metadata (general.architecture prefixed keys) + tensor sizes.
ModelSpec model_from_gguf(const std::string& path);
// A catalog name, a GGUF file, a config.json or a directory with one.
ModelSpec load_model_spec(const std::string& ref);

}  // namespace parallm::planner
