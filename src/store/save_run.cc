#include "store/save_run.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>

#include "io/io.hpp"
#include "io/native/native_tail.hpp"

namespace opsight::store {

namespace {

// OPSIGHT_KEEP_RUNS after a save; a bad value is a note, never a failure.
void apply_keep_runs_variable(RunStore& runs, std::vector<std::string>& notes) {
  const char* value = std::getenv("OPSIGHT_KEEP_RUNS");
  if (value == nullptr || *value == '\0') return;
  char* end = nullptr;
  errno = 0;
  unsigned long long keep = std::strtoull(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || value[0] == '-') {
    notes.push_back(std::string("warning: OPSIGHT_KEEP_RUNS=") + value +
                    " is not a whole number: keeping every run");
    return;
  }
  if (keep == 0) return;  // 0 keeps every run, as 0 means "all" elsewhere (--limit 0)
  RetentionPolicy policy;
  policy.keep_last = keep;
  auto removed = runs.apply_retention(policy);
  if (!removed.ok()) {
    notes.push_back("warning: OPSIGHT_KEEP_RUNS: " + removed.error());
    return;
  }
  if (removed.value() > 0)
    notes.push_back("OPSIGHT_KEEP_RUNS=" + std::to_string(keep) + ": removed " +
                    std::to_string(removed.value()) + " older run" +
                    (removed.value() == 1 ? "" : "s"));
}

// The run's metadata: the host's, then what the request and the trace (its command line
// and host, when it recorded them) say.
RunMetadata run_metadata(const SaveRequest& request, std::string default_name,
                         const std::string& recorded_command, const std::string& recorded_host) {
  std::error_code error;
  std::string directory = request.working_directory;
  if (directory.empty()) directory = std::filesystem::current_path(error).string();
  RunMetadata metadata = collect_host_metadata(directory);
  metadata.name = !request.name.empty() ? request.name : std::move(default_name);
  metadata.command = !request.command.empty() ? request.command : recorded_command;
  if (!recorded_host.empty()) metadata.host = recorded_host;
  metadata.versions.insert(metadata.versions.end(), request.versions.begin(),
                           request.versions.end());
  metadata.extra.insert(metadata.extra.end(), request.extra.begin(), request.extra.end());
  metadata.tags = request.tags;
  return metadata;
}

// Opens the request's store, adds the run with `add`, then applies OPSIGHT_KEEP_RUNS.
template <typename AddRun>
SaveOutcome save_with(const SaveRequest& request, std::vector<std::string> damage,
                      const AddRun& add) {
  SaveOutcome outcome;
  outcome.damage = std::move(damage);
  outcome.store_path = request.store_path.empty() ? RunStore::default_path() : request.store_path;
  auto opened = RunStore::open(outcome.store_path);
  if (!opened.ok()) {
    outcome.error = opened.error();
    return outcome;
  }
  RunStore& runs = *opened.value();
  Result<RunRecord> saved = add(runs);
  if (!saved.ok()) {
    outcome.error = saved.error();
    return outcome;
  }
  outcome.run = std::move(saved.value());
  apply_keep_runs_variable(runs, outcome.notes);
  return outcome;
}

SaveOutcome save(const trace::Trace& trace, const SaveRequest& request, std::string default_name,
                 std::vector<std::string> damage) {
  RunMetadata metadata =
      run_metadata(request, std::move(default_name), trace.run.command_line, trace.run.host);
  return save_with(request, std::move(damage),
                   [&](RunStore& runs) { return runs.add(trace, metadata); });
}

// What the runs table and the metadata take from a native file, by one streaming pass
// (the streaming summary's set-up: the tail timed on the file's first and last syncs).
struct ScannedNativeFile {
  TraceFacts facts;
  std::string command_line, host;
  std::optional<std::string> error, damage;
};

ScannedNativeFile scan_native_file(const std::string& path) {
  ScannedNativeFile scanned;
  io::FileClock clock;
  if (auto problem = io::scan_file_clock(path, &clock)) {
    scanned.error = *problem;
    return scanned;
  }
  io::NativeTail tail(path);
  if (clock.found) tail.use_clock(clock.first, clock.last);
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  uint64_t slices = 0;
  io::TailVisitor visitor;
  visitor.on_span = [&](const io::EndedSpan& span) {
    ++slices;
    first = std::min(first, span.start_unix_ns);
    last = std::max(last, span.end_unix_ns);
  };
  visitor.on_instant = [&](const io::TailInstant& instant) {
    first = std::min(first, instant.unix_ns);
    last = std::max(last, instant.unix_ns);
  };
  visitor.on_counter_sample = [&](const io::TailCounterSample& sample) {
    first = std::min(first, sample.unix_ns);
    last = std::max(last, sample.unix_ns);
  };
  if (!tail.poll(visitor)) {
    scanned.error = tail.error();
    return scanned;
  }
  tail.finish(visitor);
  if (!tail.finished())
    scanned.damage = path + ": at byte " + std::to_string(tail.bytes_read()) +
                     ": the recording has no end (saved up to there)";
  scanned.facts.slice_count = slices;
  scanned.facts.duration_ns = first > last ? 0 : last - first;
  if (clock.found) scanned.facts.start_unix_ns = clock.first.realtime_ns;
  // As the whole-file reader, the last value of a key wins.
  for (const auto& [key, value] : tail.run_info()) {
    if (key == "command_line")
      scanned.command_line = value;
    else if (key == "host")
      scanned.host = value;
  }
  return scanned;
}

}  // namespace

SaveOutcome save_trace_files(const SaveRequest& request) {
  if (request.files.empty()) {
    SaveOutcome outcome;
    outcome.error = "no trace file to save";
    return outcome;
  }
  // One large native file is copied in as it is, never read into memory.
  if (request.files.size() == 1 &&
      io::format_from_path(request.files[0]) == io::FileFormat::kNative) {
    std::error_code size_error;
    const uint64_t bytes = std::filesystem::file_size(request.files[0], size_error);
    if (!size_error && bytes >= OpenOptions{}.file_threshold_bytes)
      return save_native_file(request);
  }
  io::ReadFilesResult read = io::read_trace_files(request.files);
  if (!read.ok()) {
    SaveOutcome outcome;
    outcome.error = *read.error;
    return outcome;
  }
  return save(read.trace, request, std::filesystem::path(request.files[0]).stem().string(),
              std::move(read.damage));
}

SaveOutcome save_native_file(const SaveRequest& request) {
  if (request.files.size() != 1) {
    SaveOutcome outcome;
    outcome.error = "save_native_file saves one native file (" +
                    std::to_string(request.files.size()) + " given)";
    return outcome;
  }
  const std::string& path = request.files[0];
  ScannedNativeFile scanned = scan_native_file(path);
  if (scanned.error) {
    SaveOutcome outcome;
    outcome.error = *scanned.error;
    return outcome;
  }
  RunMetadata metadata = run_metadata(request, std::filesystem::path(path).stem().string(),
                                      scanned.command_line, scanned.host);
  std::vector<std::string> damage;
  if (scanned.damage) damage.push_back(*scanned.damage);
  return save_with(request, std::move(damage), [&](RunStore& runs) {
    return runs.add_native_file(path, scanned.facts, metadata);
  });
}

SaveOutcome save_trace(const trace::Trace& trace, const SaveRequest& request) {
  return save(trace, request, "profile", {});
}

}  // namespace opsight::store
