#include "export/export.hpp"

#include <chrono>
#include <cstdlib>

#include "export/otlp_encoder.hpp"
#include "export/prometheus_text.hpp"
#include "export/zipkin_encoder.hpp"

namespace opsight::exporting {

namespace {

std::string_view env_or_empty(const Environment& environment, const char* name) {
  const char* value = environment(name);
  return value == nullptr ? std::string_view() : std::string_view(value);
}

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

}  // namespace

std::string ExportTarget::label() const {
  switch (kind) {
    case ExportKind::kOtlpProtobuf:
      return "otlp";
    case ExportKind::kOtlpJson:
      return "otlp-json";
    case ExportKind::kZipkin:
      return "zipkin";
    case ExportKind::kPushgateway:
      return "pushgateway";
  }
  return "?";
}

Environment process_environment() {
  return [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
}

std::optional<ExportTarget> parse_export_target(std::string_view spec,
                                                const Environment& environment,
                                                std::string* error) {
  size_t equals = spec.find('=');
  std::string_view kind = spec.substr(0, equals);
  std::string_view url =
      equals == std::string_view::npos ? std::string_view() : spec.substr(equals + 1);
  ExportTarget target;
  std::string default_path;
  std::string url_text(url);
  auto fail = [&](const std::string& why) -> std::optional<ExportTarget> {
    if (error) *error = "export target '" + std::string(spec) + "': " + why;
    return std::nullopt;
  };
  if (kind == "otlp" || kind == "otlp-json" || kind == "otlp-protobuf") {
    std::string_view protocol = env_or_empty(environment, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
    if (protocol.empty()) protocol = env_or_empty(environment, "OTEL_EXPORTER_OTLP_PROTOCOL");
    if (kind == "otlp" && !protocol.empty() && protocol != "http/protobuf" &&
        protocol != "http/json")
      return fail("OTEL_EXPORTER_OTLP_PROTOCOL '" + std::string(protocol) +
                  "' is not supported (opsight speaks http/protobuf and http/json)");
    bool json = kind == "otlp-json" || (kind == "otlp" && protocol == "http/json");
    target.kind = json ? ExportKind::kOtlpJson : ExportKind::kOtlpProtobuf;
    default_path = "/v1/traces";
    if (url_text.empty()) {
      if (auto traces = env_or_empty(environment, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
          !traces.empty()) {
        url_text = std::string(traces);
        default_path = "/";  // used as is
      } else if (auto base = env_or_empty(environment, "OTEL_EXPORTER_OTLP_ENDPOINT");
                 !base.empty()) {
        url_text = std::string(base);
        while (!url_text.empty() && url_text.back() == '/') url_text.pop_back();
        url_text += "/v1/traces";
      } else {
        url_text = "http://localhost:4318/v1/traces";
      }
    }
    std::vector<std::string> header_errors;
    for (const char* variable :
         {"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}) {
      for (auto& [key, value] :
           parse_key_value_list(env_or_empty(environment, variable), &header_errors)) {
        std::erase_if(target.headers, [&](const auto& header) { return header.first == key; });
        target.headers.emplace_back(key, value);
      }
    }
    if (!header_errors.empty()) return fail("OTEL_EXPORTER_OTLP_HEADERS: " + header_errors.front());
  } else if (kind == "zipkin") {
    target.kind = ExportKind::kZipkin;
    default_path = "/api/v2/spans";
    if (url_text.empty()) url_text = "http://localhost:9411/api/v2/spans";
  } else if (kind == "pushgateway") {
    target.kind = ExportKind::kPushgateway;
    if (url_text.empty()) return fail("a Pushgateway needs its URL (pushgateway=http://host:9091)");
  } else {
    return fail("unknown kind '" + std::string(kind) +
                "' (otlp, otlp-json, otlp-protobuf, zipkin or pushgateway)");
  }
  std::string endpoint_error;
  auto endpoint = parse_endpoint(url_text, default_path, &endpoint_error);
  if (!endpoint) return fail(endpoint_error);
  target.endpoint = std::move(*endpoint);
  return target;
}

ResourceOptions resource_options_from(const Environment& environment, std::string service_name,
                                      std::vector<std::string>* warnings) {
  ResourceOptions options;
  std::vector<std::string> errors;
  options.attributes =
      parse_key_value_list(env_or_empty(environment, "OTEL_RESOURCE_ATTRIBUTES"), &errors);
  if (warnings)
    for (const std::string& entry : errors)
      warnings->push_back("OTEL_RESOURCE_ATTRIBUTES: " + entry);
  options.service_name = std::move(service_name);
  if (options.service_name.empty())
    options.service_name = std::string(env_or_empty(environment, "OTEL_SERVICE_NAME"));
  if (options.service_name.empty())
    for (const auto& [key, value] : options.attributes)
      if (key == "service.name") options.service_name = value;
  return options;
}

std::unique_ptr<BatchSender> make_http_sender(const ExportTarget& target, double timeout_s) {
  HttpSenderOptions options;
  options.timeout_s = timeout_s;
  options.headers = target.headers;
  options.label = target.label();
  switch (target.kind) {
    case ExportKind::kOtlpProtobuf:
      options.content_type = "application/x-protobuf";
      break;
    case ExportKind::kOtlpJson:
    case ExportKind::kZipkin:
      options.content_type = "application/json";
      break;
    case ExportKind::kPushgateway:
      options.content_type = "text/plain; version=0.0.4; charset=utf-8";
      options.method = "PUT";
      break;
  }
  return std::make_unique<HttpSender>(target.endpoint, std::move(options));
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
  std::vector<Running> running;
  for (const ExportTarget& original : targets) {
    ExportTarget target = original;
    if (target.kind == ExportKind::kPushgateway &&
        (target.endpoint.path.empty() || target.endpoint.path == "/"))
      target.endpoint.path = "/metrics/job/opsight/instance/" +
                             path_segment(trace.run.host.empty() ? "unknown" : trace.run.host);
    auto sender = options.make_sender ? options.make_sender(target)
                                      : make_http_sender(target, std::min(options.timeout_s, 10.0));
    running.push_back(
        {std::make_unique<BatchExporter>(std::move(sender), options.exporter), Clock::now()});
    BatchExporter& exporter = *running.back().exporter;
    Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options.timeout_s));
    auto remaining = [&] {
      return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
    };
    if (target.kind == ExportKind::kPushgateway) {
      exporter.offer({prometheus_exposition(trace), view.span_count()}, remaining());
      continue;
    }
    auto rows = view.rows();
    size_t batch = std::max<size_t>(1, options.batch_spans);
    for (size_t begin = 0; begin < rows.size(); begin += batch) {
      auto batch_rows = rows.subspan(begin, std::min(batch, rows.size() - begin));
      std::string body = target.kind == ExportKind::kZipkin ? encode_zipkin_json(view, batch_rows)
                         : target.kind == ExportKind::kOtlpJson
                             ? encode_otlp_json(view, batch_rows)
                             : encode_otlp_protobuf(view, batch_rows);
      exporter.offer({std::move(body), batch_rows.size()}, remaining());
    }
  }
  std::vector<TargetReport> reports;
  for (Running& entry : running) {
    entry.exporter->shutdown(options.timeout_s);
    reports.push_back({entry.exporter->describe(), entry.exporter->stats(),
                       std::chrono::duration<double>(Clock::now() - entry.start).count()});
  }
  return reports;
}

}  // namespace opsight::exporting
