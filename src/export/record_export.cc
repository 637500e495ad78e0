#include "export/record_export.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "export/batch_exporter.hpp"

namespace opsight::exporting {

namespace {

using Clock = std::chrono::steady_clock;

// Sends `batches` (body, items) to `spec`'s target through one BatchExporter and reports.
TargetReport send_batches(ExportTarget target, std::vector<EncodedBatch> batches,
                          double timeout_s) {
  Clock::time_point start = Clock::now();
  BatchExporter exporter(make_http_sender(target, std::min(timeout_s, 10.0)));
  Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (EncodedBatch& batch : batches) {
    double remaining =
        std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
    exporter.offer(std::move(batch), remaining);
  }
  exporter.shutdown(timeout_s);
  return {exporter.describe(), exporter.stats(),
          std::chrono::duration<double>(Clock::now() - start).count()};
}

// The target `kind=url` names; a bad URL is a report that says why, nothing sent.
std::optional<ExportTarget> target_of(std::string_view kind, std::string_view url, uint64_t items,
                                      TargetReport* failed) {
  std::string error;
  auto target = parse_export_target(
      std::string(kind) + "=" + std::string(url),
      [](const char*) -> const char* { return nullptr; }, &error);
  if (!target) {
    failed->description = std::string(kind) + " " + std::string(url);
    failed->stats.spans_offered = items;
    failed->stats.spans_dropped_failed = items;
    failed->stats.last_error = error;
  }
  return target;
}

}  // namespace

TargetReport push_metric_families(std::string_view url, std::span<const MetricFamily> families,
                                  std::string_view default_job, double timeout_s) {
  uint64_t samples = 0;
  for (const MetricFamily& family : families) samples += family.samples.size();
  TargetReport failed;
  auto target = target_of("pushgateway", url, samples, &failed);
  if (!target) return failed;
  if (target->endpoint.path.empty() || target->endpoint.path == "/")
    target->endpoint.path = "/metrics/job/" + prometheus_name(default_job);
  std::vector<EncodedBatch> batches;
  batches.push_back({prometheus_exposition(families), samples});
  return send_batches(std::move(*target), std::move(batches), timeout_s);
}

TargetReport push_log_lines(std::string_view url, std::span<const LogLine> lines,
                            size_t batch_lines, double timeout_s) {
  TargetReport failed;
  auto target = target_of("loki", url, lines.size(), &failed);
  if (!target) return failed;
  batch_lines = std::max<size_t>(1, batch_lines);
  std::vector<EncodedBatch> batches;
  for (size_t begin = 0; begin < lines.size(); begin += batch_lines) {
    auto batch = lines.subspan(begin, std::min(batch_lines, lines.size() - begin));
    batches.push_back({encode_loki_lines(batch), batch.size()});
  }
  return send_batches(std::move(*target), std::move(batches), timeout_s);
}

}  // namespace opsight::exporting
