#include "export/kafka/kafka_sender.hpp"

#if OPSIGHT_WITH_KAFKA
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#endif

namespace opsight::exporting {

#if !OPSIGHT_WITH_KAFKA

namespace {
constexpr const char* kNotBuilt =
    "this opsight was built without Kafka support (install librdkafka-dev and rebuild; "
    "CMake option OPSIGHT_WITH_KAFKA)";
}  // namespace

bool kafka_available() { return false; }

bool check_kafka_properties(const std::vector<std::pair<std::string, std::string>>&,
                            std::string* error) {
  if (error) *error = kNotBuilt;
  return false;
}

std::unique_ptr<BatchSender> make_kafka_sender(KafkaSenderOptions, std::string* error) {
  if (error) *error = kNotBuilt;
  return nullptr;
}

#else

namespace {

using Clock = std::chrono::steady_clock;

// Errors a later attempt may get past; librdkafka has retried them already within
// message.timeout.ms, so BatchExporter's backoff comes on top.
bool is_retryable(rd_kafka_resp_err_t error) {
  switch (error) {
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:  // a topic being auto-created
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:  // a CRC error in transit
    case RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
      return true;
    default:
      return false;
  }
}

// Errors librdkafka reports on its own (error_cb) that mean the configuration is wrong:
// a message that then times out fails instead of being retried.
bool is_configuration_error(rd_kafka_resp_err_t error) {
  switch (error) {
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR__SSL:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_SASL_MECHANISM:
    case RD_KAFKA_RESP_ERR_ILLEGAL_SASL_STATE:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR__FATAL:
      return true;
    default:
      return false;
  }
}

// Sets `properties` on `conf`; false with `error` naming the one librdkafka refuses.
bool set_properties(rd_kafka_conf_t* conf,
                    const std::vector<std::pair<std::string, std::string>>& properties,
                    std::string* error) {
  char message[512];
  for (const auto& [name, value] : properties) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), message, sizeof(message)) !=
        RD_KAFKA_CONF_OK) {
      if (error) *error = "librdkafka property '" + name + "': " + message;
      return false;
    }
  }
  return true;
}

class KafkaSender final : public BatchSender {
 public:
  explicit KafkaSender(KafkaSenderOptions options) : options_(std::move(options)) {}

  ~KafkaSender() override {
    if (producer_ == nullptr) return;
    // Every send() has had its report or given up on it: what is left is abandoned
    // messages, purged so that destroying the producer does not wait for them.
    rd_kafka_purge(producer_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(producer_, 0);
    rd_kafka_destroy(producer_);
  }

  bool start(std::string* error) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    int timeout_ms = static_cast<int>(std::lround(std::max(0.001, options_.timeout_s) * 1000));
    std::vector<std::pair<std::string, std::string>> properties = {
        {"bootstrap.servers", options_.brokers},
        {"client.id", "opsight"},
        // One message per send, waited for: lingering would only add latency.
        {"linger.ms", "0"},
        {"message.timeout.ms", std::to_string(timeout_ms)},
        // Back within a second of a broker's return (librdkafka's default backs off to 10 s).
        {"reconnect.backoff.max.ms", "1000"},
    };
    bool wants_logs = false;
    report_wait_ms_ = timeout_ms;
    for (const auto& [name, value] : options_.properties) {
      properties.emplace_back(name, value);
      wants_logs = wants_logs || name == "debug";
      // A longer delivery timeout asked for is waited for (delivery.timeout.ms is an alias).
      if (name == "message.timeout.ms" || name == "delivery.timeout.ms")
        report_wait_ms_ = std::max(1, std::atoi(value.c_str()));
    }
    if (!set_properties(conf, properties, error)) {
      rd_kafka_conf_destroy(conf);
      return false;
    }
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_dr_msg_cb(conf, &KafkaSender::on_delivery);
    rd_kafka_conf_set_error_cb(conf, &KafkaSender::on_error);
    if (!wants_logs)
      rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
    char message[512];
    producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, message, sizeof(message));
    if (producer_ == nullptr) {  // the configuration is not consumed on failure
      rd_kafka_conf_destroy(conf);
      if (error) *error = std::string("librdkafka: ") + message;
      return false;
    }
    return true;
  }

  SendResult send(std::string_view body) override { return send_keyed({}, body); }

  SendResult send_keyed(std::string_view key, std::string_view body) override {
    SendResult result;
    rd_kafka_poll(producer_, 0);  // stale reports, errors since the last send
    if (fatal_) return failure(SendResult::Outcome::kFailed, fatal_message_);
    uint64_t sequence = next_sequence_++;
    waiting_for_ = sequence;
    report_.reset();
    rd_kafka_headers_t* headers = rd_kafka_headers_new(options_.headers.size());
    for (const auto& [name, value] : options_.headers)
      rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                          static_cast<ssize_t>(value.size()));
    // The payload is copied: a send that gives up on its report leaves the message with
    // librdkafka, and the batch's body goes away. (rd_kafka_produceva, not producev: the
    // RD_KAFKA_V_* macros use a GNU extension that -Wpedantic refuses under clang.)
    rd_kafka_vu_t values[6] = {};
    values[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    values[0].u.cstr = options_.topic.c_str();
    values[1].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    values[1].u.i = RD_KAFKA_MSG_F_COPY;
    values[2].vtype = RD_KAFKA_VTYPE_VALUE;
    values[2].u.mem = {const_cast<char*>(body.data()), body.size()};
    values[3].vtype = RD_KAFKA_VTYPE_KEY;
    values[3].u.mem = {key.empty() ? nullptr : const_cast<char*>(key.data()), key.size()};
    values[4].vtype = RD_KAFKA_VTYPE_HEADERS;
    values[4].u.headers = headers;
    values[5].vtype = RD_KAFKA_VTYPE_OPAQUE;
    values[5].u.ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(sequence));
    rd_kafka_resp_err_t produced = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (rd_kafka_error_t* produce_error = rd_kafka_produceva(producer_, values, 6)) {
      produced = rd_kafka_error_code(produce_error);
      rd_kafka_error_destroy(produce_error);
    }
    if (produced != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_headers_destroy(headers);  // owned by the message only once produced
      waiting_for_ = 0;
      std::string why = rd_kafka_err2str(produced);
      if (produced == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        why += " (" + std::to_string(body.size()) +
               " bytes; lower --batch-size or raise message.max.bytes on both sides)";
      return failure(
          is_retryable(produced) ? SendResult::Outcome::kRetryable : SendResult::Outcome::kFailed,
          why);
    }
    // librdkafka times the message out by message.timeout.ms (its timer scans once a
    // second): a second more, and the report is given up on.
    Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(report_wait_ms_ + 1000);
    while (!report_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      rd_kafka_poll(producer_, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    }
    waiting_for_ = 0;
    if (!report_) {
      return failure(SendResult::Outcome::kRetryable,
                     "no delivery report within " + std::to_string(report_wait_ms_ / 1000 + 1) +
                         " s" + broker_error_suffix());
    }
    if (*report_ == RD_KAFKA_RESP_ERR_NO_ERROR) {
      last_broker_error_.reset();  // the cluster is fine again
      result.outcome = SendResult::Outcome::kSent;
      return result;
    }
    std::string why = rd_kafka_err2str(*report_);
    bool timed_out = *report_ == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT;
    if (timed_out && last_broker_error_ && is_configuration_error(*last_broker_error_))
      return failure(SendResult::Outcome::kFailed, why + broker_error_suffix());
    if (*report_ == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
      why += " (" + std::to_string(body.size()) +
             " bytes; lower --batch-size or raise the topic's max.message.bytes)";
    return failure(
        is_retryable(*report_) ? SendResult::Outcome::kRetryable : SendResult::Outcome::kFailed,
        timed_out ? why + broker_error_suffix() : why);
  }

  std::string describe() const override {
    return "kafka " + options_.brokers + " topic " + options_.topic;
  }

 private:
  SendResult failure(SendResult::Outcome outcome, const std::string& why) const {
    SendResult result;
    result.outcome = outcome;
    result.message = "kafka " + options_.brokers + " topic " + options_.topic + ": " + why;
    return result;
  }

  std::string broker_error_suffix() const {
    return last_broker_error_ ? " (last error: " + last_broker_message_ + ")" : std::string();
  }

  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
    auto* self = static_cast<KafkaSender*>(opaque);
    auto sequence = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(message->_private));
    if (sequence == self->waiting_for_) self->report_ = message->err;  // others: abandoned
  }

  static void on_error(rd_kafka_t* producer, int error, const char* reason, void* opaque) {
    auto* self = static_cast<KafkaSender*>(opaque);
    auto code = static_cast<rd_kafka_resp_err_t>(error);
    if (code == RD_KAFKA_RESP_ERR__FATAL) {
      char message[512];
      code = rd_kafka_fatal_error(producer, message, sizeof(message));
      self->fatal_ = true;
      self->fatal_message_ = std::string("fatal producer error: ") + message;
      return;
    }
    // "all brokers down" follows the error that says why; keep the one that says why.
    if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN && self->last_broker_error_) return;
    self->last_broker_error_ = code;
    self->last_broker_message_ = reason;
  }

  KafkaSenderOptions options_;
  rd_kafka_t* producer_ = nullptr;
  int report_wait_ms_ = 0;
  uint64_t next_sequence_ = 1;
  uint64_t waiting_for_ = 0;  // the sequence of the message send() waits for; 0: none
  std::optional<rd_kafka_resp_err_t> report_;
  std::optional<rd_kafka_resp_err_t> last_broker_error_;
  std::string last_broker_message_;
  bool fatal_ = false;
  std::string fatal_message_;
};

}  // namespace

bool kafka_available() { return true; }

bool check_kafka_properties(const std::vector<std::pair<std::string, std::string>>& properties,
                            std::string* error) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  bool ok = set_properties(conf, properties, error);
  rd_kafka_conf_destroy(conf);
  return ok;
}

std::unique_ptr<BatchSender> make_kafka_sender(KafkaSenderOptions options, std::string* error) {
  auto sender = std::make_unique<KafkaSender>(std::move(options));
  if (!sender->start(error)) return nullptr;
  return sender;
}

#endif

}  // namespace opsight::exporting
