// opsight._native's trace files (src/io): read one, merge one run's files, read native bytes
// from memory, write a trace in the format its path names; the formats and their extensions
// (io/trace_formats.hpp's table, which opsight run and the recordings read).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "io/io.hpp"
#include "io/time_window.hpp"
#include "io/trace_formats.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

// A reader's result as a Python Trace named `name`: ValueError when nothing was read.
store::LoadedTrace from_read_result(io::ReadResult result, const std::string& name) {
  if (result.error) throw std::invalid_argument(result.error->to_string(name));
  store::LoadedTrace loaded;
  loaded.trace = std::move(result.trace);
  loaded.label = name;
  if (result.damage) loaded.damage.push_back(result.damage->to_string(name));
  return loaded;
}

// opsight.load(source, window="2.5s:3s"): the window parsed by the core's parser (that of
// `--window`), a trace file read through its time index (a native file decodes only the
// chunks the window needs), a run of the store read whole then cut, as `opsight report
// --window` does. ValueError for a bad window or nothing read.
store::LoadedTrace load_window_source(const std::string& source, const std::string& window_text,
                                      const std::string& store_path) {
  std::string problem;
  auto window = io::parse_time_window(window_text, &problem);
  if (!window) {
    if (problem.rfind("--window ", 0) == 0) problem = "window=" + problem.substr(9);
    throw std::invalid_argument(problem);
  }
  std::error_code error;
  if (std::filesystem::is_regular_file(source, error)) {
    store::LoadedTrace loaded = from_read_result(io::read_trace_file(source, *window), source);
    loaded.label = std::filesystem::path(source).filename().string();
    return loaded;
  }
  store::LoadedTrace loaded = store::load_trace_argument(source, store_path);
  if (!loaded.ok()) throw std::invalid_argument(*loaded.error);
  int64_t start = loaded.trace.time_bounds().first;
  auto plus = [](int64_t a, int64_t b) {
    int64_t sum = 0;
    return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<int64_t>::max() : sum;
  };
  trace::keep_time_window(loaded.trace, plus(start, window->from_ns), plus(start, window->to_ns),
                          trace::WindowRule::kOverlaps);
  return loaded;
}

}  // namespace

void bind_io(nb::module_& m, TraceClass& trace_class) {
  trace_class.def(
      "write",
      [](const store::LoadedTrace& loaded, const std::string& path) {
        if (auto error = io::write_trace_file(loaded.trace, path)) throw std::runtime_error(*error);
      },
      nb::arg("path"));

  m.def(
      "read_trace",
      [](const std::string& path) { return from_read_result(io::read_trace_file(path), path); },
      nb::arg("path"), "Reads a .opsight or Chrome JSON file.");
  m.def("load_window", &load_window_source, nb::arg("source"), nb::arg("window"),
        nb::arg("store_path") = "", nb::call_guard<nb::gil_scoped_release>(),
        "A trace file or a run of the store cut to a window (FROM:TO, as --window): a native "
        "file decodes only the chunks the window needs.");
  m.def(
      "merge_trace_files",
      [](const std::vector<std::string>& paths, const std::string& name) {
        io::ReadFilesResult result = io::read_trace_files(paths);
        if (result.error) throw std::invalid_argument(*result.error);
        store::LoadedTrace loaded;
        loaded.trace = std::move(result.trace);
        loaded.label = name;
        if (!result.damage.empty()) {
          std::string damage = result.damage.front();
          if (result.damage.size() > 1)
            damage += " (and " + std::to_string(result.damage.size() - 1) + " more file" +
                      (result.damage.size() > 2 ? "s" : "") + " like it)";
          loaded.damage.push_back(std::move(damage));
        }
        return loaded;
      },
      nb::arg("paths"), nb::arg("name") = "run",
      "Reads the files of one run's processes and merges them into one trace.");
  m.def(
      "merge_native_files",
      [](const std::vector<std::string>& paths, const std::string& output,
         const std::vector<std::pair<std::string, std::string>>& run_info) {
        io::MergeFilesResult result;
        std::optional<std::string> write_error;
        {
          nb::gil_scoped_release release;
          io::FileSink sink(output);
          result = io::merge_native_files(paths, sink, run_info);
          write_error = result.error ? sink.error() : sink.commit();
        }
        if (write_error) throw std::runtime_error(*write_error);
        if (result.error) throw std::invalid_argument(*result.error);
        return result.damage;
      },
      nb::arg("paths"), nb::arg("output"),
      nb::arg("run_info") = std::vector<std::pair<std::string, std::string>>{},
      "Merges the .opsight files of one run's processes into the .opsight file `output`, "
      "in memory bounded by a constant (io::merge_native_files): reading it gives what "
      "merge_trace_files gives. Returns a message per damaged file; ValueError when a file "
      "cannot be used, RuntimeError when the output cannot be written. `run_info`: (key, "
      "value) pairs added to the merged run info, each replacing its key's.");
  m.def(
      "trace_from_native_bytes",
      [](nb::bytes bytes, const std::string& name) {
        return from_read_result(
            io::read_native(std::string_view(static_cast<const char*>(bytes.data()), bytes.size())),
            name);
      },
      nb::arg("bytes"), nb::arg("name") = "profile");

  m.def(
      "trace_file_formats",
      [] {
        nb::list formats;
        for (const io::TraceFileFormat& row : io::kTraceFileFormats) {
          nb::dict entry;
          entry["name"] = std::string(row.name);
          entry["description"] = std::string(row.description);
          nb::list extensions;
          for (std::string_view extension : row.extensions)
            extensions.append(nb::str(extension.data(), extension.size()));
          entry["extensions"] = extensions;
          formats.append(entry);
        }
        return formats;
      },
      "The trace file formats: {name, description, extensions} each, the first extension "
      "the one a trace is written as (io/trace_formats.hpp).");
  m.def(
      "trace_format_of_path",
      [](std::string_view path) -> std::optional<std::string> {
        std::optional<io::FileFormat> format = io::format_from_path(path);
        if (!format) return std::nullopt;
        return std::string(io::trace_file_format(*format).name);
      },
      nb::arg("path"), "The name of the format a path's extension names, or None.");
  m.def("written_trace_extensions", &io::written_extensions,
        "\".opsight, .json or .pftrace\": the extensions a trace is written as, for messages.");
}

}  // namespace opsight::python
