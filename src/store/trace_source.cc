#include "store/trace_source.hpp"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "io/io.hpp"
#include "store/run_json.hpp"
#include "store/run_store.hpp"

namespace opsight::store {

namespace {

// Whether `argument` is read as a trace file rather than looked up as a run: a path
// ("runs/a.json", "x.opsight") is never a run reference (a missing one is reported as the
// file error it is), and an existing file is a file; a directory that happens to carry a
// run's name ("base/") is not.
bool names_a_file(const std::string& argument) {
  std::error_code error;
  const bool looks_like_path = argument.find('/') != std::string::npos ||
                               io::format_from_path(argument).has_value() ||
                               argument.ends_with(".gz");
  return looks_like_path || (std::filesystem::exists(argument, error) &&
                             !std::filesystem::is_directory(argument, error));
}

}  // namespace

StoredRunFile StoredRunFile::open(const std::string& argument, const std::string& store_path,
                                  uint64_t min_bytes) {
  StoredRunFile file;
  std::error_code error;
  if (argument.empty() || names_a_file(argument)) return file;
  // Asked for any size (--stream on), a reference that names no run is the error it is.
  auto unresolved = [&](std::string problem) {
    if (min_bytes == 0) file.error_ = std::move(problem);
    return std::move(file);
  };
  const std::string path = store_path.empty() ? RunStore::default_path() : store_path;
  if (!std::filesystem::exists(path, error))
    return unresolved(argument + ": no such file, and no run store at " + path +
                      " to look it up as a run");
  OpenOptions options;
  options.create = false;
  auto opened = RunStore::open(path, options);
  if (!opened.ok()) return unresolved(opened.error());
  RunStore& runs = *opened.value();
  auto run = runs.resolve(argument);
  if (!run.ok()) return unresolved(argument + ": no such file, and " + run.error());
  if (run.value().trace_bytes < min_bytes) return file;
  file.label_ = run_label(run.value());
  std::string problem;
  file.fd_ = runs.open_native_scratch(run.value().id, &problem);
  if (file.fd_ < 0) {
    file.error_ = problem;
    return file;
  }
  file.path_ = RunStore::descriptor_path(file.fd_);
  return file;
}

StoredRunFile::StoredRunFile(StoredRunFile&& other) noexcept
    : fd_(other.fd_),
      path_(std::move(other.path_)),
      label_(std::move(other.label_)),
      error_(std::move(other.error_)) {
  other.fd_ = -1;
  other.path_.clear();
}

StoredRunFile::~StoredRunFile() {
  if (fd_ >= 0) ::close(fd_);
}

LoadedTrace load_trace_argument(const std::string& argument, const std::string& store_path) {
  LoadedTrace loaded;
  if (argument.empty()) {
    loaded.error = "an empty argument names neither a trace file nor a run";
    loaded.exit_status = kExitUsage;
    return loaded;
  }
  std::error_code error;
  if (names_a_file(argument)) {
    loaded.label = std::filesystem::path(argument).filename().string();
    io::ReadResult read = io::read_trace_file(argument);
    if (!read.ok()) {
      loaded.error = read.error->to_string(argument);
      loaded.exit_status = kExitError;
      return loaded;
    }
    if (read.damage) {
      loaded.damage.push_back(read.damage->to_string(argument));
      loaded.exit_status = kExitDamaged;
    }
    loaded.trace = std::move(read.trace);
    return loaded;
  }

  std::string path = store_path.empty() ? RunStore::default_path() : store_path;
  if (!std::filesystem::exists(path, error)) {
    loaded.error =
        argument + ": no such file, and no run store at " + path + " to look it up as a run";
    loaded.exit_status = kExitError;
    return loaded;
  }
  OpenOptions options;
  options.create = false;
  auto opened = RunStore::open(path, options);
  if (!opened.ok()) {
    loaded.error = opened.error();
    loaded.exit_status = kExitError;
    return loaded;
  }
  RunStore& runs = *opened.value();
  if (runs.damage()) {
    loaded.damage.push_back(path + ": the run store is damaged (" + *runs.damage() +
                            "): reading what is left");
    loaded.exit_status = kExitDamaged;
  }
  auto run = runs.resolve(argument);
  if (!run.ok()) {
    loaded.error = argument + ": no such file, and " + run.error();
    loaded.exit_status = kExitError;
    return loaded;
  }
  const RunRecord& record = run.value();
  loaded.label = run_label(record);
  loaded.run = record;
  io::ReadResult read = runs.load_trace(record.id);
  if (!read.ok()) {
    loaded.error = read.error->message;
    loaded.exit_status = kExitError;
    return loaded;
  }
  if (read.damage) {
    loaded.damage.push_back(read.damage->message);
    loaded.exit_status = kExitDamaged;
  }
  loaded.trace = std::move(read.trace);
  return loaded;
}

namespace {

// worker spec -> (fact -> value), from a run's worker.N.* tags.
std::map<std::string, std::map<std::string, std::string>> worker_facts(const RunRecord& run) {
  static const std::set<std::string> kHardware = {
      "host", "cpu_model", "cpu_count", "memory_bytes", "gpus", "nvidia_driver", "cuda"};
  std::map<std::string, std::string> spec_of;  // "worker.3." -> its spec
  for (const auto& [key, value] : run.metadata.tags)
    if (key.starts_with("worker.") && key.ends_with(".spec"))
      spec_of[key.substr(0, key.size() - 4)] = value;
  std::map<std::string, std::map<std::string, std::string>> facts;
  for (const auto& [key, value] : run.metadata.tags) {
    if (!key.starts_with("worker.")) continue;
    size_t dot = key.find('.', 7);
    if (dot == std::string::npos) continue;
    auto spec = spec_of.find(key.substr(0, dot + 1));
    std::string fact = key.substr(dot + 1);
    if (spec != spec_of.end() && kHardware.count(fact) != 0) facts[spec->second][fact] = value;
  }
  return facts;
}

}  // namespace

std::vector<std::string> machine_differences(const LoadedTrace& a, const LoadedTrace& b) {
  std::vector<std::string> lines;
  auto differ = [&](const std::string& what, const std::string& left, const std::string& right) {
    if (left != right && !left.empty() && !right.empty())
      lines.push_back(what + ": " + left + " | " + right);
  };
  if (!a.run || !b.run) {
    differ("host", a.trace.run.host, b.trace.run.host);
    return lines;
  }
  const RunMetadata& left = a.run->metadata;
  const RunMetadata& right = b.run->metadata;
  differ("host", left.host, right.host);
  differ("cpu", left.cpu, right.cpu);
  differ("gpu", left.gpu, right.gpu);
  auto left_workers = worker_facts(*a.run);
  auto right_workers = worker_facts(*b.run);
  for (const auto& [spec, facts] : left_workers) {
    auto other = right_workers.find(spec);
    if (other == right_workers.end()) continue;
    for (const auto& [fact, value] : facts) {
      auto found = other->second.find(fact);
      if (found != other->second.end()) differ(spec + " " + fact, value, found->second);
    }
  }
  return lines;
}

}  // namespace opsight::store
