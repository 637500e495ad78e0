// The commands of `opsight`'s C++ half (each registered by its own file of src/cli/), with
// the lines `opsight --help` gives each in its overview: the one list the Python half
// (opsight._cli) dispatches by and prints, through the binding. A line after the first is
// a continuation, indented by the printer. Header-only and constant: safe from any thread.
#pragma once

#include <array>
#include <string_view>

namespace opsight::cli {

struct CoreCommand {
  std::string_view name;
  std::string_view overview;
};

inline constexpr std::array<CoreCommand, 11> kCoreCommands = {{
    {"report",
     "Report a trace file or a stored run: --summary, --tree, --table, --merged-tree,\n"
     "--breakdown SPAN, --ops, --critical-path, --metrics (counter tracks, span metrics)"},
    {"compare",
     "Compare two runs or files per span and code path: opsight compare A B "
     "--fail-on-regression 5%"},
    {"export",
     "Send runs to OpenTelemetry (OTLP/HTTP), Zipkin or a Pushgateway:\n"
     "opsight export latest --to otlp=http://127.0.0.1:4318 (docs/export.md)"},
    {"devices", "List the GPUs: memory, utilization, temperature, power, health (docs/devices.md)"},
    {"convert", "Convert between .opsight, Chrome JSON and Perfetto protobuf (.pftrace)"},
    {"index",
     "Write the time index a .opsight file lacks (a process killed with SIGKILL), so that\n"
     "--window reads only the chunks it needs: opsight index run.opsight"},
    {"save", "Store trace file(s) as a run in the run store ($OPSIGHT_HOME, default ~/.opsight)"},
    {"runs", "List the stored runs: --name GLOB, --tag K[=V], --since 7d, --format json"},
    {"show", "Show a stored run's metadata and report: opsight show latest --tree"},
    {"rm", "Remove stored runs: opsight rm RUN..., --keep-last N, --older-than 30d"},
    {"ui",
     "The web UI over the stored runs (or trace files): runs, overview, timeline,\n"
     "call tree / flame graph, compare: opsight ui [RUN | FILE...] --open (docs/ui.md)"},
}};

}  // namespace opsight::cli
