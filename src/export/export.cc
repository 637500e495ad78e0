#include "export/export.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "export/grpc_sender.hpp"
#include "export/kafka_sender.hpp"
#include "export/loki_encoder.hpp"
#include "export/otlp_encoder.hpp"
#include "export/prometheus_text.hpp"
#include "export/zipkin_encoder.hpp"

namespace opsight::exporting {

namespace {

std::string_view env_or_empty(const Environment& environment, const char* name) {
  const char* value = environment(name);
  return value == nullptr ? std::string_view() : std::string_view(value);
}

// "10000" -> 10000; nullopt for anything but a whole number (spaces around allowed).
std::optional<uint64_t> parse_milliseconds(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty() || text.size() > 15) return std::nullopt;
  uint64_t value = 0;
  for (char character : text) {
    if (character < '0' || character > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(character - '0');
  }
  return value;
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

// Kafka's rule for topic names: 1-249 of [a-zA-Z0-9._-], not "." or "..".
bool valid_topic(std::string_view topic) {
  if (topic.empty() || topic.size() > 249 || topic == "." || topic == "..") return false;
  for (char character : topic) {
    bool allowed = (character >= 'a' && character <= 'z') ||
                   (character >= 'A' && character <= 'Z') ||
                   (character >= '0' && character <= '9') || character == '.' || character == '_' ||
                   character == '-';
    if (!allowed) return false;
  }
  return true;
}

// "kafka[=BROKERS][?topic=T&property=value...]": `rest` is what follows "kafka=" (or the
// "?..." right after "kafka"). Fills target.kafka or returns why not.
std::optional<std::string> parse_kafka(std::string_view rest, const Environment& environment,
                                       ExportTarget& target) {
  if (!kafka_available()) {
    std::string why;
    check_kafka_properties({}, &why);
    return why;
  }
  size_t question = rest.find('?');
  std::string_view brokers = rest.substr(0, question);
  std::string_view query =
      question == std::string_view::npos ? std::string_view() : rest.substr(question + 1);
  KafkaDestination& kafka = target.kafka;
  kafka.brokers = brokers.empty() ? "localhost:9092" : std::string(brokers);
  size_t start = 0;
  while (start <= kafka.brokers.size()) {
    size_t comma = std::min(kafka.brokers.find(',', start), kafka.brokers.size());
    std::string_view broker = std::string_view(kafka.brokers).substr(start, comma - start);
    if (broker.empty()) return "an empty broker in '" + kafka.brokers + "' (host:port,host:port)";
    // host:port, optionally after a security protocol as librdkafka allows (SSL://h:p).
    std::string_view address = broker;
    if (size_t scheme = address.find("://"); scheme != std::string_view::npos) {
      std::string protocol(address.substr(0, scheme));
      std::transform(
          protocol.begin(), protocol.end(), protocol.begin(),
          [](unsigned char character) { return static_cast<char>(std::toupper(character)); });
      if (protocol == "PLAINTEXT" || protocol == "SSL" || protocol == "SASL_PLAINTEXT" ||
          protocol == "SASL_SSL")
        address.remove_prefix(scheme + 3);
    }
    if (address.empty() || address.find_first_of(" \t/:") == 0 ||
        address.find_first_of(" \t/") != std::string_view::npos ||
        address.find("://") != std::string_view::npos)
      return "'" + std::string(broker) + "' is not a broker address (host:port; Kafka is not HTTP)";
    start = comma + 1;
  }
  kafka.topic = "otlp_spans";
  std::vector<std::string> environment_errors;
  kafka.properties = parse_key_value_list(env_or_empty(environment, "OPSIGHT_KAFKA_PROPERTIES"),
                                          &environment_errors);
  if (!environment_errors.empty()) return "OPSIGHT_KAFKA_PROPERTIES: " + environment_errors.front();
  size_t position = 0;
  while (!query.empty() && position <= query.size()) {
    size_t ampersand = std::min(query.find('&', position), query.size());
    std::string_view entry = query.substr(position, ampersand - position);
    position = ampersand + 1;
    if (entry.empty()) continue;
    size_t equals = entry.find('=');
    if (equals == std::string_view::npos || equals == 0)
      return "'" + std::string(entry) + "' is not property=value";
    std::string name = percent_decode(entry.substr(0, equals));
    std::string value = percent_decode(entry.substr(equals + 1));
    if (name == "topic") {
      kafka.topic = value;
    } else if (name == "bootstrap.servers" || name == "metadata.broker.list") {
      return "the brokers go before the '?' (kafka=host:port,host:port?topic=...), not in " + name;
    } else {
      kafka.properties.emplace_back(std::move(name), std::move(value));
    }
  }
  if (!valid_topic(kafka.topic))
    return "topic '" + kafka.topic + "' is not a Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)";
  for (const auto& [name, value] : kafka.properties)
    if ((name == "message.timeout.ms" || name == "delivery.timeout.ms") && value == "0")
      return name + "=0 (wait forever) is refused: opsight bounds every send";
  std::string why;
  if (!check_kafka_properties(kafka.properties, &why)) return why;
  return std::nullopt;
}

// A sender that fails every batch with one message (a producer that could not be made).
class FailingSender : public BatchSender {
 public:
  FailingSender(std::string description, std::string message)
      : description_(std::move(description)), message_(std::move(message)) {}
  SendResult send(std::string_view) override {
    SendResult result;
    result.outcome = SendResult::Outcome::kFailed;
    result.message = message_;
    return result;
  }
  std::string describe() const override { return description_; }

 private:
  std::string description_, message_;
};

}  // namespace

std::string ExportTarget::label() const {
  switch (kind) {
    case ExportKind::kOtlpProtobuf:
      return "otlp";
    case ExportKind::kOtlpJson:
      return "otlp-json";
    case ExportKind::kOtlpGrpc:
      return "otlp-grpc";
    case ExportKind::kZipkin:
      return "zipkin";
    case ExportKind::kPushgateway:
      return "pushgateway";
    case ExportKind::kKafka:
      return "kafka";
    case ExportKind::kLoki:
      return "loki";
  }
  return "?";
}

Environment process_environment() {
  return [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
}

std::optional<ExportTarget> parse_export_target(std::string_view spec,
                                                const Environment& environment,
                                                std::string* error) {
  // "kind", "kind=...", or "kind?..." (a Kafka target with the default broker).
  size_t kind_end = spec.find_first_of("=?");
  std::string_view kind = spec.substr(0, kind_end);
  std::string_view url = kind_end == std::string_view::npos ? std::string_view()
                         : spec[kind_end] == '='            ? spec.substr(kind_end + 1)
                                                            : spec.substr(kind_end);
  ExportTarget target;
  std::string default_path;
  std::string url_text(url);
  auto fail = [&](const std::string& why) -> std::optional<ExportTarget> {
    if (error) *error = "export target '" + hide_user_info(spec) + "': " + why;
    return std::nullopt;
  };
  if (kind == "otlp" || kind == "otlp-json" || kind == "otlp-protobuf" || kind == "otlp-grpc") {
    std::string_view protocol = env_or_empty(environment, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
    if (protocol.empty()) protocol = env_or_empty(environment, "OTEL_EXPORTER_OTLP_PROTOCOL");
    if (kind == "otlp" && !protocol.empty() && protocol != "http/protobuf" &&
        protocol != "http/json" && protocol != "grpc")
      return fail("OTEL_EXPORTER_OTLP_PROTOCOL '" + std::string(protocol) +
                  "' is not supported (opsight speaks grpc, http/protobuf and http/json)");
    bool json = kind == "otlp-json" || (kind == "otlp" && protocol == "http/json");
    bool grpc = kind == "otlp-grpc" || (kind == "otlp" && protocol == "grpc");
    target.kind = grpc   ? ExportKind::kOtlpGrpc
                  : json ? ExportKind::kOtlpJson
                         : ExportKind::kOtlpProtobuf;
    if (grpc && !grpc_available()) {
      std::string why;
      make_grpc_sender({}, &why);
      return fail(why);
    }
    default_path = "/v1/traces";
    if (grpc) {
      // gRPC's endpoint is an address, never a path: the general variable is used as is.
      default_path = "/";
      if (url_text.empty())
        url_text = env_or_empty(environment, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
      if (url_text.empty()) url_text = env_or_empty(environment, "OTEL_EXPORTER_OTLP_ENDPOINT");
      if (url_text.empty()) url_text = "http://localhost:4317";
      if (url_text.find("://") == std::string::npos) {
        // host:port without a scheme: TLS unless ..._INSECURE is true (the specification).
        const char* insecure_name = "OTEL_EXPORTER_OTLP_TRACES_INSECURE";
        std::string insecure(env_or_empty(environment, insecure_name));
        if (insecure.empty()) {
          insecure_name = "OTEL_EXPORTER_OTLP_INSECURE";
          insecure = env_or_empty(environment, insecure_name);
        }
        for (char& character : insecure)
          character = static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
        if (!insecure.empty() && insecure != "true" && insecure != "false")
          return fail(std::string(insecure_name) + " '" + insecure + "' is not true or false");
        url_text = (insecure == "true" ? "http://" : "https://") + url_text;
      }
    } else if (url_text.empty()) {
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
      // An entry, not a structured binding: clang 14 cannot capture those in a lambda.
      for (auto& entry :
           parse_key_value_list(env_or_empty(environment, variable), &header_errors)) {
        const std::string& key = entry.first;
        std::erase_if(target.headers, [&](const auto& header) { return header.first == key; });
        target.headers.emplace_back(key, entry.second);
      }
    }
    if (!header_errors.empty()) return fail("OTEL_EXPORTER_OTLP_HEADERS: " + header_errors.front());
    // The signal's own variable first, then the general one (the specification's order).
    auto otlp_setting = [&](const char* traces_name, const char* general_name,
                            const char** name_used) {
      std::string_view value = env_or_empty(environment, traces_name);
      *name_used = traces_name;
      if (value.empty()) {
        value = env_or_empty(environment, general_name);
        *name_used = general_name;
      }
      return value;
    };
    const char* name = nullptr;
    std::string_view compression = otlp_setting("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
                                                "OTEL_EXPORTER_OTLP_COMPRESSION", &name);
    if (compression == "gzip")
      target.gzip = true;
    else if (!compression.empty() && compression != "none")
      return fail(std::string(name) + " '" + std::string(compression) + "' is not gzip or none");
    std::string_view timeout =
        otlp_setting("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT", &name);
    if (!timeout.empty()) {
      auto milliseconds = parse_milliseconds(timeout);
      if (!milliseconds || *milliseconds == 0)
        return fail(std::string(name) + " '" + std::string(timeout) +
                    "' is not a positive whole number of milliseconds");
      target.timeout_s = static_cast<double>(*milliseconds) / 1000.0;
    }
    // TLS files: each must be readable now, not at the first request.
    struct TlsFile {
      const char* traces_name;
      const char* general_name;
      std::string* path;
    };
    for (const TlsFile& file :
         {TlsFile{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE",
                  &target.ca_certificate_path},
          TlsFile{"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
                  "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &target.client_certificate_path},
          TlsFile{"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY",
                  &target.client_key_path}}) {
      std::string_view path = otlp_setting(file.traces_name, file.general_name, &name);
      if (path.empty()) continue;
      *file.path = std::string(path);
      if (std::FILE* opened = std::fopen(file.path->c_str(), "rb"))
        std::fclose(opened);
      else
        return fail(std::string(name) + " '" + *file.path + "': cannot be read");
    }
    if (target.client_certificate_path.empty() != target.client_key_path.empty())
      return fail(
          "mutual TLS needs both OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and "
          "OTEL_EXPORTER_OTLP_CLIENT_KEY (or their TRACES_ forms)");
    if (grpc) {
      // gRPC metadata keys are lowercase [0-9a-z_.-]; values printable ASCII.
      for (auto& [key, value] : target.headers) {
        for (char& character : key)
          character = static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
        bool key_ok = !key.empty() && key.rfind("grpc-", 0) != 0;
        for (char character : key)
          key_ok = key_ok && ((character >= 'a' && character <= 'z') ||
                              (character >= '0' && character <= '9') || character == '_' ||
                              character == '.' || character == '-');
        if (!key_ok)
          return fail("OTEL_EXPORTER_OTLP_HEADERS: '" + key +
                      "' cannot be gRPC metadata (lowercase 0-9 a-z _ . -, not grpc-...)");
        for (char character : value)
          if (character < 0x20 || character > 0x7E)
            return fail("OTEL_EXPORTER_OTLP_HEADERS: the value of '" + key +
                        "' is not printable ASCII, as gRPC metadata must be");
      }
    }
  } else if (kind == "zipkin") {
    target.kind = ExportKind::kZipkin;
    default_path = "/api/v2/spans";
    if (url_text.empty()) url_text = "http://localhost:9411/api/v2/spans";
  } else if (kind == "pushgateway") {
    target.kind = ExportKind::kPushgateway;
    if (url_text.empty()) return fail("a Pushgateway needs its URL (pushgateway=http://host:9091)");
  } else if (kind == "kafka") {
    target.kind = ExportKind::kKafka;
    if (auto why = parse_kafka(url, environment, target)) return fail(*why);
    return target;
  } else if (kind == "loki") {
    target.kind = ExportKind::kLoki;
    default_path = "/loki/api/v1/push";
    if (url_text.empty()) url_text = "http://localhost:3100/loki/api/v1/push";
  } else {
    return fail("unknown kind '" + std::string(kind) +
                "' (otlp, otlp-json, otlp-protobuf, otlp-grpc, zipkin, pushgateway, kafka or "
                "loki)");
  }
  std::string endpoint_error;
  auto endpoint = parse_endpoint(url_text, default_path, &endpoint_error);
  if (!endpoint) return fail(endpoint_error);
  target.endpoint = std::move(*endpoint);
  if (target.kind == ExportKind::kOtlpGrpc) {
    if (target.endpoint.path != "/")
      return fail("a gRPC endpoint is host and port only; '" + target.endpoint.path +
                  "' is a path (OTLP/HTTP's; gRPC's method is fixed)");
    if (!target.endpoint.user_info.empty())
      return fail(
          "gRPC sends no user:password from the URL; give it as a header "
          "(OTEL_EXPORTER_OTLP_HEADERS=authorization=Basic ...)");
  }
  if (target.kind == ExportKind::kLoki) {
    // Loki's multi-tenancy header, and basic authentication kept off the command line.
    if (auto tenant = env_or_empty(environment, "OPSIGHT_LOKI_TENANT"); !tenant.empty())
      target.headers.emplace_back("X-Scope-OrgID", std::string(tenant));
    if (auto basic = env_or_empty(environment, "OPSIGHT_LOKI_BASIC_AUTH");
        !basic.empty() && target.endpoint.user_info.empty()) {
      if (basic.find(':') == std::string_view::npos)
        return fail("OPSIGHT_LOKI_BASIC_AUTH is not user:password");
      target.endpoint.user_info = std::string(basic);
    }
  }
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
  // OpenTelemetry's opt-in for its experimental conventions: a comma list of names.
  std::string_view opt_in = env_or_empty(environment, "OTEL_SEMCONV_STABILITY_OPT_IN");
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
    std::string_view text = env_or_empty(environment, name);
    if (text.empty()) return {};
    *out = parse_milliseconds(text);
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
  return {};
}

bool sdk_disabled(const Environment& environment) {
  std::string value(env_or_empty(environment, "OTEL_SDK_DISABLED"));
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
  options.read_otlp_partial_success = target.kind == ExportKind::kOtlpProtobuf;
  options.user_agent = user_agent_for(opsight_version);
  options.ca_certificate_path = target.ca_certificate_path;
  options.client_certificate_path = target.client_certificate_path;
  options.client_key_path = target.client_key_path;
  switch (target.kind) {
    case ExportKind::kOtlpProtobuf:
      options.content_type = "application/x-protobuf";
      break;
    case ExportKind::kOtlpJson:
    case ExportKind::kZipkin:
    case ExportKind::kLoki:
      options.content_type = "application/json";
      break;
    case ExportKind::kKafka:     // not HTTP: make_sender makes its producer
    case ExportKind::kOtlpGrpc:  // not HTTP: make_sender makes its channel
      break;
    case ExportKind::kPushgateway:
      options.content_type = "text/plain; version=0.0.4; charset=utf-8";
      options.method = "PUT";
      break;
  }
  return std::make_unique<HttpSender>(target.endpoint, std::move(options));
}

std::vector<std::unique_ptr<BatchSender>> make_senders(const ExportTarget& target,
                                                       const TraceExportOptions& options) {
  size_t count =
      target.kind == ExportKind::kKafka ? 1 : std::max<size_t>(1, options.requests_in_flight);
  std::vector<std::unique_ptr<BatchSender>> senders;
  for (size_t i = 0; i < count; ++i)
    senders.push_back(options.make_sender ? options.make_sender(target)
                                          : make_sender(target, std::min(options.timeout_s, 10.0),
                                                        options.resource.opsight_version));
  return senders;
}

std::unique_ptr<BatchSender> make_sender(const ExportTarget& target, double timeout_s,
                                         std::string_view opsight_version) {
  if (target.kind == ExportKind::kOtlpGrpc) {
    GrpcSenderOptions options;
    options.address = target.endpoint.host.find(':') != std::string::npos
                          ? "[" + target.endpoint.host + "]:" + std::to_string(target.endpoint.port)
                          : target.endpoint.host + ":" + std::to_string(target.endpoint.port);
    options.tls = target.endpoint.scheme == "https";
    options.ca_certificate_path = target.ca_certificate_path;
    options.client_certificate_path = target.client_certificate_path;
    options.client_key_path = target.client_key_path;
    options.headers = target.headers;
    options.gzip = target.gzip;
    options.timeout_s = target.timeout_s > 0 ? target.timeout_s : timeout_s;
    options.user_agent = grpc_user_agent_for(opsight_version);
    std::string error;
    if (auto sender = make_grpc_sender(options, &error)) return sender;
    return std::make_unique<FailingSender>("otlp-grpc " + target.endpoint.origin(), error);
  }
  if (target.kind != ExportKind::kKafka)
    return make_http_sender(target, timeout_s, opsight_version);
  KafkaSenderOptions options;
  options.brokers = target.kafka.brokers;
  options.topic = target.kafka.topic;
  options.properties = target.kafka.properties;
  options.headers = {{"content-type", "application/x-protobuf"}};
  options.timeout_s = timeout_s;
  std::string error;
  if (auto sender = make_kafka_sender(options, &error)) return sender;
  return std::make_unique<FailingSender>(
      "kafka " + target.kafka.brokers + " topic " + target.kafka.topic, error);
}

void encode_batches(const SpanView& view, std::span<const trace::RowIndex> rows,
                    const ExportTarget& target, size_t batch_spans,
                    const std::function<void(EncodedBatch)>& emit) {
  size_t batch = std::max<size_t>(1, batch_spans);
  // Loki's streams are decided once over all the rows, so that every batch labels alike.
  std::optional<LokiStreams> loki_streams;
  if (target.kind == ExportKind::kLoki) loki_streams.emplace(view);
  // A Kafka message is keyed by its trace id, so its batch holds one trace: the rows are
  // grouped by trace (in view order within one) and no batch crosses from one to the next.
  std::vector<trace::RowIndex> by_trace;
  if (target.kind == ExportKind::kKafka) {
    by_trace.assign(rows.begin(), rows.end());
    std::stable_sort(by_trace.begin(), by_trace.end(), [&](trace::RowIndex a, trace::RowIndex b) {
      trace::TraceId id_a = view.trace_id(a), id_b = view.trace_id(b);
      return std::tie(id_a.high, id_a.low) < std::tie(id_b.high, id_b.low);
    });
    rows = by_trace;
  }
  auto batch_end = [&](size_t begin) {
    size_t end = std::min(begin + batch, rows.size());
    if (target.kind != ExportKind::kKafka) return end;
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
    switch (target.kind) {
      case ExportKind::kZipkin:
        encoded.body = encode_zipkin_json(view, batch_rows);
        break;
      case ExportKind::kOtlpJson:
        encoded.body = encode_otlp_json(view, batch_rows);
        break;
      case ExportKind::kLoki:
        encoded.body = encode_loki_json(view, *loki_streams, batch_rows);
        break;
      case ExportKind::kKafka:  // one message per batch, keyed by its trace's id
        encoded.body = encode_otlp_protobuf(view, batch_rows);
        encoded.key = view.trace_id(batch_rows.front()).to_hex();
        break;
      case ExportKind::kOtlpProtobuf:
      case ExportKind::kOtlpGrpc:
      case ExportKind::kPushgateway:  // metrics, not spans: callers send those themselves
        encoded.body = encode_otlp_protobuf(view, batch_rows);
        break;
    }
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
  std::vector<Running> running;
  for (const ExportTarget& original : targets) {
    ExportTarget target = original;
    if (target.kind == ExportKind::kPushgateway &&
        (target.endpoint.path.empty() || target.endpoint.path == "/"))
      target.endpoint.path = "/metrics/job/opsight/instance/" +
                             path_segment(trace.run.host.empty() ? "unknown" : trace.run.host);
    running.push_back(
        {std::make_unique<BatchExporter>(make_senders(target, options), options.exporter),
         Clock::now()});
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
    encode_batches(view, view.rows(), target, options.batch_spans,
                   [&](EncodedBatch batch) { exporter.offer(std::move(batch), remaining()); });
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
