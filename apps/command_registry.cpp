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

namespace {
std::vector<std::string>& args_storage() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

void set_process_args(std::vector<std::string> args) { args_storage() = std::move(args); }
const std::vector<std::string>& process_args() { return args_storage(); }

}  // namespace parallm
