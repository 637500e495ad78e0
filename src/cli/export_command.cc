#include "cli/export_command.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/output.hpp"
#include "export/export.hpp"
#include "opsight/exit_codes.hpp"
#include "store/trace_source.hpp"

namespace opsight::cli {

ExportCommand::ExportCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "export",
      "Send recorded runs to OpenTelemetry (OTLP/HTTP), Zipkin, a Prometheus Pushgateway, "
      "Kafka or Loki's push API: opsight export latest --to otlp=http://127.0.0.1:4318");
  command_
      ->add_option("traces", traces_, "Trace file(s) or runs of the store (an id, latest, a name)")
      ->required();
  command_
      ->add_option(
          "--to", targets_,
          "Where: otlp[=URL], otlp-json=URL, otlp-protobuf=URL, otlp-grpc[=URL] (OTLP/gRPC; "
          "default http://localhost:4317), zipkin[=URL], "
          "pushgateway=URL, kafka[=BROKER[,BROKER...]][?topic=NAME&PROPERTY=VALUE...] "
          "(one message per batch: OTLP protobuf keyed by trace id; other query "
          "parameters are librdkafka properties, e.g. security.protocol=SASL_SSL), "
          "loki[=URL] (push API, one line per span; default path /loki/api/v1/push), "
          "otlp-metrics[=URL] (the run's metrics; otlp-metrics-grpc[=URL] over gRPC), "
          "otlp-logs[=URL] (otlp-logs-grpc[=URL] over gRPC) and loki-logs[=URL] "
          "(the program's log records, with the ids of the span each was logged in). "
          "Repeat for several; otlp without a URL reads OTEL_EXPORTER_OTLP_ENDPOINT; "
          "docs/export.md")
      ->required();
  command_->add_option("--service", service_,
                       "service.name (default: OTEL_SERVICE_NAME, else the program's name)");
  command_->add_option("--batch-size", batch_spans_, "Spans per request")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  command_->add_option("--timeout", timeout_s_, "Seconds to finish sending, per target")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  command_->add_option("--format", format_, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command_->add_option("--store", store_path_,
                       "Run store (default $OPSIGHT_HOME/runs.db, else ~/.opsight/runs.db)");
}

std::optional<int> ExportCommand::run() {
  if (!*command_) return std::nullopt;
  exporting::Environment environment = exporting::process_environment();
  std::vector<exporting::ExportTarget> targets;
  for (const std::string& spec : targets_) {
    std::string error;
    auto target = exporting::parse_export_target(spec, environment, &error);
    if (!target) {
      print_error("--to: " + error);
      return kExitUsage;
    }
    targets.push_back(std::move(*target));
  }
  std::vector<std::string> warnings;
  exporting::TraceExportOptions options;
  options.resource = exporting::resource_options_from(environment, service_, &warnings);
  options.resource.opsight_version = OPSIGHT_VERSION_STRING;
  options.batch_spans = batch_spans_;
  options.timeout_s = timeout_s_;
  // OTEL_BSP_*: --batch-size, when given, wins over OTEL_BSP_MAX_EXPORT_BATCH_SIZE.
  if (std::string error = exporting::apply_batch_environment(
          environment, command_->count("--batch-size") > 0, &options);
      !error.empty()) {
    print_error(error);
    return kExitUsage;
  }
  for (const std::string& warning : warnings)
    std::fprintf(stderr, "opsight: warning: %s (ignored)\n", warning.c_str());

  int status = kExitOk;
  nlohmann::json json_out = nlohmann::json::array();
  for (const std::string& argument : traces_) {
    store::LoadedTrace loaded = store::load_trace_argument(argument, store_path_);
    if (!loaded.ok()) {
      print_error(*loaded.error);
      status = std::max(status, loaded.exit_status == kExitUsage ? kExitError : loaded.exit_status);
      continue;
    }
    for (const std::string& damage : loaded.damage) {
      std::fprintf(stderr, "opsight: warning: %s (sending what was read before it)\n",
                   damage.c_str());
      if (status == kExitOk) status = kExitDamaged;
    }
    auto reports = exporting::export_trace(loaded.trace, targets, options);
    for (const auto& report : reports) {
      const auto& stats = report.stats;
      if (stats.spans_dropped() > 0) status = kExitError;
      if (format_ == "json") {
        json_out.push_back(
            {{"trace", loaded.label},
             {"target", report.description},
             {"spans", stats.spans_offered},
             {"item", report.item},
             {"sent", stats.spans_sent},
             {"dropped", stats.spans_dropped()},
             {"dropped_queue_full", stats.spans_dropped_queue_full},
             {"dropped_failed", stats.spans_dropped_failed},
             {"dropped_shutdown", stats.spans_dropped_shutdown},
             {"requests", stats.batches_sent},
             {"retries", stats.retries},
             {"bytes", stats.bytes_sent},
             {"seconds", report.seconds},
             {"error", stats.spans_dropped() ? stats.drop_reasons() : stats.last_error}});
        continue;
      }
      std::string line =
          fmt::format("{}: {} -> {}: {} of {} {}s sent in {} request{} ({:.1f} KiB, {:.2f} s)",
                      stats.spans_dropped() ? "opsight: error" : "exported", loaded.label,
                      report.description, stats.spans_sent, stats.spans_offered, report.item,
                      stats.batches_sent, stats.batches_sent == 1 ? "" : "s",
                      static_cast<double>(stats.bytes_sent) / 1024.0, report.seconds);
      if (stats.retries)
        line += fmt::format(", {} retr{}", stats.retries, stats.retries == 1 ? "y" : "ies");
      if (stats.spans_dropped()) {
        line += fmt::format("; {} dropped: {}", stats.spans_dropped(), stats.drop_reasons());
      }
      std::fprintf(stats.spans_dropped() ? stderr : stdout, "%s\n", line.c_str());
    }
  }
  if (format_ == "json") std::printf("%s\n", json_out.dump(2).c_str());
  return status;
}

}  // namespace opsight::cli
