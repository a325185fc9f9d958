// Built-in model catalog: the values of the public config.json files of
// well-known checkpoints, so `parallm plan --model llama-2-70b` needs no download.
#pragma once
#include <string>
#include <vector>

#include "planner/model_spec.h"

namespace parallm::planner {

// Case-insensitive; throws InputError listing the known names.
ModelSpec catalog_model(const std::string& name);
bool catalog_has_model(const std::string& name);
std::vector<std::string> catalog_model_names();

}  // namespace parallm::planner
