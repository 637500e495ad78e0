// `opsight export TRACE... --to KIND[=URL]...`: sends recorded runs (trace files or runs of
// the store) to the observability stack: OTLP over HTTP (protobuf or JSON), Zipkin, a
// Prometheus Pushgateway (src/export/export.hpp lists the kinds and how the OTEL_*
// variables fill them in). Prints one line per target: spans sent and dropped, retries,
// bytes and time (or JSON with --format json).
//
// Exit status: 0 everything sent; 1 an input is unusable or a span was dropped (the line
// says why); 2 an input was damaged (what was whole is sent); 64 bad usage.
//
// Thread-safety: none; one per process, used by main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace opsight::cli {

class ExportCommand {
 public:
  explicit ExportCommand(CLI::App& app);
  ExportCommand(const ExportCommand&) = delete;
  ExportCommand& operator=(const ExportCommand&) = delete;

  // The exit status when `export` was the parsed command; nullopt otherwise.
  std::optional<int> run();

 private:
  CLI::App* command_ = nullptr;
  std::vector<std::string> traces_;
  std::vector<std::string> targets_;
  std::string service_;
  size_t batch_spans_ = 512;
  double timeout_s_ = 30;
  std::string format_ = "text";
  std::string store_path_;
};

}  // namespace opsight::cli
