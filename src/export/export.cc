#include "export/export.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <tuple>

#include "export/sink.hpp"

namespace opsight::exporting {

Environment process_environment() {
  return [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
}

std::optional<ExportTarget> parse_export_target(std::string_view spec,
                                                const Environment& environment,
                                                std::string* error) {
  // "kind", "kind=...", or "kind?..." (a Kafka target with the default broker).
  size_t kind_end = spec.find_first_of("=?");
  std::string_view kind = spec.substr(0, kind_end);
  std::string_view rest = kind_end == std::string_view::npos ? std::string_view()
                          : spec[kind_end] == '='            ? spec.substr(kind_end + 1)
                                                             : spec.substr(kind_end);
  auto fail = [&](const std::string& why) -> std::optional<ExportTarget> {
    if (error) *error = "export target '" + hide_user_info(spec) + "': " + why;
    return std::nullopt;
  };
  const SinkDescription* sink = find_sink(kind);
  if (sink == nullptr)
    return fail("unknown kind '" + std::string(kind) + "' (" + sink_spellings_for_messages() + ")");
  ExportTarget target;
  target.sink = sink;
  if (auto why = sink->parse(kind, rest, environment, target)) return fail(*why);
  return target;
}

ResourceOptions resource_options_from(const Environment& environment, std::string service_name,
                                      std::vector<std::string>* warnings) {
  ResourceOptions options;
  std::vector<std::string> errors;
  options.attributes =
      parse_key_value_list(environment_value(environment, "OTEL_RESOURCE_ATTRIBUTES"), &errors);
  if (warnings)
    for (const std::string& entry : errors)
      warnings->push_back("OTEL_RESOURCE_ATTRIBUTES: " + entry);
  options.service_name = std::move(service_name);
  if (options.service_name.empty())
    options.service_name = std::string(environment_value(environment, "OTEL_SERVICE_NAME"));
  if (options.service_name.empty())
    for (const auto& [key, value] : options.attributes)
      if (key == "service.name") options.service_name = value;
  // OpenTelemetry's opt-in for its experimental conventions: a comma list of names.
  std::string_view opt_in = environment_value(environment, "OTEL_SEMCONV_STABILITY_OPT_IN");
  for (size_t start = 0; start <= opt_in.size();) {
    size_t comma = std::min(opt_in.find(',', start), opt_in.size());
    std::string_view name = opt_in.substr(start, comma - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name == "gen_ai_latest_experimental") options.gen_ai_conventions = true;
    start = comma + 1;
  }
  return options;
}

std::string apply_batch_environment(const Environment& environment, bool batch_given,
                                    TraceExportOptions* options) {
  auto read = [&](const char* name, std::optional<uint64_t>* out) -> std::string {
    std::string_view text = environment_value(environment, name);
    if (text.empty()) return {};
    *out = parse_whole_number(text);
    if (!*out || **out == 0)
      return std::string(name) + " '" + std::string(text) + "' is not a positive whole number";
    return {};
  };
  std::optional<uint64_t> batch, queue, delay, timeout;
  for (auto [name, out] :
       {std::pair{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &batch},
        std::pair{"OTEL_BSP_MAX_QUEUE_SIZE", &queue}, std::pair{"OTEL_BSP_SCHEDULE_DELAY", &delay},
        std::pair{"OTEL_BSP_EXPORT_TIMEOUT", &timeout}})
    if (std::string error = read(name, out); !error.empty()) return error;
  if (batch && !batch_given) options->batch_spans = static_cast<size_t>(*batch);
  if (queue) {
    // The specification: a batch larger than the queue is cut to the queue's size.
    options->batch_spans = std::min<size_t>(options->batch_spans, static_cast<size_t>(*queue));
    options->exporter.max_queued_batches = static_cast<size_t>(
        (*queue + options->batch_spans - 1) / std::max<size_t>(1, options->batch_spans));
  }
  if (delay) options->schedule_delay_s = static_cast<double>(*delay) / 1000.0;
  if (timeout) options->exporter.max_elapsed_s = static_cast<double>(*timeout) / 1000.0;

  std::optional<uint64_t> interval, metric_timeout, log_batch, log_queue, log_delay, log_timeout;
  for (auto [name, out] : {std::pair{"OTEL_METRIC_EXPORT_INTERVAL", &interval},
                           std::pair{"OTEL_METRIC_EXPORT_TIMEOUT", &metric_timeout},
                           std::pair{"OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", &log_batch},
                           std::pair{"OTEL_BLRP_MAX_QUEUE_SIZE", &log_queue},
                           std::pair{"OTEL_BLRP_SCHEDULE_DELAY", &log_delay},
                           std::pair{"OTEL_BLRP_EXPORT_TIMEOUT", &log_timeout}})
    if (std::string error = read(name, out); !error.empty()) return error;
  if (interval) options->metric_export_interval_s = static_cast<double>(*interval) / 1000.0;
  if (metric_timeout)
    options->metric_export_timeout_s = static_cast<double>(*metric_timeout) / 1000.0;
  if (log_batch) options->log_batch_records = static_cast<size_t>(*log_batch);
  if (log_queue) options->log_max_queue_records = static_cast<size_t>(*log_queue);
  // As for spans: a batch larger than the queue is cut to the queue's size.
  options->log_batch_records = std::min(options->log_batch_records, options->log_max_queue_records);
  if (log_delay) options->log_schedule_delay_s = static_cast<double>(*log_delay) / 1000.0;
  if (log_timeout) options->log_export_timeout_s = static_cast<double>(*log_timeout) / 1000.0;
  return {};
}

bool sdk_disabled(const Environment& environment) {
  std::string value(environment_value(environment, "OTEL_SDK_DISABLED"));
  for (char& character : value)
    character = static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
  while (!value.empty() && value.back() == ' ') value.pop_back();
  while (!value.empty() && value.front() == ' ') value.erase(value.begin());
  return value == "true";
}

std::unique_ptr<BatchSender> make_http_sender(const ExportTarget& target, double timeout_s,
                                              std::string_view opsight_version) {
  HttpSenderOptions options;
  options.timeout_s = target.timeout_s > 0 ? target.timeout_s : timeout_s;
  options.headers = target.headers;
  options.label = target.label();
  options.gzip = target.gzip;
  options.read_otlp_partial_success = target.sink->reads_otlp_partial_success;
  options.item = std::string(target.sink->item);
  options.user_agent = user_agent_for(opsight_version);
  options.ca_certificate_path = target.ca_certificate_path;
  options.client_certificate_path = target.client_certificate_path;
  options.client_key_path = target.client_key_path;
  options.content_type = std::string(target.sink->http_content_type);
  options.method = std::string(target.sink->http_method);
  return std::make_unique<HttpSender>(target.endpoint, std::move(options));
}

namespace {

// The sinks OTEL_METRIC_EXPORT_TIMEOUT bounds: the OTLP metrics exporters, the ones a
// periodic reader drives (live_metrics_body); a Pushgateway is not OpenTelemetry's.
bool periodic_metrics_target(const ExportTarget& target) {
  return target.sink->payload == SinkPayload::kMetrics && target.sink->live_metrics_body;
}

}  // namespace

std::vector<std::unique_ptr<BatchSender>> make_senders(const ExportTarget& original,
                                                       const TraceExportOptions& options) {
  size_t count = original.sink->single_sender ? 1 : std::max<size_t>(1, options.requests_in_flight);
  double timeout_s = std::min(options.timeout_s, 10.0);
  ExportTarget target = original;
  if (periodic_metrics_target(target)) {
    // No request outlasts the export it is part of: the target's own timeout, or the
    // default, cut to OTEL_METRIC_EXPORT_TIMEOUT.
    double request_s = target.timeout_s > 0 ? target.timeout_s : timeout_s;
    target.timeout_s = std::min(request_s, options.metric_export_timeout_s);
  }
  std::vector<std::unique_ptr<BatchSender>> senders;
  for (size_t i = 0; i < count; ++i)
    senders.push_back(options.make_sender
                          ? options.make_sender(target)
                          : make_sender(target, timeout_s, options.resource.opsight_version));
  return senders;
}

BatchExporterOptions exporter_options_for(const ExportTarget& target,
                                          const TraceExportOptions& options) {
  BatchExporterOptions exporter = options.exporter;
  if (periodic_metrics_target(target)) exporter.max_elapsed_s = options.metric_export_timeout_s;
  return exporter;
}

std::unique_ptr<BatchSender> make_sender(const ExportTarget& target, double timeout_s,
                                         std::string_view opsight_version) {
  if (target.sink->make_sender) return target.sink->make_sender(target, timeout_s, opsight_version);
  return make_http_sender(target, timeout_s, opsight_version);
}

void encode_batches(const SpanView& view, std::span<const trace::RowIndex> rows,
                    const ExportTarget& target, size_t batch_spans,
                    const std::function<void(EncodedBatch)>& emit) {
  if (rows.empty() || !target.sink->make_encoder) return;
  size_t batch = std::max<size_t>(1, batch_spans);
  std::unique_ptr<SpanBatchEncoder> encoder = target.sink->make_encoder(view);
  // One trace per batch: the rows grouped by trace (in view order within one).
  std::vector<trace::RowIndex> by_trace;
  bool one_trace = target.sink->one_trace_per_batch;
  if (one_trace) {
    by_trace.assign(rows.begin(), rows.end());
    std::stable_sort(by_trace.begin(), by_trace.end(), [&](trace::RowIndex a, trace::RowIndex b) {
      trace::TraceId id_a = view.trace_id(a), id_b = view.trace_id(b);
      return std::tie(id_a.high, id_a.low) < std::tie(id_b.high, id_b.low);
    });
    rows = by_trace;
  }
  auto batch_end = [&](size_t begin) {
    size_t end = std::min(begin + batch, rows.size());
    if (!one_trace) return end;
    trace::TraceId first = view.trace_id(rows[begin]);
    size_t cut = begin + 1;
    while (cut < end && view.trace_id(rows[cut]) == first) ++cut;
    return cut;
  };
  for (size_t begin = 0, end = 0; begin < rows.size(); begin = end) {
    end = batch_end(begin);
    auto batch_rows = rows.subspan(begin, end - begin);
    EncodedBatch encoded;
    encoded.spans = batch_rows.size();
    encoder->encode(batch_rows, encoded);
    emit(std::move(encoded));
  }
}

void encode_log_batches(const LogView& logs, const ExportTarget& target, size_t batch_records,
                        const std::function<void(EncodedBatch)>& emit) {
  if (!target.sink->logs_body) return;
  auto records = logs.records();
  size_t batch = std::max<size_t>(1, batch_records);
  for (size_t begin = 0; begin < records.size(); begin += batch) {
    auto batch_records_span = records.subspan(begin, std::min(batch, records.size() - begin));
    EncodedBatch encoded;
    encoded.spans = batch_records_span.size();
    encoded.body = target.sink->logs_body(logs, batch_records_span);
    emit(std::move(encoded));
  }
}

std::vector<TargetReport> export_trace(const trace::Trace& trace,
                                       const std::vector<ExportTarget>& targets,
                                       const TraceExportOptions& options) {
  using Clock = std::chrono::steady_clock;
  SpanView view(trace, options.resource);
  struct Running {
    std::unique_ptr<BatchExporter> exporter;
    Clock::time_point start;
  };
  std::unique_ptr<LogView> logs;  // made once, for the first logs target
  std::vector<Running> running;
  for (const ExportTarget& original : targets) {
    ExportTarget target = original;
    if (target.sink->complete_for_trace) target.sink->complete_for_trace(target, trace);
    running.push_back({std::make_unique<BatchExporter>(make_senders(target, options),
                                                       exporter_options_for(target, options)),
                       Clock::now()});
    BatchExporter& exporter = *running.back().exporter;
    Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options.timeout_s));
    auto remaining = [&] {
      return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
    };
    if (target.sink->payload == SinkPayload::kMetrics) {
      uint64_t items = view.span_count();
      std::string body = target.sink->metrics_body(trace, view, target, &items);
      exporter.offer({std::move(body), items}, remaining());
      continue;
    }
    if (target.sink->payload == SinkPayload::kLogs) {
      if (!logs) logs = std::make_unique<LogView>(view);
      encode_log_batches(*logs, target, options.batch_spans, [&](EncodedBatch batch) {
        exporter.offer(std::move(batch), remaining());
      });
      continue;
    }
    encode_batches(view, view.rows(), target, options.batch_spans,
                   [&](EncodedBatch batch) { exporter.offer(std::move(batch), remaining()); });
  }
  std::vector<TargetReport> reports;
  for (size_t i = 0; i < running.size(); ++i) {
    Running& entry = running[i];
    entry.exporter->shutdown(options.timeout_s);
    reports.push_back({entry.exporter->describe(), entry.exporter->stats(),
                       std::chrono::duration<double>(Clock::now() - entry.start).count(),
                       std::string(targets[i].sink->item)});
  }
  return reports;
}

}  // namespace opsight::exporting
