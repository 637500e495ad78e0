// `opsight ui [RUN | FILE ...] [--store PATH] [--host H] [--port N] [--open]`: serves the
// web UI (src/server/ui_server.hpp) until Ctrl-C (SIGINT) or SIGTERM. FILE arguments (an
// existing path, or one that looks like a path) are offered as runs "file:0", "file:1"...
// beside the store's runs; a RUN argument (an id, latest, a name) is checked and opened
// first. It prints the URL to open (with the access token when --host is not a loopback
// address); --open hands it to the desktop's browser (xdg-open, or $BROWSER).
//
// Exit status: 0 stopped by a signal; 1 a RUN names no run, a FILE is missing, or the
// address cannot be bound; 64 bad usage.
//
// Thread-safety: none; one per process, used by main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace opsight::cli {

class UiCommand {
 public:
  explicit UiCommand(CLI::App& app);
  UiCommand(const UiCommand&) = delete;
  UiCommand& operator=(const UiCommand&) = delete;

  // The exit status when `ui` was the parsed command; nullopt otherwise.
  std::optional<int> run();

 private:
  CLI::App* command_ = nullptr;
  std::vector<std::string> targets_;
  std::string store_path_;
  std::string host_ = "127.0.0.1";
  std::vector<std::string> allowed_hosts_;
  int port_ = 8765;
  bool open_browser_ = false;
  size_t max_loaded_runs_ = 4;
};

}  // namespace opsight::cli
