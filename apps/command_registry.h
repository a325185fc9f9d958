// Subcommands register themselves here at static-initialization time:
//
//   static const bool registered = register_command({"generate", "Generate text",
//       [](CLI::App& sub) { /* add options; return the action */ }});
//
// `setup` adds the subcommand's options to `sub` and returns the function that
// runs it after parsing. Actions return the process exit code and may throw
// parallm::InputError (printed as one line, exit code 2).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace parallm {

using CommandAction = std::function<int()>;

struct CommandSpec {
  std::string name;
  std::string description;
  std::function<CommandAction(CLI::App& sub)> setup;
};

bool register_command(CommandSpec spec);
std::vector<CommandSpec>& registered_commands();

// The command line as parsed (after apps/cli_aliases.h's rewriting), argv[0]
// first: `serve --dp-processes` repeats its own arguments to its replicas.
void set_process_args(std::vector<std::string> args);
const std::vector<std::string>& process_args();

}  // namespace parallm
