#include "store/save_run.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "io/io.hpp"

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

SaveOutcome save(const trace::Trace& trace, const SaveRequest& request, std::string default_name,
                 std::vector<std::string> damage) {
  SaveOutcome outcome;
  outcome.damage = std::move(damage);
  outcome.store_path = request.store_path.empty() ? RunStore::default_path() : request.store_path;
  std::error_code error;
  std::string directory = request.working_directory;
  if (directory.empty()) directory = std::filesystem::current_path(error).string();
  RunMetadata metadata = collect_host_metadata(directory);
  metadata.name = !request.name.empty() ? request.name : std::move(default_name);
  metadata.command = !request.command.empty() ? request.command : trace.run.command_line;
  if (!trace.run.host.empty()) metadata.host = trace.run.host;
  metadata.versions.insert(metadata.versions.end(), request.versions.begin(),
                           request.versions.end());
  metadata.extra.insert(metadata.extra.end(), request.extra.begin(), request.extra.end());
  metadata.tags = request.tags;

  auto opened = RunStore::open(outcome.store_path);
  if (!opened.ok()) {
    outcome.error = opened.error();
    return outcome;
  }
  RunStore& runs = *opened.value();
  auto saved = runs.add(trace, metadata);
  if (!saved.ok()) {
    outcome.error = saved.error();
    return outcome;
  }
  outcome.run = std::move(saved.value());
  apply_keep_runs_variable(runs, outcome.notes);
  return outcome;
}

}  // namespace

SaveOutcome save_trace_files(const SaveRequest& request) {
  if (request.files.empty()) {
    SaveOutcome outcome;
    outcome.error = "no trace file to save";
    return outcome;
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

SaveOutcome save_trace(const trace::Trace& trace, const SaveRequest& request) {
  return save(trace, request, "profile", {});
}

}  // namespace opsight::store
