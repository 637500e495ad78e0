// The `opsight` command: report, convert and demo here; save, runs, show and rm in
// store_commands.cc; compare in compare_command.cc; export in export_command.cc; devices in
// devices_command.cc; ui (the web UI's server) in ui_command.cc.
// `report` and `convert` take several input files (the files the processes of one run
// wrote) and merge them into one trace.
//
// Exit status (opsight/exit_codes.hpp's table): 0 success; 1 the input could not be used
// (missing, unreadable or not a trace) or the output could not be written; 2 the input was
// damaged (cut short by a crash, corrupt chunk): what was readable is reported or
// converted, and stderr says where the damage starts; 3 a regression (compare); 64 bad
// command-line usage.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/compare_command.hpp"
#include "cli/devices_command.hpp"
#include "cli/export_command.hpp"
#include "cli/output.hpp"
#include "cli/store_commands.hpp"
#include "cli/ui_command.hpp"
#include "io/io.hpp"
#include "io/time_window.hpp"
#include "io/trace_formats.hpp"
#include "opsight/exit_codes.hpp"
#include "opsight/opsight.hpp"
#include "report/report.hpp"
#include "report/streaming_summary.hpp"
#include "store/trace_source.hpp"

extern char** environ;

namespace {

using opsight::cli::print_error;
using opsight::cli::write_stdout;

using opsight::kExitDamaged;
using opsight::kExitError;
using opsight::kExitUsage;

// Reads the traces for a command, merged into one when there are several. Returns nullopt
// (after printing the error) if one of them is unusable; sets *damaged and prints a
// warning per file of which only part could be read.
std::optional<opsight::trace::Trace> load_traces(const std::vector<std::string>& paths,
                                                 bool* damaged) {
  opsight::io::ReadFilesResult result = opsight::io::read_trace_files(paths);
  if (!result.ok()) {
    print_error(*result.error);
    return std::nullopt;
  }
  for (const std::string& damage : result.damage) {
    *damaged = true;
    std::fprintf(stderr, "opsight: warning: %s (showing what was read before it)\n",
                 damage.c_str());
  }
  return std::move(result.trace);
}

std::optional<opsight::trace::Trace> load_trace(const std::string& path, bool* damaged) {
  return load_traces({path}, damaged);
}

// The traces cut to `window` (--window): one trace file is read through its time index
// (a native file decodes only the chunks the window needs); several files, or a run of the
// store, are read whole, merged, then cut. Says so when a native file had no index.
std::optional<opsight::trace::Trace> load_traces_in_window(const std::vector<std::string>& paths,
                                                           const opsight::io::TimeWindow& window,
                                                           bool* damaged) {
  std::error_code error;
  if (paths.size() == 1 && std::filesystem::is_regular_file(paths[0], error)) {
    opsight::io::ReadResult result = opsight::io::read_trace_file(paths[0], window);
    if (!result.ok()) {
      print_error(result.error->to_string(paths[0]));
      return std::nullopt;
    }
    if (result.damage) {
      *damaged = true;
      std::fprintf(stderr, "opsight: warning: %s (showing what was read before it)\n",
                   result.damage->to_string(paths[0]).c_str());
    }
    for (const auto& [key, value] : result.trace.run.extra)
      if (key == "native_index" && value != "read")
        std::fprintf(stderr, "opsight: note: %s: no usable time index (%s)\n", paths[0].c_str(),
                     value.c_str());
    return std::move(result.trace);
  }
  std::optional<opsight::trace::Trace> trace;
  if (paths.size() == 1) {
    opsight::store::LoadedTrace loaded = opsight::store::load_trace_argument(paths[0]);
    if (!loaded.ok()) {
      print_error(*loaded.error);
      return std::nullopt;
    }
    for (const std::string& damage : loaded.damage) {
      *damaged = true;
      std::fprintf(stderr, "opsight: warning: %s (showing what was read before it)\n",
                   damage.c_str());
    }
    trace = std::move(loaded.trace);
  } else {
    trace = load_traces(paths, damaged);
  }
  if (!trace) return trace;
  int64_t start = trace->time_bounds().first;
  auto plus = [](int64_t a, int64_t b) {
    int64_t sum = 0;
    return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<int64_t>::max() : sum;
  };
  opsight::trace::keep_time_window(*trace, plus(start, window.from_ns), plus(start, window.to_ns),
                                   opsight::trace::WindowRule::kOverlaps);
  return trace;
}

// What report headers call the input: the file's name, or the files' names.
std::string source_name_of(const std::vector<std::string>& paths) {
  auto name = [](const std::string& path) {
    return std::filesystem::path(path).filename().string();
  };
  if (paths.empty()) return {};
  std::string text = name(paths[0]);
  if (paths.size() > 3) return text + " + " + std::to_string(paths.size() - 1) + " more files";
  for (size_t i = 1; i < paths.size(); ++i) text += " + " + name(paths[i]);
  return text;
}

struct ReportCommand {
  std::vector<std::string> files;
  // Per view of report::report_views(), how often its flag was given (the breakdown's
  // comes from breakdown_span instead).
  std::vector<int> chosen = std::vector<int>(opsight::report::report_views().size(), 0);
  std::string breakdown_span;
  bool breakdown_by_category = false;
  std::vector<std::string> operator_categories;
  std::string format = "text";
  std::string sort = "total";
  size_t limit = 0;
  size_t max_roots = 20;
  size_t max_depth = 0;
  std::string window;           // --window FROM:TO
  std::string stream = "auto";  // --stream: auto, on, off
};

// Inputs from this size on are reported (and converted) streaming by default.
constexpr uintmax_t kStreamFromBytes = uintmax_t{1} << 30;

// Why `opsight report` cannot stream this command; nullopt when it can: one .opsight file
// (or a run of the store: `stored_run`), no --window, and only views that stream
// (--summary, --table, --ops, --merged-tree, --breakdown).
std::optional<std::string> why_report_cannot_stream(const ReportCommand& command,
                                                    const std::vector<bool>& wanted,
                                                    bool stored_run = false) {
  const auto views = opsight::report::report_views();
  for (size_t i = 0; i < views.size(); ++i)
    if (wanted[i] && !opsight::report::view_streams(views[i].name))
      return std::string(views[i].flag) +
             " reads the whole trace (docs/reports.md, \"Streaming reports\")";
  if (!command.window.empty())
    return std::string("a --window is read through the file's time index");
  if (stored_run) return std::nullopt;
  std::error_code error;
  if (command.files.size() != 1 ||
      opsight::io::format_from_path(command.files[0]) != opsight::io::FileFormat::kNative ||
      (std::filesystem::exists(command.files[0], error) &&
       !std::filesystem::is_regular_file(command.files[0], error)))
    return std::string(
        "only one .opsight file or run of the store streams (several files are merged, "
        "other formats are read whole)");
  return std::nullopt;
}

// The views of one native file, streamed (report/streaming_summary.hpp): the same output as
// the whole path, in memory bounded by a few bytes a span.
int run_streamed_report(const std::string& path, const std::vector<std::string>& views,
                        const opsight::report::ReportOptions& options) {
  opsight::report::StreamedReport report = opsight::report::render_streaming(path, views, options);
  if (report.error) {
    print_error(*report.error);
    return kExitError;
  }
  if (report.damage)
    std::fprintf(stderr, "opsight: warning: %s (showing what was read before it)\n",
                 report.damage->c_str());
  for (const std::string& view : report.whole_file_views)
    std::fprintf(stderr,
                 "opsight: note: the %s was read from the whole trace (the file has GPU work: "
                 "its host/device split pairs kernels with their launches)\n",
                 view.c_str());
  std::string out;
  for (const std::string& text : report.texts) {
    if (!out.empty()) out += "\n";  // as run_report joins the views
    out += text;
  }
  if (!write_stdout(out)) return kExitError;
  return report.damage ? kExitDamaged : 0;
}

int run_report(const ReportCommand& command) {
  if (auto problem = opsight::report::validate_sort_key(command.sort)) {
    print_error(*problem);
    return kExitUsage;
  }
  opsight::report::ReportOptions options;
  std::string format_error;  // none: --format takes output_format_names() only
  options.format = opsight::report::parse_output_format(command.format, &format_error)
                       .value_or(opsight::report::OutputFormat::kText);
  options.sort = command.sort;
  options.limit = command.limit;
  options.max_roots = command.max_roots;
  options.max_depth = command.max_depth;
  options.source_name = source_name_of(command.files);
  options.breakdown_span = command.breakdown_span;
  options.breakdown_by_category = command.breakdown_by_category;
  options.operator_categories = command.operator_categories;

  const auto views = opsight::report::report_views();
  std::vector<bool> wanted(views.size(), false);
  size_t wanted_count = 0;
  std::string flags;
  for (size_t i = 0; i < views.size(); ++i) {
    wanted[i] = views[i].needs_span ? !command.breakdown_span.empty() : command.chosen[i] > 0;
    wanted_count += wanted[i] ? 1 : 0;
    flags += std::string(i == 0 ? "" : ", ") + std::string(views[i].flag);
  }
  if (wanted_count == 0) {
    for (size_t i = 0; i < views.size(); ++i) wanted[i] = views[i].name == "summary";
    wanted_count = 1;
  }
  if (wanted_count > 1 && options.format != opsight::report::OutputFormat::kText) {
    print_error("--format " + command.format + " takes one view: choose one of " + flags);
    return kExitUsage;
  }
  std::optional<opsight::io::TimeWindow> window;
  if (!command.window.empty()) {
    std::string problem;
    window = opsight::io::parse_time_window(command.window, &problem);
    if (!window) {
      print_error(problem);
      return kExitUsage;
    }
  }
  std::vector<std::string> wanted_names;
  for (size_t i = 0; i < views.size(); ++i)
    if (wanted[i]) wanted_names.emplace_back(views[i].name);
  // A run of the store streams from its native trace, written to a hidden file beside the
  // store first (a trace kept as a file is decompressed a MiB at a time): with --stream on,
  // or by default from kStreamFromBytes of native trace.
  if (command.stream != "off" && command.files.size() == 1 &&
      !why_report_cannot_stream(command, wanted, /*stored_run=*/true)) {
    opsight::store::StoredRunFile stored = opsight::store::StoredRunFile::open(
        command.files[0], {}, command.stream == "on" ? 0 : kStreamFromBytes);
    if (stored.error()) {
      print_error(*stored.error());
      return kExitError;
    }
    if (!stored.path().empty()) {
      options.source_name = stored.label();
      return run_streamed_report(stored.path(), wanted_names, options);
    }
  }
  if (command.stream != "off") {
    auto why_not = why_report_cannot_stream(command, wanted);
    if (command.stream == "on" && why_not) {
      print_error("--stream on: " + *why_not);
      return kExitUsage;
    }
    std::error_code error;
    if (!why_not && (command.stream == "on" ||
                     std::filesystem::file_size(command.files[0], error) >= kStreamFromBytes)) {
      if (!error) {
        options.source_name = std::filesystem::path(command.files[0]).filename().string();
        return run_streamed_report(command.files[0], wanted_names, options);
      }
    }
  }
  bool damaged = false;
  auto load_start = std::chrono::steady_clock::now();
  std::optional<opsight::trace::Trace> trace;
  if (window) {
    trace = load_traces_in_window(command.files, *window, &damaged);
  } else if (command.files.size() == 1) {
    // A file or a run of the store ("latest", an id, a name): store/trace_source.hpp decides.
    opsight::store::LoadedTrace loaded = opsight::store::load_trace_argument(command.files[0]);
    if (!loaded.ok()) {
      print_error(*loaded.error);
      return loaded.exit_status;
    }
    for (const std::string& damage : loaded.damage) {
      damaged = true;
      std::fprintf(stderr, "opsight: warning: %s (showing what was read before it)\n",
                   damage.c_str());
    }
    options.source_name = loaded.label;
    trace = std::move(loaded.trace);
  } else {
    trace = load_traces(command.files, &damaged);
  }
  if (!trace) return kExitError;
  std::string out;
  auto add_view = [&out](std::string text) {
    if (!out.empty()) out += "\n";
    out += text;
  };
  auto render_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < views.size(); ++i)
    if (wanted[i]) add_view(views[i].render(*trace, options));
  if (!write_stdout(out)) return kExitError;
  if (std::getenv("OPSIGHT_DEBUG_TIMING") != nullptr) {
    auto done = std::chrono::steady_clock::now();
    std::fprintf(
        stderr, "opsight timing: %-28s %8.1f ms\nopsight timing: %-28s %8.1f ms\n", "load (all)",
        std::chrono::duration<double, std::milli>(render_start - load_start).count(),
        "render views", std::chrono::duration<double, std::milli>(done - render_start).count());
  }
  return damaged ? kExitDamaged : 0;
}

// One native file to Chrome JSON or Perfetto protobuf through convert_native_to_chrome_json
// or convert_native_to_perfetto (bounded memory).
int run_streamed_convert(const std::string& input, const std::string& output,
                         opsight::io::FileFormat output_format) {
  opsight::io::FileSink sink(output);
  opsight::io::StreamedConversion counts;
  auto problem = output_format == opsight::io::FileFormat::kPerfetto
                     ? opsight::io::convert_native_to_perfetto(input, sink, &counts)
                     : opsight::io::convert_native_to_chrome_json(input, sink, &counts);
  if (!problem && sink.error()) problem = sink.error();
  if (!problem) problem = sink.commit();
  if (problem) {
    print_error(*problem);
    return kExitError;
  }
  std::fprintf(stderr,
               "opsight: wrote %s (%" PRIu64 " slices, %" PRIu64 " instants, %" PRIu64
               " counter samples; streamed)\n",
               output.c_str(), counts.slices + counts.async_slices, counts.instants,
               counts.counter_samples);
  if (counts.flows_left_out > 0)
    std::fprintf(stderr,
                 "opsight: warning: %" PRIu64
                 " flow events were left out (the streaming conversion does not bind flows; "
                 "--stream off converts them, holding the whole trace in memory)\n",
                 counts.flows_left_out);
  if (!counts.complete) {
    std::fprintf(stderr,
                 "opsight: warning: %s: the recording has no end (the process stopped "
                 "before the session did): converted what was written\n",
                 input.c_str());
    return kExitDamaged;
  }
  return 0;
}

// `files`: the inputs, then the output. `stream`: auto, on or off (--stream).
int run_convert(std::vector<std::string> files, const std::string& stream,
                const std::string& window_text) {
  if (files.size() < 2) {
    print_error("convert needs an input and an output file (see opsight convert --help)");
    return kExitUsage;
  }
  std::optional<opsight::io::TimeWindow> window;
  if (!window_text.empty()) {
    std::string problem;
    window = opsight::io::parse_time_window(window_text, &problem);
    if (!window) {
      print_error(problem);
      return kExitUsage;
    }
    if (stream == "on") {
      print_error(
          "--window and --stream on do not go together (a window is read through the "
          "file's time index, not streamed)");
      return kExitUsage;
    }
  }
  std::string output = files.back();
  files.pop_back();
  auto output_format = opsight::io::format_from_path(output);
  if (!output_format) {
    print_error(opsight::io::unknown_output_format(output));
    return kExitUsage;
  }
  // One native file to Chrome JSON or Perfetto streams when asked, or by default when it
  // is large.
  const bool can_stream =
      files.size() == 1 &&
      (*output_format == opsight::io::FileFormat::kChromeJson ||
       *output_format == opsight::io::FileFormat::kPerfetto) &&
      opsight::io::format_from_path(files[0]) == opsight::io::FileFormat::kNative;
  // .opsight files (a run's processes) into one .opsight merge streaming
  // (io::merge_native_files: docs/native-format.md, "Streaming merge").
  bool can_merge = *output_format == opsight::io::FileFormat::kNative;
  for (const std::string& file : files)
    can_merge =
        can_merge && opsight::io::format_from_path(file) == opsight::io::FileFormat::kNative;
  if (stream == "on" && !can_stream && !can_merge) {
    print_error(
        "--stream on converts one .opsight file to .json or .pftrace, or merges .opsight "
        "files into one .opsight");
    return kExitUsage;
  }
  if (can_stream && stream != "off" && !window) {
    std::error_code error;
    const auto size = std::filesystem::file_size(files[0], error);
    if (stream == "on" || (!error && size >= kStreamFromBytes))
      return run_streamed_convert(files[0], output, *output_format);
  }
  if (can_merge && stream != "off" && !window) {
    uintmax_t total = 0;
    for (const std::string& file : files) {
      std::error_code error;
      const auto size = std::filesystem::file_size(file, error);
      total += error ? 0 : size;
    }
    if (stream == "on" || total >= kStreamFromBytes) {
      opsight::io::FileSink sink(output);
      opsight::io::MergeFilesResult merged = opsight::io::merge_native_files(files, sink);
      std::optional<std::string> problem = merged.error ? sink.error() : sink.commit();
      if (!problem) problem = merged.error;
      if (problem) {
        print_error(*problem);
        return kExitError;
      }
      for (const std::string& damage : merged.damage)
        std::fprintf(stderr, "opsight: warning: %s (merged what was read before it)\n",
                     damage.c_str());
      std::fprintf(stderr, "opsight: wrote %s (%zu file%s merged, streamed)\n", output.c_str(),
                   files.size(), files.size() == 1 ? "" : "s");
      return merged.damage.empty() ? 0 : kExitDamaged;
    }
  }
  bool damaged = false;
  auto trace =
      window ? load_traces_in_window(files, *window, &damaged) : load_traces(files, &damaged);
  if (!trace) return kExitError;
  if (auto problem = opsight::io::write_trace_file(*trace, output)) {
    print_error(*problem);
    return kExitError;
  }
  std::fprintf(stderr, "opsight: wrote %s (%zu slices, %zu instants, %zu counter samples)\n",
               output.c_str(), trace->slices.size(), trace->instants.size(),
               trace->counters.size());
  return damaged ? kExitDamaged : 0;
}

// The bundled example program: next to an installed opsight (../libexec/opsight/) or in
// the build tree; OPSIGHT_DEMO_PROGRAM overrides both.
std::optional<std::string> find_demo_program() {
  if (const char* path = std::getenv("OPSIGHT_DEMO_PROGRAM")) return std::string(path);
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    auto bin = self.parent_path();
    for (auto candidate : {bin / "../libexec/opsight/opsight_quick_start",
                           bin / "../../examples/cpp/quick_start/opsight_quick_start"}) {
      if (std::filesystem::exists(candidate, error)) return candidate.lexically_normal().string();
    }
  }
#ifdef OPSIGHT_BUILD_DIR
  std::string built =
      std::string(OPSIGHT_BUILD_DIR) + "/examples/cpp/quick_start/opsight_quick_start";
  if (std::filesystem::exists(built, error)) return built;
#endif
  return std::nullopt;
}

int run_demo(const std::string& prefix, int iterations) {
  auto program = find_demo_program();
  if (!program) {
    print_error("cannot find the demo program opsight_quick_start (set OPSIGHT_DEMO_PROGRAM)");
    return kExitError;
  }
  std::string native_path = prefix + ".opsight";
  std::string json_path = prefix + ".json";
  std::fprintf(stderr,
               "opsight demo: running %s (main -> func1 -> func2 with sleeps, %d iterations)\n",
               program->c_str(), iterations);
  std::fprintf(stderr, "opsight demo: OPSIGHT_OUTPUT=%s, no code change\n\n", native_path.c_str());
  std::fflush(stderr);

  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    if (text.starts_with("OPSIGHT_OUTPUT=")) continue;
    environment.emplace_back(text);
  }
  environment.push_back("OPSIGHT_OUTPUT=" + native_path);
  std::vector<char*> env_pointers;
  for (auto& entry : environment) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);
  std::string iterations_text = std::to_string(iterations);
  std::vector<char*> argv = {program->data(), iterations_text.data(), nullptr};
  pid_t child = 0;
  if (int failed = posix_spawn(&child, program->c_str(), nullptr, nullptr, argv.data(),
                               env_pointers.data())) {
    print_error(*program + ": cannot start: " + std::strerror(failed));
    return kExitError;
  }
  int status = 0;
  pid_t waited = 0;
  do {
    waited = waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited < 0) {
    print_error(*program + ": cannot wait for it: " + std::strerror(errno));
    return kExitError;
  }
  if (WIFSIGNALED(status)) {
    print_error(*program + " was killed by signal " + std::to_string(WTERMSIG(status)));
    return kExitError;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    print_error(*program + " failed with exit status " + std::to_string(WEXITSTATUS(status)));
    return kExitError;
  }
  bool damaged = false;
  auto trace = load_trace(native_path, &damaged);
  if (!trace) return kExitError;
  opsight::report::ReportOptions options;
  options.source_name = native_path;
  std::string out = opsight::report::render_tree(*trace, options) + "\n" +
                    opsight::report::render_summary(*trace, options);
  if (!write_stdout(out)) return kExitError;
  if (auto problem = opsight::io::write_trace_file(*trace, json_path)) {
    print_error(*problem);
    return kExitError;
  }
  std::printf("\nwrote %s (native) and %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
              native_path.c_str(), json_path.c_str());
  std::printf("next: opsight report %s --table --sort self\n", native_path.c_str());
  return damaged ? kExitDamaged : 0;
}

// `opsight index FILE`: io::add_native_index, and what it did, on stdout.
int run_index(const std::string& path) {
  opsight::io::NativeIndexAdded added;
  bool already_indexed = false;
  if (auto error = opsight::io::add_native_index(path, &added, &already_indexed)) {
    print_error(*error);
    return kExitError;
  }
  std::printf(
      "%s: indexed %" PRIu64 " chunks (%" PRIu64 " of events), appended %" PRIu64 " bytes\n",
      path.c_str(), added.chunks_indexed, added.events_chunks_indexed, added.bytes_appended);
  if (added.bytes_left_out != 0)
    std::printf("%s: left out the last %" PRIu64 " bytes, from byte %" PRIu64
                " (%s: the process died mid-write?); they stay in the file, unread\n",
                path.c_str(), added.bytes_left_out, added.left_out_offset,
                added.left_out_why.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The exit statuses from the one table (opsight/exit_codes.hpp), as the Python half's.
  std::string description = "opsight: see where the time of a program goes.\nExit statuses:";
  for (const opsight::ExitStatus& status : opsight::kExitStatuses) {
    std::string code = std::to_string(status.code);
    description += "\n  " + code + std::string(code.size() < 4 ? 4 - code.size() : 1, ' ') +
                   std::string(status.meaning);
  }
  CLI::App app{description, "opsight"};
  app.set_version_flag("--version", std::string("opsight ") + opsight::version());
  app.require_subcommand(1);

  ReportCommand report;
  auto* report_command = app.add_subcommand(
      "report",
      "Summarize a trace (.opsight or Chrome JSON); several files (the processes of one run) "
      "are merged into one report");
  report_command
      ->add_option("files", report.files,
                   "Trace file(s), or one run of the store (an id, latest, latest~N, a name)")
      ->required();
  {
    const auto views = opsight::report::report_views();
    for (size_t i = 0; i < views.size(); ++i) {
      std::string flag(views[i].flag), help(views[i].help);
      if (views[i].needs_span)
        report_command->add_option(flag, report.breakdown_span, help);
      else
        report_command->add_flag(flag, report.chosen[i], help);
      if (views[i].name == "breakdown")
        report_command->add_flag("--by-category", report.breakdown_by_category,
                                 "--breakdown: group phases by the children's category, not name");
      if (views[i].name == "operators")
        report_command
            ->add_option("--ops-category", report.operator_categories,
                         "--ops: a category counted as an operator (default: operator, "
                         "gpu_kernel); repeat the flag or separate with commas")
            ->allow_extra_args(false)
            ->delimiter(',');
    }
  }
  report_command->add_option("--format", report.format, "Output format")
      ->check(CLI::IsMember(opsight::report::output_format_names()))
      ->capture_default_str();
  report_command
      ->add_option("--sort", report.sort, "Sort rows by total, self, count, mean, p99 or name")
      ->capture_default_str();
  report_command->add_option("--limit", report.limit, "Show at most N rows (0: all)")
      ->capture_default_str();
  report_command->add_option("--max-roots", report.max_roots, "Tree: show at most N roots (0: all)")
      ->capture_default_str();
  report_command
      ->add_option("--depth", report.max_depth,
                   "Tree: show N levels under each root, fold deeper spans into a count (0: all)")
      ->capture_default_str();
  report_command
      ->add_option("--stream", report.stream,
                   "--summary, --table, --ops, --merged-tree and --breakdown of one .opsight "
                   "file without loading the trace (a few bytes a span, the same output): auto "
                   "(files of 1 GiB or more), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  report_command->add_option(
      "--window", report.window,
      "Only FROM:TO of the trace, in time from its first event (units ns, us, ms, s; e.g. "
      "2.5s:3s): the spans that overlap it, the instants and samples inside it; a .opsight "
      "file decodes only the chunks the window needs");

  std::vector<std::string> convert_files;
  auto* convert_command = app.add_subcommand(
      "convert",
      "Convert between .opsight, Chrome JSON (.json) and Perfetto protobuf (.pftrace), by "
      "extension: opsight convert INPUT... OUTPUT; several inputs are merged into one output");
  convert_command
      ->add_option(
          "files", convert_files,
          "Input trace(s), then the output file (" + opsight::io::written_extensions() + ")")
      ->required()
      ->expected(2, CLI::detail::expected_max_vector_size);
  std::string convert_stream = "auto";
  convert_command
      ->add_option("--stream", convert_stream,
                   "One .opsight file to .json or .pftrace in bounded memory, each event written "
                   "as it is read (flows left out, counted), or .opsight files merged into one "
                   ".opsight (the same trace as the whole merge): auto (inputs of 1 GiB or "
                   "more), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  std::string convert_window;
  convert_command->add_option(
      "--window", convert_window,
      "Convert only FROM:TO of the trace, in time from its first event (units ns, us, ms, s; "
      "e.g. 2.5s:3s): the spans that overlap it, the instants and samples inside it");

  std::string index_file;
  auto* index_command = app.add_subcommand(
      "index",
      "Write the time index that a .opsight file lacks (a process killed with SIGKILL never "
      "writes one), appending it to the file in place, so that report --window and convert "
      "--window read only the chunks a window needs. The file's bytes are never rewritten: a "
      "crash meanwhile leaves it readable by a scan, as before. A chunk cut short at the end "
      "(the process died mid-write) is left out, and said so. A file that already has an "
      "index is refused (exit status 1)");
  index_command->add_option("file", index_file, "The .opsight file")->required();

  std::string demo_prefix = "opsight-demo";
  int demo_iterations = 5;
  auto* demo_command =
      app.add_subcommand("demo", "Trace the bundled quick-start program and report it");
  demo_command
      ->add_option("-o,--output", demo_prefix, "Output path prefix (.opsight and .json are added)")
      ->capture_default_str();
  demo_command->add_option("--iterations", demo_iterations, "Calls of func1 from main")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();

  opsight::cli::StoreCommands store_commands(app);  // save, runs, show, rm
  opsight::cli::CompareCommand compare_command(app);
  opsight::cli::ExportCommand export_command(app);
  opsight::cli::DevicesCommand devices_command(app, opsight::cli::devices_source_of_this_build());
  opsight::cli::UiCommand ui_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    std::string message = error.what();
    while (!message.empty() && message.back() == '\n') message.pop_back();
    std::fprintf(stderr, "opsight: error: %s (see opsight --help)\n", message.c_str());
    return kExitUsage;
  }
  try {
    if (*report_command) return run_report(report);
    if (*convert_command) return run_convert(convert_files, convert_stream, convert_window);
    if (*index_command) return run_index(index_file);
    if (*demo_command) return run_demo(demo_prefix, demo_iterations);
    if (auto status = store_commands.run()) return *status;
    if (auto status = compare_command.run()) return *status;
    if (auto status = export_command.run()) return *status;
    if (auto status = devices_command.run()) return *status;
    if (auto status = ui_command.run()) return *status;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return kExitError;
  } catch (const std::exception& failure) {
    print_error(failure.what());
    return kExitError;
  }
  return kExitUsage;
}
