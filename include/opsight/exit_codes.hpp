// The exit statuses of every `opsight` command, C++'s and Python's alike, for scripts and
// CI jobs that run it. kExitStatuses is the one table: the Python package reads it through
// its binding (python/opsight/exit_codes.py), so both halves of the command exit with the
// same numbers.
//   kExitOk          ok
//   kExitError       unusable input (a missing file, an unknown run) or a failed check
//   kExitDamaged     damaged input: what was whole before the damage was used
//   kExitRegression  a regression or a bound not held (compare, bench's p99 bound)
//   kExitUsage       bad usage: an unknown command, option or value
//   kExitExportIncomplete  `opsight run`: the program succeeded, but an export dropped
//                    spans (sysexits' EX_TEMPFAIL: try again); --allow-export-drops keeps 0
#pragma once

#include <array>
#include <string_view>

namespace opsight {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitDamaged = 2;
inline constexpr int kExitRegression = 3;
inline constexpr int kExitUsage = 64;
inline constexpr int kExitExportIncomplete = 75;

// One exit status: the name the Python package gives it (opsight.exit_codes.USAGE_ERROR),
// its number, and what it means, in one line for a command's help.
struct ExitStatus {
  std::string_view name;
  int code;
  std::string_view meaning;
};

inline constexpr std::array<ExitStatus, 6> kExitStatuses = {{
    {"OK", kExitOk, "ok"},
    {"ERROR", kExitError,
     "unusable input (a missing file, an unknown run, a model that cannot load) or a failed "
     "check"},
    {"DAMAGED", kExitDamaged, "damaged input: the part before the damage was used"},
    {"REGRESSION", kExitRegression,
     "a regression or a bound not held (compare --fail-on-regression, bench's p99)"},
    {"USAGE_ERROR", kExitUsage, "bad usage: an unknown command, option or value"},
    {"EXPORT_INCOMPLETE", kExitExportIncomplete,
     "opsight run: the program exited 0 but an export dropped spans (sysexits' EX_TEMPFAIL: "
     "try again); --allow-export-drops keeps 0"},
}};

}  // namespace opsight
