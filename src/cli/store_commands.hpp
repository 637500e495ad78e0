// The run store's commands of `opsight` (docs/store.md):
//   save TRACE...  store trace file(s), merged, as a run with its metadata
//   runs           list the runs (filters: --name, --tag, --since, --until, --limit)
//   show RUN       a run's metadata, then its summary, tree or table
//   rm RUN...      remove runs; --keep-last N (N >= 1) / --older-than AGE apply retention,
//                  --all removes every run, --dry-run only lists what would go
// Each takes --store PATH (default $OPSIGHT_HOME/runs.db, else ~/.opsight/runs.db).
// After a save, OPSIGHT_KEEP_RUNS=N keeps only the newest N runs.
//
// main() constructs one StoreCommands on its CLI::App before parsing, and after parsing
// calls run(), which returns the exit status when one of these commands was chosen:
// 0 ok, 1 unusable input or store, 2 damaged input (what was whole is used), 64 usage.
//
// Thread-safety: none; one per process, used by main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace opsight::cli {

class StoreCommands {
 public:
  // Adds the subcommands to `app`; the options are parsed into this object.
  explicit StoreCommands(CLI::App& app);
  StoreCommands(const StoreCommands&) = delete;
  StoreCommands& operator=(const StoreCommands&) = delete;

  // The exit status of the store command that was parsed; nullopt if none was.
  std::optional<int> run();

 private:
  int run_save();
  int run_runs();
  int run_show();
  int run_rm();

  CLI::App* save_command_ = nullptr;
  CLI::App* runs_command_ = nullptr;
  CLI::App* show_command_ = nullptr;
  CLI::App* rm_command_ = nullptr;

  std::string store_path_;  // --store (each command binds it)

  struct SaveOptions {
    std::vector<std::string> files;
    std::string name, command, working_directory, format = "text";
    std::vector<std::string> tags, meta, packages;
  } save_;
  struct RunsOptions {
    std::string name_glob, tag, since, until, format = "text";
    size_t limit = 0;
  } runs_;
  struct ShowOptions {
    std::string run;
    bool summary = false, tree = false, table = false;
    std::string format = "text", sort = "total";
    size_t limit = 0, max_roots = 20;
  } show_;
  struct RemoveOptions {
    std::vector<std::string> runs;
    std::optional<size_t> keep_last;
    std::string older_than;
    bool all = false, dry_run = false;
  } rm_;
};

// Parses a point in time for --since/--until: "2024-05-01", "2024-05-01 13:30",
// "2024-05-01T13:30:00" (local time; a trailing "Z" means UTC), or an age back from
// `now_unix_ns`: "90s", "30m", "12h", "7d", "2w". nullopt if it is none of these.
std::optional<int64_t> parse_time_argument(const std::string& text, int64_t now_unix_ns);
// Parses an age ("90s", "30m", "12h", "7d", "2w") into nanoseconds.
std::optional<int64_t> parse_age(const std::string& text);

}  // namespace opsight::cli
