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

// What says two loaded traces ran on different hardware, one line each ("cpu: A | B"):
// for stored runs their host, CPU and GPU, and the facts remote workers reported
// (worker.N.host, cpu_model, cpu_count, memory_bytes, gpus, nvidia_driver, cuda tags,
// matched by the worker's worker.N.spec so that numbering does not matter); for files, the
// hosts the traces name. Empty: nothing known differs.
std::vector<std::string> machine_differences(const LoadedTrace& a, const LoadedTrace& b);

}  // namespace opsight::store
