// The export module's entry: where to send a trace, said the way users say it, and the
// one call that sends a whole trace there.
//
//   otlp[=URL]           OTLP over HTTP, protobuf (or JSON when OTEL_EXPORTER_OTLP_PROTOCOL
//                        or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is http/json); without a URL,
//                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is), else
//                        OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else
//                        http://localhost:4318/v1/traces; a URL without a path gets
//                        /v1/traces. Headers from OTEL_EXPORTER_OTLP_HEADERS and
//                        OTEL_EXPORTER_OTLP_TRACES_HEADERS; gzip bodies with
//                        OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION=gzip; a per-request bound
//                        from OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT (ms); for https, a CA
//                        from OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE and a client
//                        certificate and key (mTLS) from ..._CLIENT_CERTIFICATE and
//                        ..._CLIENT_KEY. A signal-specific (TRACES_) variable wins over
//                        the general one.
//   otlp-json=URL, otlp-protobuf=URL   the same with the body format fixed
//   otlp-grpc[=URL]      OTLP over gRPC (grpc_sender.hpp; also `otlp` when
//                        OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL is grpc): the same protobuf
//                        request, the same variables, with gRPC's meanings: the endpoint
//                        (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT,
//                        else http://localhost:4317) is used as is, without a path; http://
//                        is plaintext, https:// TLS, and a scheme-less host:port is TLS
//                        unless OTEL_EXPORTER_OTLP_[TRACES_]INSECURE is true; headers are
//                        metadata (lowercased); gzip is gRPC's compression; the timeout is
//                        each call's deadline.
//   zipkin[=URL]         Zipkin v2 JSON; default http://localhost:9411/api/v2/spans
//   pushgateway=URL      the trace's metrics (prometheus_text.hpp) PUT to a Pushgateway
//                        under /metrics/job/opsight/instance/<host> unless URL has a path
//   kafka[=BROKER[,BROKER...]][?topic=NAME&PROPERTY=VALUE...]
//                        one Kafka message per batch of spans of one trace
//                        (kafka_sender.hpp): an OTLP ExportTraceServiceRequest in protobuf,
//                        keyed by that trace's id in hex, header content-type:
//                        application/x-protobuf. Default broker
//                        localhost:9092, topic otlp_spans (the OpenTelemetry Collector's
//                        Kafka receiver's). Every other query parameter is a librdkafka
//                        property (security.protocol, sasl.*, ssl.*, compression.type, acks,
//                        ...), checked here; OPSIGHT_KAFKA_PROPERTIES ("a=b,c=d") sets
//                        properties too (secrets off the command line), the spec's win.
//                        Names and values are percent-decoded (%2C for a comma).
//   otlp-metrics[=URL]   the run's metrics (otlp_metrics_encoder.hpp) as OTLP/HTTP protobuf;
//                        the URL and settings as for otlp with /v1/metrics and the METRICS_
//                        variables; each export bounded by OTEL_METRIC_EXPORT_TIMEOUT
//   otlp-logs[=URL]      the program's log records (log_view.hpp: Python logging's, with the
//                        span each was logged in) as OTLP/HTTP protobuf
//                        ExportLogsServiceRequests; the URL and settings as for otlp with
//                        /v1/logs and the LOGS_ variables (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,
//                        _HEADERS, _COMPRESSION, _TIMEOUT, TLS files over the general ones)
//   otlp-metrics-grpc[=URL], otlp-logs-grpc[=URL]
//                        the same requests over OTLP/gRPC (MetricsService/Export,
//                        LogsService/Export), with otlp-grpc's rules and the METRICS_ / LOGS_
//                        variables; also otlp-metrics / otlp-logs when
//                        OTEL_EXPORTER_OTLP_[METRICS_|LOGS_]PROTOCOL is grpc
//   loki-logs[=URL]      the log records through Loki's push API (as loki, below), streams
//                        labelled service_name and level
//   loki[=URL]           Loki's push API, JSON (loki_encoder.hpp): one log line per span,
//                        streams labelled service_name, span_name, status. Default
//                        http://localhost:3100/loki/api/v1/push; a URL without a path gets
//                        /loki/api/v1/push (VictoriaLogs:
//                        http://host:9428/insert/loki/api/v1/push).
// The service name is --service, else OTEL_SERVICE_NAME, else service.name of
// OTEL_RESOURCE_ATTRIBUTES, else the program's name; OTEL_RESOURCE_ATTRIBUTES adds the rest.
//
// Thread-safety: export_trace runs its own sender threads and returns when they are done;
// the trace must not change meanwhile.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "export/batch_exporter.hpp"
#include "export/http_sender.hpp"
#include "export/sink.hpp"
#include "export/span_view.hpp"
#include "trace/trace.hpp"

namespace opsight::exporting {

// OTLP/HTTP with protobuf bodies: the sink of a default-constructed target.
const SinkDescription* default_sink();

// Where Kafka messages go (the kafka sink; `endpoint` is unused then).
struct KafkaDestination {
  std::string brokers;  // "host:port[,host:port...]"
  std::string topic;
  std::vector<std::pair<std::string, std::string>> properties;  // librdkafka's, in order
};

// One place to send a trace to: its sink (sink.hpp: what it is called, how its batches are
// encoded and sent) and what the target's spec and the environment said of it.
struct ExportTarget {
  const SinkDescription* sink = default_sink();
  Endpoint endpoint;
  std::vector<std::pair<std::string, std::string>> headers;
  bool gzip = false;     // OTLP bodies gzip-compressed (OTEL_EXPORTER_OTLP_COMPRESSION)
  double timeout_s = 0;  // per request (OTEL_EXPORTER_OTLP_TIMEOUT); 0: the export's own
  // PEM files: OTEL_EXPORTER_OTLP_CERTIFICATE (the CA of the server's certificate), and
  // _CLIENT_CERTIFICATE with _CLIENT_KEY (mutual TLS); empty: unset.
  std::string ca_certificate_path, client_certificate_path, client_key_path;
  KafkaDestination kafka;
  // otlp-metrics: delta temporality (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE).
  bool delta_temporality = false;
  // The sink's name: "otlp", "otlp-json", "otlp-grpc", "zipkin", "pushgateway", ...
  std::string label() const { return std::string(sink->name); }
};

Environment process_environment();

// Parses "kind[=URL]" (the kinds and their syntax: sinks() in sink.hpp, listed above);
// nullopt with `error` naming what is wrong.
std::optional<ExportTarget> parse_export_target(std::string_view spec,
                                                const Environment& environment, std::string* error);

// The resource options the environment gives (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES);
// `service_name`, when not empty, wins. Malformed entries are named in `warnings`.
ResourceOptions resource_options_from(const Environment& environment, std::string service_name,
                                      std::vector<std::string>* warnings);

struct TraceExportOptions {
  size_t batch_spans = 512;     // spans per request (the OTLP SDKs' default batch size)
  double timeout_s = 30;        // for the whole export, per target
  double schedule_delay_s = 1;  // live export: a partial batch waits at most this long
  ResourceOptions resource;
  BatchExporterOptions exporter;
  // Makes the sender for a target (tests script answers); default: an HttpSender.
  std::function<std::unique_ptr<BatchSender>(const ExportTarget&)> make_sender;
  // Requests in flight at once per HTTP target (a sender and a thread each); Kafka's
  // producer pipelines on its own and gets one.
  size_t requests_in_flight = 2;
  // Live export (LiveSpanExporter): how often a metrics target sends its metrics (the
  // OpenTelemetry periodic reader's OTEL_METRIC_EXPORT_INTERVAL, default 60 s), and the
  // batch log record processor's settings for log targets (OTEL_BLRP_*): records per
  // request, how long a partial batch waits, records queued at most, and how long one
  // batch may take with its retries (0: the exporter's own bound).
  double metric_export_interval_s = 60;
  // How long one export of an OTLP metrics target (otlp-metrics, otlp-metrics-grpc) may take,
  // at exit as live, retries included, and each request within it at most
  // (OTEL_METRIC_EXPORT_TIMEOUT, the periodic reader's, default 30 s).
  double metric_export_timeout_s = 30;
  size_t log_batch_records = 512;
  double log_schedule_delay_s = 1;
  size_t log_max_queue_records = 2048;
  double log_export_timeout_s = 0;
};

// The OpenTelemetry batch span processor's settings, onto `options` (each only when set):
//   OTEL_BSP_MAX_EXPORT_BATCH_SIZE  spans per request (batch_spans), unless `batch_given`
//   OTEL_BSP_MAX_QUEUE_SIZE         spans waiting (exporter.max_queued_batches, in batches
//                                   of the batch size); not below the batch size
//   OTEL_BSP_SCHEDULE_DELAY         ms a partial batch waits, live (schedule_delay_s)
//   OTEL_BSP_EXPORT_TIMEOUT         ms one batch may take, retries included
//                                   (exporter.max_elapsed_s)
// and, for live export, the periodic metric reader's and the batch log record processor's:
//   OTEL_METRIC_EXPORT_INTERVAL     ms between two exports of a metrics target
//                                   (metric_export_interval_s)
//   OTEL_METRIC_EXPORT_TIMEOUT      ms one export of an OTLP metrics target may take, at
//                                   exit too (metric_export_timeout_s)
//   OTEL_BLRP_MAX_EXPORT_BATCH_SIZE, OTEL_BLRP_MAX_QUEUE_SIZE, OTEL_BLRP_SCHEDULE_DELAY,
//   OTEL_BLRP_EXPORT_TIMEOUT        the same four for log records (log_*)
// Returns what is wrong with a value ("OTEL_BSP_SCHEDULE_DELAY 'soon': ..."), else empty.
std::string apply_batch_environment(const Environment& environment, bool batch_given,
                                    TraceExportOptions* options);

// OTEL_SDK_DISABLED is "true" (case-insensitive): the OpenTelemetry specification's switch
// that turns an SDK into a no-op; opsight then exports nothing at exit or live (it still
// records). An explicit `opsight export` ignores it.
bool sdk_disabled(const Environment& environment);

// The senders of one target's BatchExporter, as many as `options` asks for that kind. An
// OTLP metrics target's requests are bounded by metric_export_timeout_s too.
std::vector<std::unique_ptr<BatchSender>> make_senders(const ExportTarget& target,
                                                       const TraceExportOptions& options);

// The BatchExporter options of one target: options.exporter, with an OTLP metrics target's
// batch given up after metric_export_timeout_s (retries included), as OTEL_BSP_EXPORT_TIMEOUT
// does for spans.
BatchExporterOptions exporter_options_for(const ExportTarget& target,
                                          const TraceExportOptions& options);

struct TargetReport {
  std::string description;  // "otlp http://127.0.0.1:4318/v1/traces"
  ExportStats stats;
  double seconds = 0;
  // What the stats count (the sink's item), singular: "span", "log record".
  std::string item = "span";
};

// Sends every slice of `trace` to each target (their exporters run concurrently) and
// waits for them to finish, up to the timeout; a logs target (otlp-logs, loki-logs) gets
// the trace's log records instead, in batches of batch_spans records.
std::vector<TargetReport> export_trace(const trace::Trace& trace,
                                       const std::vector<ExportTarget>& targets,
                                       const TraceExportOptions& options);

// The HTTP sender a target uses (content type, method, headers, gzip, the User-Agent that
// names `opsight_version`); the target's own timeout, when set, wins over `timeout_s`.
std::unique_ptr<BatchSender> make_http_sender(const ExportTarget& target, double timeout_s,
                                              std::string_view opsight_version = {});

// Encodes `rows` of `view` for `target`'s sink: one EncodedBatch per batch of at most
// `batch_spans` spans, handed to `emit` in order (export_trace and LiveSpanExporter send
// through it). A sink that wants one trace per batch (Kafka) gets the rows grouped by
// trace, and no batch crosses from one trace to the next. Only for sinks of spans.
void encode_batches(const SpanView& view, std::span<const trace::RowIndex> rows,
                    const ExportTarget& target, size_t batch_spans,
                    const std::function<void(EncodedBatch)>& emit);

// Encodes the log records of `logs` for `target`'s sink (a kLogs sink), in batches of at
// most `batch_records`, handed to `emit` in order.
void encode_log_batches(const LogView& logs, const ExportTarget& target, size_t batch_records,
                        const std::function<void(EncodedBatch)>& emit);

// The sender a target uses: its sink's (a Kafka producer, a gRPC channel), else
// make_http_sender's. A producer or channel that cannot be made gives a sender that fails
// every batch with the reason, so that the spans are counted as dropped and the report
// says why.
std::unique_ptr<BatchSender> make_sender(const ExportTarget& target, double timeout_s,
                                         std::string_view opsight_version = {});

}  // namespace opsight::exporting
