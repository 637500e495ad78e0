#include "cli/store_commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/output.hpp"
#include "io/io.hpp"
#include "opsight/exit_codes.hpp"
#include "report/report.hpp"
#include "store/run_json.hpp"
#include "store/run_store.hpp"
#include "store/save_run.hpp"

namespace opsight::cli {

namespace {

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string resolved_store_path(const std::string& option) {
  return option.empty() ? store::RunStore::default_path() : option;
}

// "key=value" (or "key", value empty) from the option `option`; nullopt after an error.
std::optional<std::pair<std::string, std::string>> parse_key_value(const std::string& text,
                                                                   const char* option,
                                                                   bool value_required) {
  size_t equals = text.find('=');
  std::string key = text.substr(0, equals);
  if (key.empty() || (value_required && equals == std::string::npos)) {
    print_error(std::string(option) + " " + text + ": expected " +
                (value_required ? "KEY=VALUE" : "KEY or KEY=VALUE"));
    return std::nullopt;
  }
  return std::pair{key, equals == std::string::npos ? std::string() : text.substr(equals + 1)};
}

std::string local_time(int64_t unix_ns) {
  std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm parts{};
  localtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &parts);
  return text;
}

std::string join_key_values(const store::KeyValues& rows, std::string_view separator) {
  std::string text;
  for (const auto& [key, value] : rows) {
    if (!text.empty()) text += ", ";
    text += key;
    if (!value.empty()) text += std::string(separator) + value;
  }
  return text;
}

std::string format_bytes(uint64_t bytes) {
  char text[32];
  if (bytes < 1024) return std::to_string(bytes) + " B";
  if (bytes < 1024 * 1024)
    std::snprintf(text, sizeof(text), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else
    std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return text;
}

// Opens an existing store; nullptr (after saying why) if there is none or it is unusable.
std::unique_ptr<store::RunStore> open_existing(const std::string& path) {
  store::OpenOptions options;
  options.create = false;
  auto opened = store::RunStore::open(path, options);
  if (!opened.ok()) {
    print_error(opened.error());
    return nullptr;
  }
  if (const auto& damage = opened.value()->damage())
    std::fprintf(stderr,
                 "opsight: warning: %s: the run store is damaged (%s): showing what can still "
                 "be read\n",
                 path.c_str(), damage->c_str());
  return std::move(opened.value());
}

std::string metadata_text(const store::RunRecord& run) {
  const store::RunMetadata& m = run.metadata;
  std::string text = "run " + std::to_string(run.id) + "  " + run.uuid + "\n";
  auto line = [&](const char* label, const std::string& value) {
    if (value.empty()) return;
    char padded[16];
    std::snprintf(padded, sizeof(padded), "%-12s", label);
    text += std::string(padded) + value + "\n";
  };
  line("name:", m.name);
  line("created:", local_time(run.created_unix_ns));
  line("command:", m.command);
  line("directory:", m.working_directory);
  line("git commit:", m.git_commit);
  line("host:", m.host);
  line("cpu:", m.cpu);
  line("gpu:", m.gpu);
  line("versions:", join_key_values(m.versions, " "));
  line("tags:", join_key_values(m.tags, "="));
  for (const auto& [key, value] : m.extra) line((key + ":").c_str(), value);
  line("trace:", std::to_string(run.slice_count) + " spans over " +
                     report::format_duration(static_cast<double>(run.duration_ns)) +
                     (run.source_format.empty() ? "" : ", from " + run.source_format) + ", " +
                     format_bytes(run.stored_bytes) + " stored (" + format_bytes(run.trace_bytes) +
                     " uncompressed)");
  return text;
}

}  // namespace

std::optional<int64_t> parse_age(const std::string& text) {
  if (text.size() < 2) return std::nullopt;
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    case 'w':
      unit = 7 * 86400;
      break;
    default:
      return std::nullopt;
  }
  std::string digits = text.substr(0, text.size() - 1);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  // Ages past int64 nanoseconds (about 292 years) are refused, not wrapped: a wrapped
  // negative age would make `rm --older-than` remove every run.
  int64_t seconds = 0, nanoseconds = 0;
  if (__builtin_mul_overflow(std::stoll(digits), unit, &seconds) ||
      __builtin_mul_overflow(seconds, int64_t{1'000'000'000}, &nanoseconds))
    return std::nullopt;
  return nanoseconds;
}

std::optional<int64_t> parse_time_argument(const std::string& text, int64_t now_unix_ns) {
  if (auto age = parse_age(text)) return now_unix_ns - *age;
  // Only digits and the separators "-", ":", "T", " " and a final "Z": sscanf alone would
  // also take signs ("T-1:-5") and skip blanks ("T 1:30").
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool allowed = (c >= '0' && c <= '9') || c == '-' || c == ':' || c == 'T' ||
                         (c == ' ' && i == 10) || ((c == 'Z' || c == 'z') && i + 1 == text.size());
    if (!allowed || ((c == '-') && i != 4 && i != 7)) return std::nullopt;
  }
  std::tm parts{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  char separator = 0;
  int consumed = 0;
  bool utc = !text.empty() && (text.back() == 'Z' || text.back() == 'z');
  std::string body = utc ? text.substr(0, text.size() - 1) : text;
  if (std::sscanf(body.c_str(), "%4d-%2d-%2d%n", &year, &month, &day, &consumed) != 3 ||
      consumed != 10)
    return std::nullopt;
  if (body.size() > 10) {
    int more = 0;
    int fields = std::sscanf(body.c_str() + 10, "%c%2d:%2d%n:%2d%n", &separator, &hour, &minute,
                             &more, &second, &more);
    if (fields < 3 || (separator != 'T' && separator != ' ') ||
        static_cast<size_t>(10 + more) != body.size())
      return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;
  parts.tm_year = year - 1900;
  parts.tm_mon = month - 1;
  parts.tm_mday = day;
  parts.tm_hour = hour;
  parts.tm_min = minute;
  parts.tm_sec = second;
  parts.tm_isdst = -1;
  std::time_t seconds = utc ? timegm(&parts) : std::mktime(&parts);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  // mktime quietly moves 2024-02-31 to March 2: a date it had to normalise is refused.
  if (parts.tm_year != year - 1900 || parts.tm_mon != month - 1 || parts.tm_mday != day)
    return std::nullopt;
  return static_cast<int64_t>(seconds) * 1'000'000'000;
}

StoreCommands::StoreCommands(CLI::App& app) {
  auto add_store_option = [this](CLI::App* command) {
    command->add_option("--store", store_path_,
                        "Run store file (default: $OPSIGHT_HOME/runs.db, else ~/.opsight/runs.db)");
  };

  save_command_ = app.add_subcommand(
      "save",
      "Store trace file(s) as a run in the run store, with this machine's metadata; several "
      "files (the processes of one run) are merged. OPSIGHT_KEEP_RUNS=N then keeps the "
      "newest N runs");
  save_command_->add_option("files", save_.files, "Trace file(s): .opsight or Chrome JSON")
      ->required();
  save_command_->add_option("--name", save_.name, "Name of the run (default: the first file's)");
  // One value per flag: "save --tag ci run.opsight" must not take the file as a tag.
  save_command_->add_option("--tag", save_.tags, "Tag KEY=VALUE or KEY (repeatable)")
      ->allow_extra_args(false);
  save_command_->add_option("--meta", save_.meta, "Extra metadata KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  save_command_
      ->add_option("--package", save_.packages, "Package version NAME=VERSION (repeatable)")
      ->allow_extra_args(false);
  save_command_->add_option("--command", save_.command,
                            "Command line that ran (default: the trace's own)");
  save_command_->add_option("--cwd", save_.working_directory,
                            "Working directory it ran in (default: this one); its git commit is "
                            "recorded");
  save_command_->add_option("--format", save_.format, "Output: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  add_store_option(save_command_);

  runs_command_ = app.add_subcommand("runs", "List the runs in the run store, newest first");
  runs_command_->add_option("--name", runs_.name_glob, "Only runs whose name matches GLOB");
  runs_command_->add_option("--tag", runs_.tag, "Only runs with tag KEY or KEY=VALUE");
  runs_command_->add_option(
      "--since", runs_.since,
      "Only runs stored since DATE (2024-05-01, 2024-05-01T13:30, or an age: 12h, 7d)");
  runs_command_->add_option("--until", runs_.until, "Only runs stored before DATE");
  runs_command_->add_option("--limit", runs_.limit, "Show the newest N (0: all)")
      ->capture_default_str();
  runs_command_->add_option("--format", runs_.format, "Output: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  add_store_option(runs_command_);

  show_command_ = app.add_subcommand(
      "show",
      "Show a run's metadata and its report (RUN: id, latest, latest~N, uuid prefix, name)");
  show_command_->add_option("run", show_.run, "The run")->required();
  show_command_->add_flag("--summary", show_.summary, "Percentile summary per span name (default)");
  show_command_->add_flag("--tree", show_.tree, "Call tree per root span");
  show_command_->add_flag("--table", show_.table, "Per span name: count, total, self, mean, p99");
  show_command_->add_option("--format", show_.format, "Output: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  show_command_
      ->add_option("--sort", show_.sort, "Sort rows by total, self, count, mean, p99 or name")
      ->capture_default_str();
  show_command_->add_option("--limit", show_.limit, "Show at most N rows (0: all)")
      ->capture_default_str();
  show_command_->add_option("--max-roots", show_.max_roots, "Tree: show at most N roots (0: all)")
      ->capture_default_str();
  add_store_option(show_command_);

  rm_command_ = app.add_subcommand(
      "rm",
      "Remove runs from the run store: opsight rm RUN..., or by retention: --keep-last N, "
      "--older-than AGE");
  rm_command_->add_option("runs", rm_.runs,
                          "Runs to remove (id, latest, latest~N, uuid prefix, name)");
  rm_command_->add_option("--keep-last", rm_.keep_last,
                          "Remove all but the newest N runs (N >= 1; --all removes every run)");
  rm_command_->add_flag("--all", rm_.all, "Remove every run of the store");
  rm_command_->add_flag("--dry-run", rm_.dry_run, "Only list the runs that would be removed");
  rm_command_->add_option("--older-than", rm_.older_than,
                          "Remove runs stored more than AGE ago (90m, 12h, 30d, 2w)");
  add_store_option(rm_command_);
}

std::optional<int> StoreCommands::run() {
  if (*save_command_) return run_save();
  if (*runs_command_) return run_runs();
  if (*show_command_) return run_show();
  if (*rm_command_) return run_rm();
  return std::nullopt;
}

int StoreCommands::run_save() {
  store::SaveRequest request;
  request.files = save_.files;
  request.store_path = store_path_;
  request.name = save_.name;
  request.command = save_.command;
  request.working_directory = save_.working_directory;
  for (const std::string& tag : save_.tags) {
    auto parsed = parse_key_value(tag, "--tag", false);
    if (!parsed) return kExitUsage;
    request.tags.push_back(*parsed);
  }
  for (const std::string& meta : save_.meta) {
    auto parsed = parse_key_value(meta, "--meta", true);
    if (!parsed) return kExitUsage;
    request.extra.push_back(*parsed);
  }
  for (const std::string& package : save_.packages) {
    auto parsed = parse_key_value(package, "--package", true);
    if (!parsed) return kExitUsage;
    request.versions.push_back(*parsed);
  }

  store::SaveOutcome saved = store::save_trace_files(request);
  for (const std::string& damage : saved.damage)
    std::fprintf(stderr, "opsight: warning: %s (saving what was read before it)\n", damage.c_str());
  if (!saved.ok()) {
    print_error(*saved.error);
    return kExitError;
  }
  const store::RunRecord& run = *saved.run;
  std::string out;
  if (save_.format == "json") {
    nlohmann::ordered_json object = store::run_record_json(run);
    object["store"] = saved.store_path;
    out = object.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    out = "saved as run " + std::to_string(run.id) + " (" + run.uuid + ") in " + saved.store_path +
          "\n";
  }
  if (!write_stdout(out)) return kExitError;
  for (const std::string& note : saved.notes) std::fprintf(stderr, "opsight: %s\n", note.c_str());
  return saved.damage.empty() ? kExitOk : kExitDamaged;
}

int StoreCommands::run_runs() {
  store::RunFilter filter;
  filter.name_glob = runs_.name_glob;
  filter.tag = runs_.tag;
  filter.limit = runs_.limit;
  int64_t now = unix_now_ns();
  for (auto [option, text, target] : {std::tuple{"--since", &runs_.since, &filter.since_unix_ns},
                                      std::tuple{"--until", &runs_.until, &filter.until_unix_ns}}) {
    if (text->empty()) continue;
    *target = parse_time_argument(*text, now);
    if (!*target) {
      print_error(std::string(option) + " " + *text +
                  ": expected a date (2024-05-01, 2024-05-01T13:30[:00][Z]) or an age "
                  "(90s, 30m, 12h, 7d, 2w)");
      return kExitUsage;
    }
  }
  std::string path = resolved_store_path(store_path_);
  std::error_code error;
  std::vector<store::RunRecord> records;
  bool damaged = false;
  if (std::filesystem::exists(path, error)) {
    auto runs = open_existing(path);
    if (!runs) return kExitError;
    auto listed = runs->list(filter);
    if (!listed.ok()) {
      print_error(listed.error());
      return kExitError;
    }
    records = std::move(listed.value());
    damaged = runs->damage().has_value();
  }
  if (runs_.format == "json") {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (const auto& run : records) array.push_back(store::run_record_json(run));
    if (!write_stdout(array.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"))
      return kExitError;
    return damaged ? kExitDamaged : kExitOk;
  }
  if (records.empty()) {
    std::fprintf(stderr, "opsight: no runs%s in %s\n",
                 filter.name_glob.empty() && filter.tag.empty() && !filter.since_unix_ns &&
                         !filter.until_unix_ns
                     ? ""
                     : " match",
                 path.c_str());
    return damaged ? kExitDamaged : kExitOk;
  }
  // Columns sized to their widest cell.
  std::vector<std::vector<std::string>> rows = {
      {"id", "uuid", "created", "name", "spans", "duration", "tags", "command"}};
  for (const auto& run : records) {
    std::string command = run.metadata.command;
    if (command.size() > 60) command = command.substr(0, 57) + "...";
    rows.push_back({std::to_string(run.id), run.uuid.substr(0, 8), local_time(run.created_unix_ns),
                    run.metadata.name, std::to_string(run.slice_count),
                    report::format_duration(static_cast<double>(run.duration_ns)),
                    join_key_values(run.metadata.tags, "="), command});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t column = 0; column < row.size(); ++column)
      widths[column] = std::max(widths[column], row[column].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t column = 0; column < row.size(); ++column) {
      line += row[column];
      if (column + 1 < row.size())
        line += std::string(widths[column] - row[column].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (!write_stdout(out)) return kExitError;
  return damaged ? kExitDamaged : kExitOk;
}

int StoreCommands::run_show() {
  if (auto problem = report::validate_sort_key(show_.sort)) {
    print_error(*problem);
    return kExitUsage;
  }
  bool summary = show_.summary, tree = show_.tree, table = show_.table;
  if (!summary && !tree && !table) summary = true;
  bool json = show_.format == "json";
  if (json && int{summary} + int{tree} + int{table} > 1) {
    print_error("--format json takes one view: choose --summary, --tree or --table");
    return kExitUsage;
  }
  std::string path = resolved_store_path(store_path_);
  auto runs = open_existing(path);
  if (!runs) return kExitError;
  auto resolved = runs->resolve(show_.run);
  if (!resolved.ok()) {
    print_error(resolved.error());
    return kExitError;
  }
  const store::RunRecord& run = resolved.value();
  io::ReadResult loaded = runs->load_trace(run.id);
  if (!loaded.ok()) {
    // The metadata is still worth showing when the trace is damaged.
    if (!json) write_stdout(metadata_text(run));
    print_error(loaded.error->message);
    return kExitDamaged;
  }
  if (loaded.damage)
    std::fprintf(stderr, "opsight: warning: %s (showing what was read before it)\n",
                 loaded.damage->message.c_str());
  report::ReportOptions options;
  options.format = json ? report::OutputFormat::kJson : report::OutputFormat::kText;
  options.sort = show_.sort;
  options.limit = show_.limit;
  options.max_roots = show_.max_roots;
  options.source_name = store::run_label(run);
  std::string out;
  if (json) {
    std::string view = tree ? "tree" : table ? "table" : "summary";
    std::string rendered = tree    ? report::render_tree(loaded.trace, options)
                           : table ? report::render_table(loaded.trace, options)
                                   : report::render_summary(loaded.trace, options);
    nlohmann::ordered_json object;
    object["run"] = store::run_record_json(run);
    object["view"] = view;
    object["report"] = nlohmann::ordered_json::parse(rendered, nullptr, false);
    if (object["report"].is_discarded()) {
      print_error(rendered);
      return kExitError;
    }
    out = object.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    out = metadata_text(run) + "\n";
    if (tree) out += report::render_tree(loaded.trace, options);
    if (summary) {
      if (tree) out += "\n";
      out += report::render_summary(loaded.trace, options);
    }
    if (table) {
      if (tree || summary) out += "\n";
      out += report::render_table(loaded.trace, options);
    }
  }
  if (!write_stdout(out)) return kExitError;
  return loaded.damage || runs->damage() ? kExitDamaged : kExitOk;
}

int StoreCommands::run_rm() {
  std::optional<int64_t> max_age;
  if (!rm_.older_than.empty()) {
    max_age = parse_age(rm_.older_than);
    if (!max_age) {
      print_error("--older-than " + rm_.older_than + ": expected an age (90m, 12h, 30d, 2w)");
      return kExitUsage;
    }
  }
  // 0 means "every run" nowhere else (OPSIGHT_KEEP_RUNS=0 keeps them all): removing every
  // run takes --all, said on purpose.
  if (rm_.keep_last && *rm_.keep_last == 0) {
    print_error("--keep-last 0 would remove every run: say --all for that");
    return kExitUsage;
  }
  if (rm_.all && (rm_.keep_last || max_age || !rm_.runs.empty())) {
    print_error("--all removes every run: it takes no runs, --keep-last or --older-than");
    return kExitUsage;
  }
  if (rm_.runs.empty() && !rm_.keep_last && !max_age && !rm_.all) {
    print_error(
        "rm needs runs to remove, --keep-last N, --older-than AGE or --all (see opsight rm "
        "--help)");
    return kExitUsage;
  }
  std::string path = resolved_store_path(store_path_);
  std::error_code error;
  if (rm_.runs.empty() && !std::filesystem::exists(path, error)) {
    std::fprintf(stderr, "opsight: no run store at %s: nothing to remove\n", path.c_str());
    return kExitOk;
  }
  auto runs = open_existing(path);
  if (!runs) return kExitError;

  // Every named run must exist before any is removed.
  std::vector<store::RunRecord> doomed;
  for (const std::string& reference : rm_.runs) {
    auto resolved = runs->resolve(reference);
    if (!resolved.ok()) {
      print_error(resolved.error() + "; nothing removed");
      return kExitError;
    }
    doomed.push_back(std::move(resolved.value()));
  }
  std::optional<store::RetentionPolicy> policy;
  if (rm_.keep_last || max_age || rm_.all) {
    policy.emplace();
    policy->keep_last = rm_.all ? std::optional<uint64_t>(0) : rm_.keep_last;
    policy->max_age_ns = max_age;
  }
  if (rm_.dry_run) {
    std::string out;
    std::vector<int64_t> ids;
    for (const store::RunRecord& run : doomed) ids.push_back(run.id);
    if (policy) {
      auto candidates = runs->retention_candidates(*policy);
      if (!candidates.ok()) {
        print_error(candidates.error());
        return kExitError;
      }
      ids.insert(ids.end(), candidates.value().begin(), candidates.value().end());
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int64_t id : ids) {
      auto run = runs->resolve(std::to_string(id));
      if (run.ok())
        out += "would remove " + store::run_label(run.value()) + " " + run.value().uuid + "\n";
    }
    out += "--dry-run: " + std::to_string(ids.size()) + " run" + (ids.size() == 1 ? "" : "s") +
           " would be removed, nothing was\n";
    return write_stdout(out) ? kExitOk : kExitError;
  }
  std::string out;
  for (const store::RunRecord& run : doomed) {
    auto removed = runs->remove(run.id);
    if (!removed.ok()) {
      // Named twice (a reference and its uuid): already gone is fine.
      if (removed.error().starts_with("no run ")) continue;
      write_stdout(out);
      print_error(removed.error());
      return kExitError;
    }
    out += "removed " + store::run_label(run) + " " + run.uuid + "\n";
  }
  if (policy) {
    auto removed = runs->apply_retention(*policy);
    if (!removed.ok()) {
      write_stdout(out);
      print_error(removed.error());
      return kExitError;
    }
    out += "removed " + std::to_string(removed.value()) + " run" +
           (removed.value() == 1 ? "" : "s") + (rm_.all ? " (every run)" : " by retention");
    if (rm_.keep_last) out += " (keeping the newest " + std::to_string(*rm_.keep_last) + ")";
    if (max_age) out += " (older than " + rm_.older_than + ")";
    out += "\n";
  }
  return write_stdout(out) ? kExitOk : kExitError;
}

}  // namespace opsight::cli
