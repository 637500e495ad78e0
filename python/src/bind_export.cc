// opsight._native's exporters (src/export): Trace.export to OTLP, Zipkin, Pushgateway, Kafka
// and Loki; targets checked before a program starts; live span export and the /metrics
// endpoint over a run's growing files; metric families and log lines that are not spans.

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "export/export.hpp"
#include "export/live_export.hpp"
#include "export/log_view.hpp"
#include "export/metrics_endpoint.hpp"
#include "export/record_export.hpp"
#include "opsight/opsight.hpp"
#include "schema/metric_names.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

// The targets and options of an export from Python (ValueError for a bad target).
struct ExportRequest {
  std::vector<exporting::ExportTarget> targets;
  exporting::TraceExportOptions options;
  std::vector<std::string> warnings;
};
ExportRequest export_request(const std::vector<std::string>& specs, const std::string& service,
                             double timeout_s, size_t batch_spans) {
  exporting::Environment environment = exporting::process_environment();
  ExportRequest request;
  for (const std::string& spec : specs) {
    std::string error;
    auto target = exporting::parse_export_target(spec, environment, &error);
    if (!target) throw std::invalid_argument(error);
    request.targets.push_back(std::move(*target));
  }
  request.options.resource =
      exporting::resource_options_from(environment, service, &request.warnings);
  request.options.resource.opsight_version = opsight::version();
  request.options.timeout_s = timeout_s;
  // batch_spans 0: OTEL_BSP_MAX_EXPORT_BATCH_SIZE, else 512; OTEL_BSP_* (export.hpp).
  request.options.batch_spans = batch_spans == 0 ? 512 : batch_spans;
  if (std::string error =
          exporting::apply_batch_environment(environment, batch_spans != 0, &request.options);
      !error.empty())
    throw std::invalid_argument(error);
  request.options.batch_spans = std::max<size_t>(1, request.options.batch_spans);
  return request;
}

nb::list export_reports(const std::vector<exporting::TargetReport>& reports,
                        const std::vector<std::string>& warnings);

// Records what an export did in the trace's run info ("export:<target>", see
// schema/metric_names.hpp), so that its reports, its file and its stored run show it.
void note_export(store::LoadedTrace& loaded, const std::string& target, uint64_t spans,
                 uint64_t sent, uint64_t dropped) {
  std::string key = std::string(schema::kExportPrefix) + target;
  std::erase_if(loaded.trace.run.extra, [&](const auto& entry) { return entry.first == key; });
  loaded.trace.run.extra.emplace_back(
      std::move(key),
      std::to_string(spans) + " " + std::to_string(sent) + " " + std::to_string(dropped));
}

nb::list export_trace(store::LoadedTrace& loaded, const std::vector<std::string>& specs,
                      const std::string& service, double timeout_s, size_t batch_spans) {
  ExportRequest request = export_request(specs, service, timeout_s, batch_spans);
  std::vector<exporting::TargetReport> reports;
  {
    nb::gil_scoped_release release;
    reports = exporting::export_trace(loaded.trace, request.targets, request.options);
  }
  for (const auto& report : reports)
    note_export(loaded, report.description, report.stats.spans_offered, report.stats.spans_sent,
                report.stats.spans_dropped());
  return export_reports(reports, request.warnings);
}

nb::list export_reports(const std::vector<exporting::TargetReport>& reports,
                        const std::vector<std::string>& warnings) {
  nb::list out;
  for (const auto& report : reports) {
    nb::dict entry;
    entry["target"] = report.description;
    entry["spans"] = report.stats.spans_offered;  // the items the sink sends (entry["item"])
    entry["item"] = report.item;
    entry["sent"] = report.stats.spans_sent;
    entry["dropped"] = report.stats.spans_dropped();
    entry["requests"] = report.stats.batches_sent;
    entry["retries"] = report.stats.retries;
    entry["bytes"] = report.stats.bytes_sent;
    entry["seconds"] = report.seconds;
    // Every cause of a drop, with its count (a slow server's drops say why too).
    entry["error"] =
        report.stats.spans_dropped() > 0 ? report.stats.drop_reasons() : report.stats.last_error;
    entry["warnings"] = warnings;
    out.append(entry);
  }
  return out;
}

// Trace.log_records: the trace's log records (the logging bridge's) as the log exporters
// send them (export/log_view.hpp), one dict each, grouped by process, by time within one.
nb::list log_records(const store::LoadedTrace& loaded) {
  exporting::SpanView spans(loaded.trace, {});
  exporting::LogView logs(spans);
  auto text = [](std::string_view value) { return nb::str(value.data(), value.size()); };
  nb::list out;
  std::vector<exporting::Attribute> attributes;
  for (uint32_t record : logs.records()) {
    nb::dict entry;
    const trace::Track& track = loaded.trace.tracks[logs.track(record)];
    entry["time_unix_ns"] = logs.time_unix_ns(record);
    entry["level"] = logs.level(record);
    entry["level_name"] = text(logs.level_name(record));
    entry["severity_number"] = exporting::severity_number(logs.level(record));
    entry["message"] = text(logs.message(record));
    entry["logger"] = text(logs.logger(record));
    entry["pid"] = track.pid;
    entry["tid"] = track.tid;
    if (logs.has_span(record)) {
      entry["trace_id"] = logs.trace_id(record).to_hex();
      entry["span_id"] = trace::span_id_to_hex(logs.span_id(record));
    } else {
      entry["trace_id"] = nb::none();
      entry["span_id"] = nb::none();
    }
    nb::dict values;
    logs.attributes(record, attributes);
    for (const exporting::Attribute& attribute : attributes) {
      const exporting::AttributeValue& value = attribute.value;
      nb::str key = text(attribute.key);
      switch (value.type) {
        case exporting::AttributeValue::Type::kString:
          values[key] = text(value.string_value);
          break;
        case exporting::AttributeValue::Type::kBool:
          values[key] = nb::bool_(value.int_value != 0);
          break;
        case exporting::AttributeValue::Type::kInt:
          values[key] = nb::int_(value.int_value);
          break;
        case exporting::AttributeValue::Type::kDouble:
          values[key] = nb::float_(value.double_value);
          break;
      }
    }
    entry["attributes"] = values;
    out.append(entry);
  }
  return out;
}

// Metrics and log lines that are not a trace's (export/record_export.hpp), for opsight
// explain: families as [(name, type, help, [(labels, value), ...]), ...], lines as
// [(labels, unix_ns, line), ...], labels as [(name, value), ...].
using LabelPairs = std::vector<std::pair<std::string, std::string>>;
using FamilyTuple =
    std::tuple<std::string, std::string, std::string, std::vector<std::pair<LabelPairs, double>>>;
using LineTuple = std::tuple<LabelPairs, int64_t, std::string>;

nb::dict push_metric_families(const std::string& url, const std::vector<FamilyTuple>& families,
                              const std::string& default_job, double timeout_s) {
  std::vector<exporting::MetricFamily> converted;
  for (const auto& [name, type, help, samples] : families) {
    exporting::MetricFamily family{name, type, help, {}};
    for (const auto& sample : samples) family.samples.push_back({sample.first, sample.second});
    converted.push_back(std::move(family));
  }
  exporting::TargetReport report;
  {
    nb::gil_scoped_release release;
    report = exporting::push_metric_families(url, converted, default_job, timeout_s);
  }
  return nb::borrow<nb::dict>(export_reports({report}, {})[0]);
}

nb::dict push_log_lines(const std::string& url, const std::vector<LineTuple>& lines,
                        size_t batch_lines, double timeout_s) {
  std::vector<exporting::LogLine> converted;
  converted.reserve(lines.size());
  for (const auto& line : lines)
    converted.push_back({std::get<0>(line), std::get<1>(line), std::get<2>(line)});
  exporting::TargetReport report;
  {
    nb::gil_scoped_release release;
    report = exporting::push_log_lines(url, converted, batch_lines, timeout_s);
  }
  return nb::borrow<nb::dict>(export_reports({report}, {})[0]);
}

}  // namespace

void bind_export(nb::module_& m, TraceClass& trace_class) {
  trace_class
      .def("note_export", &note_export, nb::arg("target"), nb::arg("spans"), nb::arg("sent"),
           nb::arg("dropped"),
           "Records what an export did (live export's reports) in the run info: reports show "
           "it in their overhead line, and the file and the run store keep it.")
      .def("log_records", &log_records,
           "The program's log records (the logging bridge's), each with the trace and span "
           "ids of the span it was logged in (None outside spans), as otlp-logs sends them.")
      .def("export", &export_trace, nb::arg("targets"), nb::arg("service") = "",
           nb::arg("timeout_s") = 30.0, nb::arg("batch_spans") = 0,
           "Sends the trace to each target (the kinds of _native.export_sinks(): otlp[=URL], "
           "otlp-metrics[=URL], otlp-logs[=URL], zipkin[=URL], pushgateway=URL, "
           "kafka[=BROKERS][?...], loki[=URL], loki-logs[=URL], ...); one dict per target, also "
           "recorded in the trace's run info "
           "(note_export).");

  // Export targets and OTEL_* settings checked before a program starts: ValueError naming
  // what is wrong (an unknown kind, a URL that is not one, a librdkafka property, an
  // OTEL_EXPORTER_OTLP_PROTOCOL opsight does not speak, a bad OTEL_BSP_* value).
  m.def(
      "check_export_targets",
      [](const std::vector<std::string>& targets) { export_request(targets, "", 1.0, 0); },
      nb::arg("targets"));
  m.def("otel_sdk_disabled",
        [] { return exporting::sdk_disabled(exporting::process_environment()); });

  // The core's table of export sinks (export/sink.hpp): what a target may start with, for
  // the Python package's parsing of OPSIGHT_EXPORT, --export and targets files.
  m.def("export_sinks", [] {
    nb::list sinks;
    for (const exporting::SinkDescription* sink : exporting::sinks()) {
      nb::dict entry;
      entry["name"] = std::string(sink->name);
      nb::list spellings;
      for (std::string_view spelling : sink->spellings()) spellings.append(std::string(spelling));
      entry["spellings"] = spellings;
      entry["syntax"] = std::string(sink->syntax);
      entry["summary"] = std::string(sink->summary);
      entry["payload"] = sink->payload == exporting::SinkPayload::kSpans     ? "spans"
                         : sink->payload == exporting::SinkPayload::kMetrics ? "metrics"
                         : sink->payload == exporting::SinkPayload::kLogs    ? "logs"
                                                                             : "served";
      entry["item"] = std::string(sink->item);
      // Whether `opsight run --export-live` streams it (LiveSpanExporter): spans and log
      // records as they are written, metrics periodically where the sink can.
      entry["live"] =
          sink->payload == exporting::SinkPayload::kSpans ||
          sink->payload == exporting::SinkPayload::kLogs ||
          (sink->payload == exporting::SinkPayload::kMetrics && sink->live_metrics_body != nullptr);
      sinks.append(entry);
    }
    return sinks;
  });

  // Live span export from the trace files of a run (export/live_export.hpp).
  nb::class_<exporting::LiveSpanExporter>(m, "LiveSpanExporter")
      .def(
          "__init__",
          [](exporting::LiveSpanExporter* self, const std::string& directory,
             const std::vector<std::string>& targets, const std::string& service,
             double timeout_s) {
            ExportRequest request = export_request(targets, service, timeout_s, 0);
            new (self)
                exporting::LiveSpanExporter(directory, "trace.", ".opsight",
                                            std::move(request.targets), std::move(request.options));
          },
          nb::arg("directory"), nb::arg("targets"), nb::arg("service") = "",
          nb::arg("timeout_s") = 10.0)
      .def("start", &exporting::LiveSpanExporter::start)
      .def(
          "stop",
          [](exporting::LiveSpanExporter& exporter, double timeout_s) {
            std::vector<exporting::TargetReport> reports;
            {
              nb::gil_scoped_release release;
              reports = exporter.stop(timeout_s);
            }
            return export_reports(reports, {});
          },
          nb::arg("timeout_s") = 10.0);

  // The live /metrics endpoint over the trace files of a run (export/metrics_endpoint.hpp).
  nb::class_<exporting::MetricsEndpoint>(m, "MetricsEndpoint")
      .def(nb::init<std::string, std::string, std::string>(), nb::arg("directory"),
           nb::arg("prefix") = "trace.", nb::arg("suffix") = ".opsight")
      .def(
          "start",
          [](exporting::MetricsEndpoint& endpoint, const std::string& host, int port) {
            if (std::string error = endpoint.start(host, port); !error.empty())
              throw std::runtime_error(error);
            return endpoint.port();
          },
          nb::arg("host") = "127.0.0.1", nb::arg("port") = 0)
      .def_prop_ro("port", &exporting::MetricsEndpoint::port)
      .def("scrape", &exporting::MetricsEndpoint::scrape, nb::call_guard<nb::gil_scoped_release>())
      .def("stop", &exporting::MetricsEndpoint::stop, nb::call_guard<nb::gil_scoped_release>());

  m.def("push_metric_families", &push_metric_families, nb::arg("url"), nb::arg("families"),
        nb::arg("default_job") = "opsight", nb::arg("timeout_s") = 30.0,
        "PUTs metric families to a Pushgateway; returns the report (sent, dropped, error).");
  m.def("push_log_lines", &push_log_lines, nb::arg("url"), nb::arg("lines"),
        nb::arg("batch_lines") = 500, nb::arg("timeout_s") = 30.0,
        "POSTs labelled log lines to Loki's push API; returns the report.");
}

}  // namespace opsight::python
