#include "export/prometheus/prometheus_sinks.hpp"

#include "export/export.hpp"
#include "export/prometheus/prometheus_text.hpp"

namespace opsight::exporting::prometheus {

namespace {

// Percent-encodes a Pushgateway grouping value (a path segment).
std::string path_segment(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char character : text) {
    bool plain = (character >= 'a' && character <= 'z') || (character >= 'A' && character <= 'Z') ||
                 (character >= '0' && character <= '9') || character == '-' || character == '_' ||
                 character == '.';
    if (plain) {
      out += static_cast<char>(character);
    } else {
      out += '%';
      out += kHex[character >> 4];
      out += kHex[character & 0xF];
    }
  }
  return out.empty() ? "unknown" : out;
}

std::optional<std::string> parse_pushgateway(std::string_view, std::string_view rest,
                                             const Environment&, ExportTarget& target) {
  if (rest.empty()) return "a Pushgateway needs its URL (pushgateway=http://host:9091)";
  return set_http_endpoint(target, rest, "");
}

void complete_for_trace(ExportTarget& target, const trace::Trace& trace) {
  if (target.endpoint.path.empty() || target.endpoint.path == "/")
    target.endpoint.path = "/metrics/job/opsight/instance/" +
                           path_segment(trace.run.host.empty() ? "unknown" : trace.run.host);
}

std::optional<std::string> refuse_served(std::string_view, std::string_view, const Environment&,
                                         ExportTarget&) {
  return "prometheus=[HOST:]PORT is the live /metrics endpoint that `opsight run --export` "
         "serves while the program runs, not a place to send a trace to (for a finished run: "
         "pushgateway=URL)";
}

}  // namespace

const SinkDescription& pushgateway_sink() {
  static const SinkDescription description{
      .name = "pushgateway",
      .syntax = "pushgateway=URL",
      .summary =
          "the run's metrics in Prometheus text, PUT to a Pushgateway under "
          "/metrics/job/opsight/instance/<host> unless the URL has a path",
      .payload = SinkPayload::kMetrics,
      .parse = parse_pushgateway,
      .metrics_body = [](const trace::Trace& trace, const SpanView&, const ExportTarget&,
                         uint64_t*) { return prometheus_exposition(trace); },
      .complete_for_trace = complete_for_trace,
      .http_content_type = "text/plain; version=0.0.4; charset=utf-8",
      .http_method = "PUT",
  };
  return description;
}

const SinkDescription& served_sink() {
  static const SinkDescription description{
      .name = "prometheus",
      .syntax = "prometheus=[HOST:]PORT",
      .summary =
          "opsight run only: serve the metrics live on /metrics (Prometheus text or "
          "OpenMetrics) while the program runs",
      .payload = SinkPayload::kServed,
      .parse = refuse_served,
  };
  return description;
}

}  // namespace opsight::exporting::prometheus
