// The trace file formats opsight reads and writes, and the extensions that name them: the
// one table every front end reads (io::format_from_path, `opsight convert`, a session's
// output, and through the Python binding `opsight run -o` and opsight.profile's output).
// Header-only and constant: safe from any thread.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "io/io.hpp"

namespace opsight::io {

struct TraceFileFormat {
  FileFormat format;
  std::string_view name;         // as the Python package names it: "native", "chrome_json"...
  std::string_view description;  // "Chrome trace JSON"
  // The extensions that name the format; the first is the one opsight writes it as.
  std::span<const std::string_view> extensions;
};

inline constexpr std::array<std::string_view, 1> kNativeExtensions = {".opsight"};
inline constexpr std::array<std::string_view, 1> kChromeJsonExtensions = {".json"};
inline constexpr std::array<std::string_view, 2> kPerfettoExtensions = {".pftrace",
                                                                        ".perfetto-trace"};

inline constexpr std::array<TraceFileFormat, 3> kTraceFileFormats = {{
    {FileFormat::kNative, "native", "opsight native", kNativeExtensions},
    {FileFormat::kChromeJson, "chrome_json", "Chrome trace JSON", kChromeJsonExtensions},
    {FileFormat::kPerfetto, "perfetto", "Perfetto protobuf", kPerfettoExtensions},
}};

// The extension a session streams into while it converts at stop ("run.pftrace" records
// into "run.pftrace.opsight.tmp"): native, but never a name a user gives.
inline constexpr std::string_view kNativeStreamExtension = ".opsight.tmp";

// The format's row of the table.
constexpr const TraceFileFormat& trace_file_format(FileFormat format) {
  for (const TraceFileFormat& row : kTraceFileFormats)
    if (row.format == format) return row;
  return kTraceFileFormats[0];
}

// ".opsight, .json or .pftrace": the extensions a trace is written as, for messages.
inline std::string written_extensions() {
  std::string text;
  for (size_t index = 0; index < kTraceFileFormats.size(); ++index) {
    if (index > 0) text += index + 1 == kTraceFileFormats.size() ? " or " : ", ";
    text += kTraceFileFormats[index].extensions.front();
  }
  return text;
}

// "PATH: unknown output format (use .opsight, .json or .pftrace)".
inline std::string unknown_output_format(std::string_view path) {
  return std::string(path) + ": unknown output format (use " + written_extensions() + ")";
}

}  // namespace opsight::io
