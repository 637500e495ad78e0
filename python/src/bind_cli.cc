// opsight._native's vocabularies of the `opsight` command, shared by its C++ half (src/cli)
// and its Python half (opsight._cli): the exit statuses (include/opsight/exit_codes.hpp's
// kExitStatuses), which opsight.exit_codes reads, and the C++ half's commands with their
// lines of the overview help (cli/commands.hpp's kCoreCommands), which opsight._cli
// dispatches by and prints.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "cli/commands.hpp"
#include "opsight/exit_codes.hpp"

namespace nb = nanobind;

namespace opsight::python {

void bind_cli(nb::module_& m) {
  m.def(
      "exit_statuses",
      [] {
        std::vector<std::tuple<std::string, int, std::string>> statuses;
        for (const ExitStatus& status : kExitStatuses)
          statuses.emplace_back(status.name, status.code, status.meaning);
        return statuses;
      },
      "Every opsight command's exit statuses, (name, code, meaning), in the core's order.");
  m.def(
      "core_commands",
      [] {
        std::vector<std::tuple<std::string, std::string>> commands;
        for (const cli::CoreCommand& command : cli::kCoreCommands)
          commands.emplace_back(command.name, command.overview);
        return commands;
      },
      "The C++ half's commands, (name, overview help), in `opsight --help`'s order.");
}

}  // namespace opsight::python
