// Sends each encoded batch as ONE Kafka message (librdkafka from Debian's librdkafka-dev):
// BatchExporter hands it a body (an OTLP ExportTraceServiceRequest in protobuf, the bytes
// encode_otlp_protobuf writes) and a key (the trace id in hex, so that every message of a
// trace lands in the same partition and stays in order), and the sender produces it with
// the headers it was given (content-type: application/x-protobuf) and waits for the
// message's delivery report, which sorts the attempt:
//   delivered                                          sent
//   timed out, broker down or busy, leader moving,     retryable (BatchExporter backs off
//   not enough replicas, topic still being created     and produces the batch again)
//   too large, not authorized, authentication or TLS   failed (the batch is dropped and
//   failed, invalid topic, a fatal producer error      counted; the message says why)
// A timeout after an authentication or TLS error that librdkafka reported on its own is
// failed too, with that error: retrying cannot mend a configuration.
//
// Bounded in time: librdkafka retries inside `message.timeout.ms` (set to the sender's
// timeout unless the properties say otherwise), and send() waits for the delivery report
// at most that long plus a second, so neither a flush nor a shutdown ever waits forever.
// Delivery is at least once: a batch whose report timed out may have reached the broker
// and is produced again (enable.idempotence=true removes broker-side duplicates of
// librdkafka's own retries, not of ours).
//
// librdkafka's logs are kept off stderr (the traced program's), unless the properties set
// `debug`; its errors end up in SendResult::message instead.
//
// Built when OPSIGHT_WITH_KAFKA is on (the default where librdkafka-dev is installed);
// otherwise kafka_available() is false and make_kafka_sender() says how to get it.
//
// Thread-safety: one KafkaSender per thread (BatchExporter's sender thread owns its own):
// send() serves librdkafka's callbacks on the calling thread. The free functions are
// thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "export/http_sender.hpp"

namespace opsight::exporting {

struct KafkaSenderOptions {
  std::string brokers;  // bootstrap.servers: "host:port[,host:port...]"
  std::string topic;
  // librdkafka configuration properties (CONFIGURATION.md of librdkafka), set in order
  // after opsight's defaults (client.id=opsight, linger.ms=0, message.timeout.ms from
  // timeout_s), so they win: security.protocol, sasl.*, ssl.*, compression.type, acks...
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<std::pair<std::string, std::string>> headers;  // on every message
  double timeout_s = 10;  // per attempt: until the delivery report
};

// Whether this build has Kafka support (OPSIGHT_WITH_KAFKA).
bool kafka_available();

// Whether librdkafka accepts `properties` (names and values), without connecting;
// false with `error` naming the first bad one, or saying Kafka is not built in.
bool check_kafka_properties(const std::vector<std::pair<std::string, std::string>>& properties,
                            std::string* error);

// A producer for `options`; nullptr with `error` set when librdkafka refuses the
// configuration or Kafka is not built in. Connecting happens in the background: an
// unreachable broker shows up as retryable sends, not here.
std::unique_ptr<BatchSender> make_kafka_sender(KafkaSenderOptions options, std::string* error);

}  // namespace opsight::exporting
