#include "command_registry.h"

namespace parallm {

std::vector<CommandSpec>& registered_commands() {
  static std::vector<CommandSpec> commands;
  return commands;
}

bool register_command(CommandSpec spec) {
  registered_commands().push_back(std::move(spec));
  return true;
}

}  // namespace parallm
