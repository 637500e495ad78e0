// opsight._native's trace files (src/io): read one, merge one run's files, read native bytes
// from memory, write a trace in the format its path names.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "io/io.hpp"

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
      "trace_from_native_bytes",
      [](nb::bytes bytes, const std::string& name) {
        return from_read_result(
            io::read_native(std::string_view(static_cast<const char*>(bytes.data()), bytes.size())),
            name);
      },
      nb::arg("bytes"), nb::arg("name") = "profile");
}

}  // namespace opsight::python
