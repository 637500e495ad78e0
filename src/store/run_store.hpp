// The run store: every run opsight keeps, with its metadata and its trace, in one SQLite
// file (`$OPSIGHT_HOME/runs.db`, default `~/.opsight/runs.db`). Layout, references,
// retention and damage behaviour: docs/store.md.
//
// Quick start:
//   auto opened = opsight::store::RunStore::open(opsight::store::RunStore::default_path());
//   if (!opened.ok()) { report(opened.error()); return; }
//   opsight::store::RunStore& store = *opened.value();
//   opsight::store::RunMetadata metadata = opsight::store::collect_host_metadata(cwd);
//   metadata.name = "nightly";
//   auto saved = store.add(trace, metadata);              // -> RunRecord (id, uuid, ...)
//   auto run = store.resolve("latest~1");                  // -> RunRecord or error
//   opsight::io::ReadResult loaded = store.load_trace(run.value().id);
//
// No function throws (std::bad_alloc aside): failures come back as one-line messages
// that name the store file or the run and say what SQLite or the decoder reported.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "io/io.hpp"
#include "trace/trace.hpp"

struct sqlite3;

namespace opsight::store {

// A value or a one-line error message.
template <typename T>
class Result {
 public:
  static Result success(T value) { return Result(std::move(value), std::string()); }
  static Result failure(std::string message) { return Result(std::nullopt, std::move(message)); }

  bool ok() const { return value_.has_value(); }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  const std::string& error() const { return error_; }

 private:
  Result(std::optional<T> value, std::string error)
      : value_(std::move(value)), error_(std::move(error)) {}
  std::optional<T> value_;
  std::string error_;
};

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// What is known about a run besides its trace. Every field may be empty.
struct RunMetadata {
  std::string name;               // what the user calls it ("nightly", "resnet bs=8")
  std::string command;            // the command line that ran
  std::string working_directory;  // where it ran
  std::string git_commit;         // HEAD of the working directory's repository, if any
  std::string host;               // host name
  std::string cpu;                // "MODEL, N logical CPUs"
  std::string gpu;                // "NVIDIA H100 80GB HBM3" (several: joined), "none"
  KeyValues versions;             // package -> version ("opsight", "python", "torch", ...)
  KeyValues tags;                 // user tags, filterable (`opsight runs --tag k=v`)
  KeyValues extra;                // anything else ("os", user `--meta k=v`)
};

// One stored run, without its trace.
struct RunRecord {
  int64_t id = 0;                   // increasing: a later run has a larger id
  std::string uuid;                 // random (v4), lowercase with dashes, unique across stores
  int64_t created_unix_ns = 0;      // when it was stored
  int64_t trace_start_unix_ns = 0;  // when the recording started, 0 if the trace does not say
  RunMetadata metadata;
  uint64_t slice_count = 0;
  int64_t duration_ns = 0;    // from the trace's first timestamp to its last
  std::string source_format;  // the trace's origin: "opsight", "pytorch-profiler", ...
  uint64_t trace_bytes = 0;   // the native trace's size
  uint64_t stored_bytes = 0;  // its compressed size in the store
};

// What the runs table says of a trace (RunRecord's fields of that name), given by the caller
// when the trace is saved from its native file without being read into memory
// (RunStore::add_native_file; save_native_file scans the file for them).
struct TraceFacts {
  uint64_t slice_count = 0;
  int64_t duration_ns = 0;
  int64_t start_unix_ns = 0;
  std::string source_format = "opsight";
};

// Which runs `list` returns; every field narrows, an unset field does not.
struct RunFilter {
  std::string name_glob = {};                 // SQLite GLOB on the name ("resnet*"), case-sensitive
  std::string tag = {};                       // "key" (has the tag) or "key=value"
  std::optional<int64_t> since_unix_ns = {};  // created at or after
  std::optional<int64_t> until_unix_ns = {};  // created before
  size_t limit = 0;                           // newest N; 0 = all
};

// Which runs `apply_retention` removes: those beyond the newest `keep_last`, and those
// created more than `max_age_ns` ago (before `now_unix_ns`, default the clock's now).
struct RetentionPolicy {
  std::optional<uint64_t> keep_last = {};
  std::optional<int64_t> max_age_ns = {};
  std::optional<int64_t> now_unix_ns = {};
};

struct OpenOptions {
  // Create the file (and its directory, mode 0700) when missing; else a missing store
  // is an error ("no run store at PATH").
  bool create = true;
  // How long a write waits for another process's write to finish.
  int busy_timeout_ms = 10000;
  // A store whose file is damaged (cut short, a corrupt page) is opened read-only to read
  // what is left (RunStore::damage() says why), instead of failing.
  bool salvage_damaged = true;
  // A trace whose native form is at least this large is kept as a zstd-compressed file in
  // the folder beside the database (traces_folder()), compressed as it is written (saving
  // holds about 1 MiB of it), not as a blob in the database, which saving holds whole and
  // compressed at once and SQLite copies again. 0: every trace as a file.
  uint64_t file_threshold_bytes = uint64_t{64} << 20;
};

// The current schema version (`PRAGMA user_version`); opening an older store migrates it.
inline constexpr int kSchemaVersion = 2;

// The run store. It keeps one SQLite connection in WAL mode, so readers never wait for a
// writer and writers of several processes queue for up to busy_timeout_ms. Each run's
// trace is stored as native `.opsight` bytes compressed with zstd (with the frame's
// checksum), so a damaged trace is found when it is loaded and no other run is affected.
//
// Thread-safety: every method may be called from any thread; calls on one RunStore are
// serialized by an internal mutex. Several RunStores (in one process or many) on the same
// file are safe: SQLite's file locks order their writes.
class RunStore {
 public:
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // Opens (creating if allowed) the store at `path` and migrates it to kSchemaVersion.
  // Errors name the path and what SQLite said ("PATH: not a usable run store: file is
  // not a database"); a store written by a newer opsight is refused, not changed.
  static Result<std::unique_ptr<RunStore>> open(const std::string& path,
                                                const OpenOptions& options = {});

  // $OPSIGHT_HOME/runs.db when OPSIGHT_HOME is set and not empty, else ~/.opsight/runs.db.
  static std::string default_path();

  const std::string& path() const { return path_; }
  // Where traces kept as files live: PATH.traces/ beside the database, one
  // <uuid>.opsight.zst per run, removed with its run (by remove and apply_retention).
  std::string traces_folder() const { return path_ + ".traces"; }

  // Set when the file is damaged and was opened read-only to salvage what is left: list
  // and resolve skip the runs on lost pages, load_trace reads the traces still whole,
  // and add, remove and apply_retention fail. The text is SQLite's diagnosis.
  const std::optional<std::string>& damage() const { return damage_; }

  // Stores `trace` as a new run. The trace is written natively and compressed (or, when
  // large, written to its file: OpenOptions::file_threshold_bytes) before the write
  // transaction starts, so another process's save waits only for the insert.
  Result<RunRecord> add(const trace::Trace& trace, const RunMetadata& metadata);
  // Stores the native file at `native_path` as a new run, as add() would store the trace it
  // holds, without reading it into memory: a file of file_threshold_bytes or more is
  // compressed into its file beside the database as it is read (1 MiB at a time), a
  // smaller one read and compressed as a blob. `facts` fill the runs table (the caller
  // knows them: save_native_file scans the file). The file is not checked here.
  Result<RunRecord> add_native_file(const std::string& native_path, const TraceFacts& facts,
                                    const RunMetadata& metadata);

  // Runs matching `filter`, newest first.
  Result<std::vector<RunRecord>> list(const RunFilter& filter = {});

  // The run a user names: a numeric id, "latest", "latest~N" (N runs before the latest),
  // a prefix of a uuid (unique, else an error listing the candidates), or the exact name
  // of a run (the newest run of that name).
  Result<RunRecord> resolve(std::string_view reference);

  // The trace of run `id`. A damaged blob gives ReadResult::error with a message naming
  // the run and the store (print error->message as is); other runs stay loadable.
  io::ReadResult load_trace(int64_t id);

  // Writes run `id`'s trace as native .opsight bytes into `sink` (a trace kept as a file is
  // decompressed a MiB at a time; a blob is decompressed in memory). nullopt, or the error
  // naming the run.
  std::optional<std::string> write_native(int64_t id, io::ByteSink& sink);
  // The same into the file `path` (through a temporary renamed into place: on failure
  // `path` is left as it was).
  std::optional<std::string> write_native_file(int64_t id, const std::string& path);
  // Run `id`'s native trace in a scratch file of traces_folder() (else, when that cannot be
  // written, of the temporary directory) that has no name (removed by the system when the
  // returned descriptor is closed, even if the process is killed): what a reader of a stored
  // run reads, through descriptor_path(fd). -1 and *problem on failure.
  int open_native_scratch(int64_t id, std::string* problem);
  // "/proc/self/fd/N": a path that opens the file behind descriptor `fd` (Linux).
  static std::string descriptor_path(int fd);

  // Removes run `id` and its trace; an error if there is no such run.
  Result<RunRecord> remove(int64_t id);

  // Sets run `id`'s tag `key` to `value` (replacing the value it had), or removes the tag;
  // returns the run's record as it is now. An error if there is no such run, the key is
  // empty, or (remove_tag) the run has no tag `key`.
  Result<RunRecord> set_tag(int64_t id, const std::string& key, const std::string& value);
  Result<RunRecord> remove_tag(int64_t id, const std::string& key);

  // Removes the runs the policy selects; returns how many.
  Result<uint64_t> apply_retention(const RetentionPolicy& policy);
  // The ids `apply_retention(policy)` would remove now, oldest first; removes nothing.
  Result<std::vector<int64_t>> retention_candidates(const RetentionPolicy& policy);

 private:
  using Binds = std::vector<std::variant<int64_t, std::string>>;
  RunStore(std::string path, sqlite3* database);
  std::optional<std::string> migrate();
  std::optional<std::string> open_for_salvage(const std::string& damage, int busy_timeout_ms);
  std::optional<std::string> refuse_writes_if_damaged(std::string_view doing) const;
  Result<std::vector<int64_t>> select_retention_candidates(const RetentionPolicy& policy);
  Result<RunRecord> find_by_id(int64_t id);
  // Run `id`'s trace row: its codec, its data (a blob, or its file's name, checked to be a
  // plain name of traces_folder()) and its native size; nullopt or the error naming it.
  struct StoredTraceRow {
    std::string codec, data;
    uint64_t trace_bytes = 0;
  };
  std::optional<std::string> select_stored_trace(int64_t id, StoredTraceRow* row);
  // Makes traces_folder() if it is not there, readable by its owner only.
  void make_traces_folder() const;
  // The write transaction of add and add_native_file: the run's rows, its metadata and its
  // trace (`codec`, `data`: a blob, or the name of its file in traces_folder(), which is
  // removed again when the database refuses the run).
  Result<RunRecord> insert_run(RunRecord record, std::string_view codec, const std::string& data);
  // Runs matching `where_sql`, newest first, skipping `offset`, at most `limit` (0: all).
  Result<std::vector<RunRecord>> query_runs(const std::string& where_sql, const Binds& binds,
                                            size_t limit = 0, size_t offset = 0);
  Result<std::vector<RunRecord>> salvage_runs(const std::string& where_sql, const Binds& binds,
                                              size_t limit, size_t offset);
  bool fill_key_values(std::vector<RunRecord>& records);
  std::optional<std::string> delete_runs(const std::vector<int64_t>& ids);
  // "PATH: DOING: what SQLite said (and what that means)".
  std::string describe_error(std::string_view doing) const;
  std::string sqlite_problem() const;

  std::string path_;
  sqlite3* database_ = nullptr;
  uint64_t file_threshold_bytes_ = uint64_t{64} << 20;
  std::optional<std::string> damage_;
  std::mutex mutex_;
};

// Metadata of this machine and of `working_directory`: host name, CPU model and count,
// GPUs (/proc/driver/nvidia/gpus/*/information, else "none"), the git commit of the
// repository holding `working_directory` (read from .git without running git; empty
// when there is none), the working directory itself, the OS ("os" in extra) and
// opsight's version (in versions). Thread-safe; never fails (unknown fields stay empty).
RunMetadata collect_host_metadata(const std::string& working_directory);

// The commit HEAD names in the repository holding `directory` (its .git, searched upward;
// worktrees and packed refs included); empty when there is none or it cannot be read.
std::string git_commit_of(const std::string& directory);

}  // namespace opsight::store
