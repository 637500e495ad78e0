#include "export/otlp/otlp_sinks.hpp"

#include <cctype>
#include <cstdio>

#include "export/export.hpp"
#include "export/otlp/grpc_sender.hpp"
#include "export/otlp/otlp_encoder.hpp"
#include "export/otlp/otlp_logs_encoder.hpp"
#include "export/otlp/otlp_metrics_encoder.hpp"

namespace opsight::exporting::otlp {

namespace {

// The signals opsight sends over OTLP, each with its own variables and path.
struct Signal {
  std::string_view variable;  // "TRACES": OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, ...
  std::string_view path;      // "/v1/traces"
};
constexpr Signal kTraces{"TRACES", "/v1/traces"};
constexpr Signal kMetrics{"METRICS", "/v1/metrics"};
constexpr Signal kLogs{"LOGS", "/v1/logs"};

// The signal's own variable (OTEL_EXPORTER_OTLP_<SIGNAL>_<setting>) first, then the
// general one (OTEL_EXPORTER_OTLP_<setting>): the specification's order. `name_used` is
// the one that was read, for messages.
std::string_view setting(const Environment& environment, const Signal& signal,
                         std::string_view name, std::string* name_used) {
  *name_used = "OTEL_EXPORTER_OTLP_" + std::string(signal.variable) + "_" + std::string(name);
  std::string_view value = environment_value(environment, name_used->c_str());
  if (value.empty()) {
    *name_used = "OTEL_EXPORTER_OTLP_" + std::string(name);
    value = environment_value(environment, name_used->c_str());
  }
  return value;
}

// gRPC's endpoint is an address, never a path: the signal's variable, else the general one,
// used as it is, and a scheme-less host:port is TLS unless ..._INSECURE is true (the
// specification).
std::optional<std::string> grpc_url(const Environment& environment, const Signal& signal,
                                    std::string& url) {
  std::string name;
  if (url.empty()) url = setting(environment, signal, "ENDPOINT", &name);
  if (url.empty()) url = "http://localhost:4317";
  if (url.find("://") != std::string::npos) return std::nullopt;
  std::string insecure(setting(environment, signal, "INSECURE", &name));
  for (char& character : insecure)
    character = static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
  if (!insecure.empty() && insecure != "true" && insecure != "false")
    return name + " '" + insecure + "' is not true or false";
  url = (insecure == "true" ? "http://" : "https://") + url;
  return std::nullopt;
}

// OTLP/HTTP: OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as is, else OTEL_EXPORTER_OTLP_ENDPOINT +
// the signal's path, else the default; a URL given without a path gets the signal's path.
std::string http_url(const Environment& environment, const Signal& signal, std::string url,
                     std::string* default_path) {
  *default_path = std::string(signal.path);
  if (!url.empty()) return url;
  std::string name = "OTEL_EXPORTER_OTLP_" + std::string(signal.variable) + "_ENDPOINT";
  if (auto own = environment_value(environment, name.c_str()); !own.empty()) {
    *default_path = "/";
    return std::string(own);
  }
  if (auto base = environment_value(environment, "OTEL_EXPORTER_OTLP_ENDPOINT"); !base.empty()) {
    std::string joined(base);
    while (!joined.empty() && joined.back() == '/') joined.pop_back();
    return joined + std::string(signal.path);
  }
  return "http://localhost:4318" + std::string(signal.path);
}

// Compression, timeout and TLS files, each checked now rather than at the first request.
std::optional<std::string> read_settings(const Environment& environment, const Signal& signal,
                                         ExportTarget& target) {
  std::string name;
  std::string_view compression = setting(environment, signal, "COMPRESSION", &name);
  if (compression == "gzip")
    target.gzip = true;
  else if (!compression.empty() && compression != "none")
    return name + " '" + std::string(compression) + "' is not gzip or none";
  std::string_view timeout = setting(environment, signal, "TIMEOUT", &name);
  if (!timeout.empty()) {
    auto milliseconds = parse_whole_number(timeout);
    if (!milliseconds || *milliseconds == 0)
      return name + " '" + std::string(timeout) +
             "' is not a positive whole number of milliseconds";
    target.timeout_s = static_cast<double>(*milliseconds) / 1000.0;
  }
  struct TlsFile {
    std::string_view setting;
    std::string* path;
  };
  for (const TlsFile& file : {TlsFile{"CERTIFICATE", &target.ca_certificate_path},
                              TlsFile{"CLIENT_CERTIFICATE", &target.client_certificate_path},
                              TlsFile{"CLIENT_KEY", &target.client_key_path}}) {
    std::string_view path = setting(environment, signal, file.setting, &name);
    if (path.empty()) continue;
    *file.path = std::string(path);
    if (std::FILE* opened = std::fopen(file.path->c_str(), "rb"))
      std::fclose(opened);
    else
      return name + " '" + *file.path + "': cannot be read";
  }
  if (target.client_certificate_path.empty() != target.client_key_path.empty())
    return "mutual TLS needs both OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and "
           "OTEL_EXPORTER_OTLP_CLIENT_KEY (or their " +
           std::string(signal.variable) + "_ forms)";
  return std::nullopt;
}

// OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS over OTEL_EXPORTER_OTLP_HEADERS, key by key.
std::optional<std::string> read_headers(const Environment& environment, const Signal& signal,
                                        ExportTarget& target) {
  std::vector<std::string> header_errors;
  std::string own = "OTEL_EXPORTER_OTLP_" + std::string(signal.variable) + "_HEADERS";
  for (const char* variable : {"OTEL_EXPORTER_OTLP_HEADERS", own.c_str()}) {
    // An entry, not a structured binding: clang 14 cannot capture those in a lambda.
    for (auto& entry :
         parse_key_value_list(environment_value(environment, variable), &header_errors)) {
      const std::string& key = entry.first;
      std::erase_if(target.headers, [&](const auto& header) { return header.first == key; });
      target.headers.emplace_back(key, entry.second);
    }
  }
  if (!header_errors.empty()) return "OTEL_EXPORTER_OTLP_HEADERS: " + header_errors.front();
  return std::nullopt;
}

// gRPC metadata keys are lowercase [0-9a-z_.-] (not grpc-...); values printable ASCII.
std::optional<std::string> check_grpc_metadata(ExportTarget& target) {
  for (auto& [key, value] : target.headers) {
    for (char& character : key)
      character = static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
    bool key_ok = !key.empty() && key.rfind("grpc-", 0) != 0;
    for (char character : key)
      key_ok = key_ok &&
               ((character >= 'a' && character <= 'z') || (character >= '0' && character <= '9') ||
                character == '_' || character == '.' || character == '-');
    if (!key_ok)
      return "OTEL_EXPORTER_OTLP_HEADERS: '" + key +
             "' cannot be gRPC metadata (lowercase 0-9 a-z _ . -, not grpc-...)";
    for (char character : value)
      if (character < 0x20 || character > 0x7E)
        return "OTEL_EXPORTER_OTLP_HEADERS: the value of '" + key +
               "' is not printable ASCII, as gRPC metadata must be";
  }
  if (target.endpoint.path != "/")
    return "a gRPC endpoint is host and port only; '" + target.endpoint.path +
           "' is a path (OTLP/HTTP's; gRPC's method is fixed)";
  if (!target.endpoint.user_info.empty())
    return "gRPC sends no user:password from the URL; give it as a header "
           "(OTEL_EXPORTER_OTLP_HEADERS=authorization=Basic ...)";
  return std::nullopt;
}

// What every OTLP target of `signal` reads, over HTTP (`grpc` false: `url` completed with
// the signal's path) or gRPC (an address without a path): endpoint, headers, compression,
// timeout, TLS files.
std::optional<std::string> parse_signal(const Signal& signal, bool grpc, std::string_view rest,
                                        const Environment& environment, ExportTarget& target) {
  if (grpc && !grpc_available()) {
    std::string why;
    make_grpc_sender({}, &why);
    return why;
  }
  std::string url(rest), default_path = "/";
  if (grpc) {
    if (auto why = grpc_url(environment, signal, url)) return why;
  } else {
    url = http_url(environment, signal, std::move(url), &default_path);
  }
  if (auto why = read_headers(environment, signal, target)) return why;
  if (auto why = read_settings(environment, signal, target)) return why;
  if (auto why = set_http_endpoint(target, url, default_path)) return why;
  if (grpc) return check_grpc_metadata(target);
  return std::nullopt;
}

std::optional<std::string> parse(std::string_view spelling, std::string_view rest,
                                 const Environment& environment, ExportTarget& target) {
  std::string_view protocol = environment_value(environment, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
  if (protocol.empty()) protocol = environment_value(environment, "OTEL_EXPORTER_OTLP_PROTOCOL");
  if (spelling == "otlp" && !protocol.empty() && protocol != "http/protobuf" &&
      protocol != "http/json" && protocol != "grpc")
    return "OTEL_EXPORTER_OTLP_PROTOCOL '" + std::string(protocol) +
           "' is not supported (opsight speaks grpc, http/protobuf and http/json)";
  bool json = spelling == "otlp-json" || (spelling == "otlp" && protocol == "http/json");
  bool grpc = spelling == "otlp-grpc" || (spelling == "otlp" && protocol == "grpc");
  target.sink = grpc ? &grpc_sink() : json ? &json_sink() : &protobuf_sink();
  return parse_signal(kTraces, grpc, rest, environment, target);
}

// Metrics and logs: `plain` (otlp-metrics, otlp-logs) is OTLP/HTTP protobuf unless
// OTEL_EXPORTER_OTLP_[<SIGNAL>_]PROTOCOL is grpc, which makes it the gRPC sibling, as for
// traces; the -grpc spelling is gRPC whatever the variables say. http/json is refused.
std::optional<std::string> parse_signal_protocol(const Signal& signal, std::string_view spelling,
                                                 std::string_view plain, std::string_view what,
                                                 const Environment& environment, bool* grpc) {
  *grpc = spelling != plain;
  if (*grpc) return std::nullopt;
  std::string name;
  std::string_view protocol = setting(environment, signal, "PROTOCOL", &name);
  if (protocol == "grpc")
    *grpc = true;
  else if (!protocol.empty() && protocol != "http/protobuf")
    return name + " '" + std::string(protocol) + "': opsight sends " + std::string(what) +
           " as http/protobuf or grpc (traces also take http/json)";
  return std::nullopt;
}

// otlp-metrics: OTLP/HTTP protobuf to /v1/metrics (otlp-metrics-grpc: MetricsService/Export),
// with the METRICS_ variables, and the temporality
// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE asks for.
std::optional<std::string> parse_metrics(std::string_view spelling, std::string_view rest,
                                         const Environment& environment, ExportTarget& target) {
  bool grpc = false;
  if (auto why =
          parse_signal_protocol(kMetrics, spelling, "otlp-metrics", "metrics", environment, &grpc))
    return why;
  target.sink = grpc ? &metrics_grpc_sink() : &metrics_sink();
  std::string temporality(
      environment_value(environment, "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"));
  for (char& character : temporality)
    character = static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
  if (temporality == "delta" || temporality == "lowmemory")
    target.delta_temporality = true;
  else if (!temporality.empty() && temporality != "cumulative")
    return "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE '" + temporality +
           "' is not cumulative, delta or lowmemory";
  return parse_signal(kMetrics, grpc, rest, environment, target);
}

// otlp-logs: OTLP/HTTP protobuf to /v1/logs (otlp-logs-grpc: LogsService/Export), with the
// LOGS_ variables.
std::optional<std::string> parse_logs(std::string_view spelling, std::string_view rest,
                                      const Environment& environment, ExportTarget& target) {
  bool grpc = false;
  if (auto why = parse_signal_protocol(kLogs, spelling, "otlp-logs", "logs", environment, &grpc))
    return why;
  target.sink = grpc ? &logs_grpc_sink() : &logs_sink();
  return parse_signal(kLogs, grpc, rest, environment, target);
}

std::string metrics_request(const trace::Trace& trace, const SpanView& view,
                            const ExportTarget& target, uint64_t* data_points) {
  std::span<const Attribute> resource;
  if (!view.resources().empty()) resource = view.resources().front().attributes;
  return encode_otlp_metrics(
      metrics_of(trace, &view), resource, metrics_interval_of(trace),
      target.delta_temporality ? MetricsTemporality::kDelta : MetricsTemporality::kCumulative,
      data_points);
}

std::string live_metrics_request(const MetricsSnapshot& metrics,
                                 std::span<const Attribute> resource, uint64_t start_unix_ns,
                                 uint64_t end_unix_ns, const ExportTarget& target,
                                 uint64_t* data_points) {
  return encode_otlp_metrics(
      metrics, resource, MetricsInterval{start_unix_ns, end_unix_ns},
      target.delta_temporality ? MetricsTemporality::kDelta : MetricsTemporality::kCumulative,
      data_points);
}

// One gRPC channel to the target, calling `Method` (the signal's service's Export).
template <const std::string_view* Method>
std::unique_ptr<BatchSender> make_channel(const ExportTarget& target, double timeout_s,
                                          std::string_view opsight_version) {
  GrpcSenderOptions options;
  const Endpoint& endpoint = target.endpoint;
  options.address = endpoint.host.find(':') != std::string::npos
                        ? "[" + endpoint.host + "]:" + std::to_string(endpoint.port)
                        : endpoint.host + ":" + std::to_string(endpoint.port);
  options.method = std::string(*Method);
  options.label = target.label();
  options.item = std::string(target.sink->item);
  options.tls = endpoint.scheme == "https";
  options.ca_certificate_path = target.ca_certificate_path;
  options.client_certificate_path = target.client_certificate_path;
  options.client_key_path = target.client_key_path;
  options.headers = target.headers;
  options.gzip = target.gzip;
  options.timeout_s = target.timeout_s > 0 ? target.timeout_s : timeout_s;
  options.user_agent = grpc_user_agent_for(opsight_version);
  std::string error;
  if (auto sender = make_grpc_sender(options, &error)) return sender;
  return make_failing_sender(target.label() + " " + endpoint.origin(), error);
}

}  // namespace

const SinkDescription& protobuf_sink() {
  static const SinkDescription description{
      .name = "otlp",
      .aliases = {"otlp-protobuf"},
      .syntax = "otlp[=URL]",
      .summary =
          "OTLP/HTTP, protobuf (JSON or gRPC when OTEL_EXPORTER_OTLP_PROTOCOL says so); "
          "default http://localhost:4318/v1/traces",
      .parse = parse,
      .make_encoder = stateless_encoder<encode_otlp_protobuf>,
      .http_content_type = "application/x-protobuf",
      .reads_otlp_partial_success = true,
  };
  return description;
}

const SinkDescription& metrics_sink() {
  static const SinkDescription description{
      .name = "otlp-metrics",
      .syntax = "otlp-metrics[=URL]",
      .summary =
          "the run's metrics (span-duration histograms, counters, the tracer's own "
          "cost) as OTLP/HTTP protobuf (gRPC when OTEL_EXPORTER_OTLP_METRICS_PROTOCOL says "
          "so); default http://localhost:4318/v1/metrics",
      .payload = SinkPayload::kMetrics,
      .item = "data point",
      .parse = parse_metrics,
      .metrics_body = metrics_request,
      .live_metrics_body = live_metrics_request,
      .http_content_type = "application/x-protobuf",
      .reads_otlp_partial_success = true,
  };
  return description;
}

const SinkDescription& logs_sink() {
  static const SinkDescription description{
      .name = "otlp-logs",
      .syntax = "otlp-logs[=URL]",
      .summary =
          "the program's log records (Python logging, with the span each was logged in) as "
          "OTLP/HTTP protobuf (gRPC when OTEL_EXPORTER_OTLP_LOGS_PROTOCOL says so); default "
          "http://localhost:4318/v1/logs",
      .payload = SinkPayload::kLogs,
      .item = "log record",
      .parse = parse_logs,
      .logs_body = encode_otlp_logs,
      .http_content_type = "application/x-protobuf",
      .reads_otlp_partial_success = true,
  };
  return description;
}

const SinkDescription& metrics_grpc_sink() {
  static const SinkDescription description{
      .name = "otlp-metrics-grpc",
      .syntax = "otlp-metrics-grpc[=URL]",
      .summary =
          "the run's metrics as OTLP/gRPC (MetricsService/Export; also otlp-metrics when "
          "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL says grpc); default http://localhost:4317",
      .payload = SinkPayload::kMetrics,
      .item = "data point",
      .parse = parse_metrics,
      .metrics_body = metrics_request,
      .live_metrics_body = live_metrics_request,
      .make_sender = make_channel<&kOtlpMetricsExportMethod>,
  };
  return description;
}

const SinkDescription& logs_grpc_sink() {
  static const SinkDescription description{
      .name = "otlp-logs-grpc",
      .syntax = "otlp-logs-grpc[=URL]",
      .summary =
          "the program's log records as OTLP/gRPC (LogsService/Export; also otlp-logs when "
          "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL says grpc); default http://localhost:4317",
      .payload = SinkPayload::kLogs,
      .item = "log record",
      .parse = parse_logs,
      .logs_body = encode_otlp_logs,
      .make_sender = make_channel<&kOtlpLogsExportMethod>,
  };
  return description;
}

const SinkDescription& json_sink() {
  static const SinkDescription description{
      .name = "otlp-json",
      .syntax = "otlp-json[=URL]",
      .summary = "OTLP/HTTP, JSON; default http://localhost:4318/v1/traces",
      .parse = parse,
      .make_encoder = stateless_encoder<encode_otlp_json>,
      .http_content_type = "application/json",
  };
  return description;
}

const SinkDescription& grpc_sink() {
  static const SinkDescription description{
      .name = "otlp-grpc",
      .syntax = "otlp-grpc[=URL]",
      .summary = "OTLP/gRPC (TraceService/Export); default http://localhost:4317",
      .parse = parse,
      .make_encoder = stateless_encoder<encode_otlp_protobuf>,
      .make_sender = make_channel<&kOtlpTraceExportMethod>,
  };
  return description;
}

}  // namespace opsight::exporting::otlp
