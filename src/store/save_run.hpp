// Saving a recording as a run of the store, with the host's metadata: what `opsight save`,
// `opsight run`, `opsight.profile(store=True)`, `opsight bench` and the demo all do, in one
// place (the Python package calls it through its native module, never through the CLI).
//
//   opsight::store::SaveRequest request;
//   request.files = {"trace.123.opsight", "trace.124.opsight"};  // one run's processes
//   request.name = "nightly";
//   opsight::store::SaveOutcome saved = opsight::store::save_trace_files(request);
//   if (!saved.ok()) report(*saved.error);  // nothing was saved
//
// The metadata is the host's (collect_host_metadata: git commit, CPU, GPU, OS...) plus what
// the request gives; the name defaults to the first file's stem, the command to the one the
// trace recorded. After the save, OPSIGHT_KEEP_RUNS=N (N >= 1) keeps only the newest N runs
// (0 or unset: every run); what it removed, or why its value was ignored, is in `notes`.
//
// Nothing is printed and nothing throws (std::bad_alloc aside). Thread-safety: each call
// opens and closes its own store connection; calls may run on any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/run_store.hpp"
#include "trace/trace.hpp"

namespace opsight::store {

struct SaveRequest {
  std::vector<std::string> files;  // save_trace_files: the trace files of one run, merged
  std::string store_path;          // empty: RunStore::default_path()
  std::string name;                // empty: the first file's stem ("profile" in memory)
  std::string command;             // empty: the command line the trace recorded
  std::string working_directory;   // empty: the current directory (for the git commit)
  KeyValues tags;                  // user tags ("model" -> "resnet")
  KeyValues versions;              // package -> version, after the host's own
  KeyValues extra;                 // anything else ("--meta k=v")
};

struct SaveOutcome {
  std::optional<RunRecord> run;      // the saved run, unless `error`
  std::string store_path;            // the store it went to
  std::optional<std::string> error;  // nothing was saved: why, naming the file or store
  std::vector<std::string> damage;   // inputs read only in part (the rest was saved)
  std::vector<std::string> notes;    // OPSIGHT_KEEP_RUNS: what it removed, or "warning: ..."

  bool ok() const { return !error.has_value(); }
};

// Reads `request.files` (merged, as `opsight report` does) and saves them as one run; one
// native file of OpenOptions::file_threshold_bytes or more goes through save_native_file.
SaveOutcome save_trace_files(const SaveRequest& request);

// Saves one native .opsight file (`request.files[0]`: a run's processes already merged,
// as `opsight run --merge stream` writes it) as one run without reading it into memory:
// one streaming pass over the file counts its spans and finds its time bounds, its command
// and host (io::NativeTail, timed as the whole-file reader times it, so the runs table
// says what save_trace_files would), then RunStore::add_native_file copies it into the
// store compressed. Memory: the tail's window and its open spans, whatever the file's
// size. A file cut short (a crash) is saved as it is, with a `damage` line.
SaveOutcome save_native_file(const SaveRequest& request);

// Saves a trace already in memory (a profile's recording) as one run.
SaveOutcome save_trace(const trace::Trace& trace, const SaveRequest& request);

}  // namespace opsight::store
