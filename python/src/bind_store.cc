// opsight._native's run store (src/store): load (a trace file or a stored run, by the one
// rule of store/trace_source.hpp), save_trace_files and save_trace (store/save_run.hpp).

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "store/run_store.hpp"
#include "store/save_run.hpp"
#include "store/trace_source.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

// A trace file or a run of the store, by the one rule of store/trace_source.hpp: ValueError
// when nothing usable was read.
store::LoadedTrace load_source(const std::string& argument, const std::string& store_path) {
  store::LoadedTrace loaded = store::load_trace_argument(argument, store_path);
  if (!loaded.ok()) throw std::invalid_argument(*loaded.error);
  return loaded;
}

store::KeyValues key_values(const std::vector<std::pair<std::string, std::string>>& pairs) {
  return store::KeyValues(pairs.begin(), pairs.end());
}

// store::save_trace(_files)'s outcome as a dict: {"run": {id, uuid, name, ...} or None,
// "store", "error", "damage", "notes"}.
nb::dict save_outcome(const store::SaveOutcome& outcome) {
  nb::dict result;
  if (outcome.run) {
    nb::dict run;
    run["id"] = outcome.run->id;
    run["uuid"] = outcome.run->uuid;
    run["name"] = outcome.run->metadata.name;
    run["slices"] = outcome.run->slice_count;
    run["duration_ns"] = outcome.run->duration_ns;
    run["created_unix_ns"] = outcome.run->created_unix_ns;
    run["command"] = outcome.run->metadata.command;
    run["git_commit"] = outcome.run->metadata.git_commit;
    run["host"] = outcome.run->metadata.host;
    nb::dict tags, versions;
    for (const auto& [key, value] : outcome.run->metadata.tags) tags[key.c_str()] = value;
    for (const auto& [key, value] : outcome.run->metadata.versions) versions[key.c_str()] = value;
    run["tags"] = tags;
    run["versions"] = versions;
    run["store"] = outcome.store_path;
    result["run"] = run;
  } else {
    result["run"] = nb::none();
  }
  result["store"] = outcome.store_path;
  if (outcome.error)
    result["error"] = *outcome.error;
  else
    result["error"] = nb::none();
  result["damage"] = outcome.damage;
  result["notes"] = outcome.notes;
  return result;
}

store::SaveRequest save_request(const std::string& store_path, const std::string& name,
                                const std::string& command, const std::string& working_directory,
                                const std::vector<std::pair<std::string, std::string>>& tags,
                                const std::vector<std::pair<std::string, std::string>>& versions) {
  store::SaveRequest request;
  request.store_path = store_path;
  request.name = name;
  request.command = command;
  request.working_directory = working_directory;
  request.tags = key_values(tags);
  request.versions = key_values(versions);
  return request;
}

}  // namespace

void bind_store(nb::module_& m) {
  m.def("load", &load_source, nb::arg("source"), nb::arg("store_path") = "",
        nb::call_guard<nb::gil_scoped_release>(),
        "Reads a trace file or a run of the store (store/trace_source.hpp's rule).");
  m.def(
      "save_trace_files",
      [](const std::vector<std::string>& files, const std::string& store_path,
         const std::string& name, const std::string& command, const std::string& working_directory,
         const std::vector<std::pair<std::string, std::string>>& tags,
         const std::vector<std::pair<std::string, std::string>>& versions, bool streaming) {
        store::SaveRequest request =
            save_request(store_path, name, command, working_directory, tags, versions);
        request.files = files;
        store::SaveOutcome outcome;
        {
          nb::gil_scoped_release release;
          outcome = streaming ? store::save_native_file(request) : store::save_trace_files(request);
        }
        return save_outcome(outcome);
      },
      nb::arg("files"), nb::arg("store_path") = "", nb::arg("name") = "", nb::arg("command") = "",
      nb::arg("working_directory") = "",
      nb::arg("tags") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("versions") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("streaming") = false,
      "Saves trace files (one run's processes, merged) as a run of the store; streaming: "
      "one native file saved as it is, never read into memory (store::save_native_file).");
  m.def(
      "save_trace",
      [](const store::LoadedTrace& loaded, const std::string& store_path, const std::string& name,
         const std::string& command, const std::string& working_directory,
         const std::vector<std::pair<std::string, std::string>>& tags,
         const std::vector<std::pair<std::string, std::string>>& versions) {
        store::SaveRequest request =
            save_request(store_path, name, command, working_directory, tags, versions);
        store::SaveOutcome outcome;
        {
          nb::gil_scoped_release release;
          outcome = store::save_trace(loaded.trace, request);
        }
        return save_outcome(outcome);
      },
      nb::arg("trace"), nb::arg("store_path") = "", nb::arg("name") = "", nb::arg("command") = "",
      nb::arg("working_directory") = "",
      nb::arg("tags") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("versions") = std::vector<std::pair<std::string, std::string>>{},
      "Saves a trace in memory as a run of the store.");
}

}  // namespace opsight::python
