// Where a trace comes from: a trace file, or a run in the run store. The one rule for
// `opsight report`/`compare`/`show`, the Python package's opsight.load and the web UI.
//
// Contract of load_trace_argument(argument, store_path):
//   - `argument` naming an existing path, or looking like one (it holds a '/' or ends in
//     .opsight, .json or .gz), is read as a trace file (io::read_trace_file): label = the
//     file's name ("run.opsight"); a missing file is the reader's error ("x.json: cannot
//     open: No such file or directory").
//   - Otherwise it is a run reference (docs/store.md): a numeric id, "latest",
//     "latest~N", a uuid prefix or a run's exact name, resolved in the store at
//     `store_path` (empty: RunStore::default_path(), i.e. $OPSIGHT_HOME or ~/.opsight);
//     label = "run 12 (name)" ("run 12" when unnamed). The store is never created here.
//   - exit_status: 0 the trace is whole; 2 (kDamaged) it was read only in part: `trace`
//     holds what was whole and `damage` has one message per damaged input; 1 (kUnusable)
//     nothing usable: `error` says why in one line naming the file or the run ("x.json:
//     no such file, and no run 'x.json' in /home/u/.opsight/runs.db"); 64 (kUsage) an
//     empty argument. Same codes as every opsight command (opsight/exit_codes.hpp).
//   - Nothing is printed: the caller prints `error` ("opsight: error: ...") and each
//     `damage` ("opsight: warning: ... (showing what was read before it)").
//
// Thread-safety: none needed; each call opens and closes its own store connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "opsight/exit_codes.hpp"
#include "store/run_store.hpp"
#include "trace/trace.hpp"

namespace opsight::store {

struct LoadedTrace {
  trace::Trace trace;
  std::string label;                 // "run.opsight" or "run 12 (nightly)"
  std::optional<std::string> error;  // set when nothing usable was read
  std::vector<std::string> damage;   // one line per damaged input
  int exit_status = kExitOk;         // 0, 1, 2 or 64 as above (opsight/exit_codes.hpp)
  std::optional<RunRecord> run;      // set when the argument named a stored run

  bool ok() const { return !error.has_value(); }
};

LoadedTrace load_trace_argument(const std::string& argument, const std::string& store_path = {});

// A stored run's trace as a native file, for a reader that streams it (`opsight report
// latest --summary` of a run of hours): when `argument` names a run by the rule above (not
// a file, nor what looks like one) whose native trace is at least `min_bytes`, its trace is
// written to an unnamed scratch file of the store's traces folder
// (RunStore::open_native_scratch: a trace kept as a file is decompressed a MiB at a time),
// which path() opens ("/proc/self/fd/N") and which is gone when this is destroyed or the
// process ends, however it ends. path() empty: the argument is not such a run (the caller reads it
// as usual, and load_trace_argument says what is wrong, if anything); error() set: the run's trace
// could not be written (naming the run), or, asked for any size (min_bytes 0), the argument names
// no run (load_trace_argument's message).
class StoredRunFile {
 public:
  static StoredRunFile open(const std::string& argument, const std::string& store_path,
                            uint64_t min_bytes);
  StoredRunFile() = default;
  StoredRunFile(StoredRunFile&& other) noexcept;
  StoredRunFile& operator=(StoredRunFile&&) = delete;
  StoredRunFile(const StoredRunFile&) = delete;
  ~StoredRunFile();

  const std::string& path() const { return path_; }
  const std::string& label() const { return label_; }  // "run 12 (nightly)"
  const std::optional<std::string>& error() const { return error_; }

 private:
  int fd_ = -1;  // the scratch file's descriptor
  std::string path_, label_;
  std::optional<std::string> error_;
};

// What says two loaded traces ran on different hardware, one line each ("cpu: A | B"):
// for stored runs their host, CPU and GPU, and the facts remote workers reported
// (worker.N.host, cpu_model, cpu_count, memory_bytes, gpus, nvidia_driver, cuda tags,
// matched by the worker's worker.N.spec so that numbering does not matter); for files, the
// hosts the traces name. Empty: nothing known differs.
std::vector<std::string> machine_differences(const LoadedTrace& a, const LoadedTrace& b);

}  // namespace opsight::store
