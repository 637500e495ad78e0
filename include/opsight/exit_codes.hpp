// The exit statuses of every `opsight` command, C++'s and Python's alike, for scripts and
// CI jobs that run it (the Python package's table is python/opsight/_cli/exit_codes.py; a
// test checks that they agree):
//   kExitOk          ok
//   kExitError       unusable input (a missing file, an unknown run) or a failed check
//   kExitDamaged     damaged input: what was whole before the damage was used
//   kExitRegression  a regression or a bound not held (compare, bench's p99 bound)
//   kExitUsage       bad usage: an unknown command, option or value
//   kExitExportIncomplete  `opsight run`: the program succeeded, but an export dropped
//                    spans (sysexits' EX_TEMPFAIL: try again); --allow-export-drops keeps 0
#pragma once

namespace opsight {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitDamaged = 2;
inline constexpr int kExitRegression = 3;
inline constexpr int kExitUsage = 64;
inline constexpr int kExitExportIncomplete = 75;

}  // namespace opsight
