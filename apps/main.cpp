// parallm: one binary, many subcommands. main only parses and dispatches;
// every bad input ends as one line on stderr and exit code 2.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli_aliases.h"
#include "command_registry.h"
#include "util/check.h"

int main(int argc, char** argv) {
  CLI::App app{"parallm: serve LLMs across devices and decide how"};
  app.set_version_flag("--version", "parallm " PARALLM_VERSION " (commit " PARALLM_GIT_COMMIT ")");
  app.require_subcommand(1);
  auto& commands = parallm::registered_commands();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, parallm::CommandAction>> actions;
  for (auto& spec : commands) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.description);
    actions.emplace_back(sub, spec.setup(*sub));
  }
  // vLLM's -tp / -pp / -dp and llama-server's -np / -ngl (apps/cli_aliases.h).
  std::vector<std::string> args = parallm::rewrite_dash_aliases(std::vector<std::string>(argv, argv + argc));
  parallm::set_process_args(args);
  std::vector<char*> arg_ptrs;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  try {
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    for (auto& [sub, action] : actions) {
      if (sub->parsed()) return action();
    }
  } catch (const parallm::InputError& e) {
    std::fprintf(stderr, "parallm: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "parallm: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    // Communication failures (a lost or stalled rank) and other runtime faults.
    std::fprintf(stderr, "parallm: error: %s\n", e.what());
    return 3;
  }
  return 0;
}
