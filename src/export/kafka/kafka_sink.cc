#include "export/kafka/kafka_sink.hpp"

#include <algorithm>
#include <cctype>

#include "export/export.hpp"
#include "export/kafka/kafka_sender.hpp"
#include "export/otlp/otlp_encoder.hpp"

namespace opsight::exporting::kafka {

namespace {

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
std::optional<std::string> parse(std::string_view, std::string_view rest,
                                 const Environment& environment, ExportTarget& target) {
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
  kafka.properties = parse_key_value_list(
      environment_value(environment, "OPSIGHT_KAFKA_PROPERTIES"), &environment_errors);
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

// An OTLP request per batch (the batch holds one trace), keyed by the trace's id.
class Encoder : public SpanBatchEncoder {
 public:
  explicit Encoder(const SpanView& view) : view_(view) {}
  void encode(std::span<const trace::RowIndex> rows, EncodedBatch& out) override {
    out.body = encode_otlp_protobuf(view_, rows);
    out.key = view_.trace_id(rows.front()).to_hex();
  }

 private:
  const SpanView& view_;
};

std::unique_ptr<BatchSender> make_producer(const ExportTarget& target, double timeout_s,
                                           std::string_view) {
  KafkaSenderOptions options;
  options.brokers = target.kafka.brokers;
  options.topic = target.kafka.topic;
  options.properties = target.kafka.properties;
  options.headers = {{"content-type", "application/x-protobuf"}};
  options.timeout_s = timeout_s;
  std::string error;
  if (auto sender = make_kafka_sender(options, &error)) return sender;
  return make_failing_sender("kafka " + target.kafka.brokers + " topic " + target.kafka.topic,
                             error);
}

}  // namespace

const SinkDescription& sink() {
  static const SinkDescription description{
      .name = "kafka",
      .syntax = "kafka[=BROKER[,BROKER...]][?topic=NAME&PROPERTY=VALUE...]",
      .summary =
          "one Kafka message per batch of one trace's spans, OTLP protobuf keyed by the "
          "trace id; default localhost:9092, topic otlp_spans",
      .one_trace_per_batch = true,
      .single_sender = true,
      .parse = parse,
      .make_encoder = [](const SpanView& view) -> std::unique_ptr<SpanBatchEncoder> {
        return std::make_unique<Encoder>(view);
      },
      .make_sender = make_producer,
  };
  return description;
}

}  // namespace opsight::exporting::kafka
