#include "server/model_names.h"

#include <algorithm>

namespace parallm {

bool serves_model(const ServerOptions& options, const std::string& model) {
  return model == options.served_model_name ||
         std::find(options.served_model_aliases.begin(), options.served_model_aliases.end(), model) !=
             options.served_model_aliases.end();
}

std::vector<std::string> served_model_names(const ServerOptions& options) {
  std::vector<std::string> names{options.served_model_name};
  for (const std::string& a : options.served_model_aliases) {
    if (std::find(names.begin(), names.end(), a) == names.end()) names.push_back(a);
  }
  return names;
}

}  // namespace parallm
