// The table of every sink, and what their parse functions share.
#include <array>

#include "export/export.hpp"
#include "export/kafka/kafka_sink.hpp"
#include "export/loki/loki_sink.hpp"
#include "export/otlp/otlp_sinks.hpp"
#include "export/prometheus/prometheus_sinks.hpp"
#include "export/sink.hpp"
#include "export/zipkin/zipkin_sink.hpp"

namespace opsight::exporting {

namespace {

// A sender that fails every batch with one message.
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

std::vector<std::string_view> SinkDescription::spellings() const {
  std::vector<std::string_view> all{name};
  all.insert(all.end(), aliases.begin(), aliases.end());
  return all;
}

std::span<const SinkDescription* const> sinks() {
  static const std::array<const SinkDescription*, 13> table{
      &otlp::protobuf_sink(),
      &otlp::json_sink(),
      &otlp::grpc_sink(),
      &otlp::metrics_sink(),
      &otlp::metrics_grpc_sink(),
      &otlp::logs_sink(),
      &otlp::logs_grpc_sink(),
      &zipkin::sink(),
      &prometheus::pushgateway_sink(),
      &prometheus::served_sink(),
      &kafka::sink(),
      &loki::sink(),
      &loki::logs_sink(),
  };
  return table;
}

const SinkDescription* find_sink(std::string_view spelling) {
  for (const SinkDescription* sink : sinks())
    for (std::string_view name : sink->spellings())
      if (name == spelling) return sink;
  return nullptr;
}

std::string sink_spellings_for_messages() {
  std::vector<std::string_view> names;
  for (const SinkDescription* sink : sinks())
    for (std::string_view name : sink->spellings()) names.push_back(name);
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

const SinkDescription* default_sink() { return &otlp::protobuf_sink(); }

std::string_view environment_value(const Environment& environment, const char* name) {
  const char* value = environment(name);
  return value == nullptr ? std::string_view() : std::string_view(value);
}

std::optional<uint64_t> parse_whole_number(std::string_view text) {
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

std::optional<std::string> set_http_endpoint(ExportTarget& target, std::string_view url,
                                             std::string_view default_path) {
  std::string error;
  auto endpoint = parse_endpoint(url, default_path, &error);
  if (!endpoint) return error;
  target.endpoint = std::move(*endpoint);
  return std::nullopt;
}

std::unique_ptr<BatchSender> make_failing_sender(std::string description, std::string message) {
  return std::make_unique<FailingSender>(std::move(description), std::move(message));
}

}  // namespace opsight::exporting
