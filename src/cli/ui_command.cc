#include "cli/ui_command.hpp"

#include <spawn.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "cli/output.hpp"
#include "io/io.hpp"
#include "opsight/exit_codes.hpp"
#include "server/static_files.hpp"
#include "server/ui_server.hpp"
#include "store/run_store.hpp"

extern char** environ;

namespace opsight::cli {
namespace {

// The same rule as store::load_trace_argument: a path, or what looks like one, is a file.
bool names_a_file(const std::string& argument) {
  std::error_code error;
  return argument.find('/') != std::string::npos || io::format_from_path(argument).has_value() ||
         argument.ends_with(".gz") ||
         (std::filesystem::exists(argument, error) &&
          !std::filesystem::is_directory(argument, error));
}

// Starts the desktop's browser on `url` without waiting for it.
void open_in_browser(const std::string& url) {
  const char* configured = std::getenv("BROWSER");
  std::string program = configured != nullptr && *configured ? configured : "xdg-open";
  std::vector<char*> argv = {program.data(), const_cast<char*>(url.c_str()), nullptr};
  pid_t child = 0;
  if (posix_spawnp(&child, program.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
    std::fprintf(stderr, "opsight ui: cannot start %s: open %s yourself\n", program.c_str(),
                 url.c_str());
}

}  // namespace

UiCommand::UiCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "ui",
      "Serve the web UI: runs, run overview, timeline, call tree / flame graph, compare "
      "(docs/ui.md); opsight ui [RUN | FILE ...]");
  command_->add_option("targets", targets_,
                       "A run to open (id, latest, a name), or trace files to offer beside the "
                       "store's runs");
  command_->add_option("--store", store_path_,
                       "Run store (default $OPSIGHT_HOME/runs.db, else ~/.opsight/runs.db)");
  command_
      ->add_option("--host", host_,
                   "Address to listen on; any but a loopback one needs the printed token")
      ->capture_default_str();
  command_->add_option("--allow-host", allowed_hosts_,
                       "On a non-loopback --host: a DNS name the browser may use for this "
                       "server besides its address, this machine's name and localhost "
                       "(repeatable; a Host header naming anything else gets 403)");
  command_->add_option("--port", port_, "Port (0: any free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command_->add_flag("--open", open_browser_, "Open the UI in the browser");
  command_->add_option("--max-loaded-runs", max_loaded_runs_, "Traces kept in memory at once")
      ->check(CLI::Range(size_t{1}, size_t{1024}))
      ->capture_default_str();
}

std::optional<int> UiCommand::run() {
  if (!*command_) return std::nullopt;
  server::UiServerOptions options;
  options.host = host_;
  options.port = port_;
  options.allowed_hosts = allowed_hosts_;
  options.api.store_path = store_path_;
  options.api.max_loaded_runs = max_loaded_runs_;
  std::string route = "/runs";
  std::vector<std::string> run_references;
  for (const std::string& target : targets_) {
    if (names_a_file(target)) {
      std::error_code error;
      if (!std::filesystem::is_regular_file(target, error)) {
        print_error(target + ": no such trace file");
        return kExitError;
      }
      options.api.files.push_back(std::filesystem::absolute(target).lexically_normal().string());
    } else {
      run_references.push_back(target);
    }
  }
  if (run_references.size() > 1) {
    print_error("opsight ui opens one run (given: " + std::to_string(run_references.size()) +
                "); open the others from the runs page");
    return kExitUsage;
  }
  if (!run_references.empty()) {
    std::string path = store_path_.empty() ? store::RunStore::default_path() : store_path_;
    store::OpenOptions open_options;
    open_options.create = false;
    auto opened = store::RunStore::open(path, open_options);
    if (!opened.ok()) {
      print_error(run_references[0] + ": " + opened.error());
      return kExitError;
    }
    auto record = opened.value()->resolve(run_references[0]);
    if (!record.ok()) {
      print_error(record.error());
      return kExitError;
    }
    route = "/runs/" + std::to_string(record.value().id);
  } else if (options.api.files.size() == 1) {
    route = "/runs/file:0";
  }
#ifdef OPSIGHT_WEB_DIST_DIR
  options.web_root = server::find_web_root(OPSIGHT_WEB_DIST_DIR);
#else
  options.web_root = server::find_web_root("");
#endif
  if (!options.web_root)
    std::fprintf(stderr,
                 "opsight ui: warning: the web app is not built (make install builds it); "
                 "serving the API only\n");

  // SIGINT and SIGTERM are waited for on this thread; the server's threads never see them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::UiServer server(options);
  if (std::string problem = server.start(); !problem.empty()) {
    print_error(problem);
    return kExitError;
  }
  std::string url = server.url(route);
  std::printf("opsight ui: serving %s (Ctrl-C to stop)\n", url.c_str());
  if (!server.access_token().empty())
    std::printf(
        "opsight ui: listening on %s: every API call needs the token %s (it is in the URL)\n",
        host_.c_str(), server.access_token().c_str());
  std::fflush(stdout);
  if (open_browser_) open_in_browser(url);
  int received = 0;
  sigwait(&stop_signals, &received);
  std::fprintf(stderr, "opsight ui: stopping (%s)\n", received == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();
  return kExitOk;
}

}  // namespace opsight::cli
