// A stored run's record as the command line and the web UI show it: the JSON object of
// `opsight runs --format json`, `opsight show --format json` ("run") and the UI's
// /api/runs, and the label reports put in their headers ("run 12 (nightly)"). One form,
// so a script reading either sees the same fields.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "store/run_store.hpp"

namespace opsight::store {

// id, uuid, name, created (UTC text), created_unix_ns, trace_start_unix_ns, command,
// working_directory, git_commit, host, cpu, gpu, versions, tags, extra (objects), slices,
// duration_ns, source_format, trace_bytes, stored_bytes; in that order.
nlohmann::ordered_json run_record_json(const RunRecord& run);

// "run 12 (nightly)", or "run 12" for an unnamed run.
std::string run_label(const RunRecord& run);

// A Unix time in ns as "2024-05-01T13:30:00Z".
std::string utc_time_text(int64_t unix_ns);

}  // namespace opsight::store
