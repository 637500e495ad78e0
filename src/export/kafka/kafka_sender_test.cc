// The Kafka sender against librdkafka's mock cluster (in this process, on 127.0.0.1): a
// batch becomes one message with its key, content-type header and OTLP protobuf payload,
// read back with a librdkafka consumer; delivery reports sort attempts (a broker that is
// down is retried and then delivered through BatchExporter; an authorization error, a
// message too large are failures); sends and shutdown stay bounded in time when no broker
// answers. The proof against a real broker is tests/integration/test_export_kafka.py.
#include "export/kafka/kafka_sender.hpp"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "export/batch_exporter.hpp"
#include "export/export.hpp"
#include "export/otlp/otlp_fields.hpp"
#include "wire/proto_decoder_for_tests.hpp"

namespace {

using opsight::exporting::BatchExporter;
using opsight::exporting::BatchExporterOptions;
using opsight::exporting::KafkaSenderOptions;
using opsight::exporting::SendResult;
namespace otlp = opsight::exporting::otlp;
using Clock = std::chrono::steady_clock;

constexpr int16_t kProduceApiKey = 0;  // Kafka protocol's ApiKey of Produce

// A mock cluster of one broker, owned by a handle of its own.
class MockCluster {
 public:
  MockCluster() {
    char error[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
    owner_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
    cluster_ = rd_kafka_mock_cluster_new(owner_, 1);
  }
  ~MockCluster() {
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(owner_);
  }
  std::string bootstraps() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }
  rd_kafka_mock_cluster_t* get() { return cluster_; }
  void create_topic(const char* topic) { rd_kafka_mock_topic_create(cluster_, topic, 1, 1); }

 private:
  rd_kafka_t* owner_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

struct Consumed {
  std::string key, value;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Reads partition 0 of `topic` from the start until `count` messages came (or `wait_s`).
std::vector<Consumed> consume(const std::string& brokers, const std::string& topic, size_t count,
                              double wait_s = 10) {
  char error[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), error, sizeof(error));
  rd_kafka_conf_set(conf, "group.id", "opsight-test", error, sizeof(error));
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof(error));
  rd_kafka_topic_partition_list_t* partitions = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(partitions, topic.c_str(), 0)->offset =
      RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(consumer, partitions);
  rd_kafka_topic_partition_list_destroy(partitions);
  std::vector<Consumed> out;
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(wait_s * 1000));
  while (out.size() < count && Clock::now() < deadline) {
    rd_kafka_message_t* message = rd_kafka_consumer_poll(consumer, 100);
    if (message == nullptr) continue;
    if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      Consumed entry;
      entry.key.assign(static_cast<const char*>(message->key), message->key_len);
      entry.value.assign(static_cast<const char*>(message->payload), message->len);
      rd_kafka_headers_t* headers = nullptr;
      if (rd_kafka_message_headers(message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* value;
        size_t size;
        for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) ==
                           RD_KAFKA_RESP_ERR_NO_ERROR;
             ++i)
          entry.headers.emplace_back(name, std::string(static_cast<const char*>(value), size));
      }
      out.push_back(std::move(entry));
    }
    rd_kafka_message_destroy(message);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  return out;
}

KafkaSenderOptions options_for(const std::string& brokers, const std::string& topic,
                               double timeout_s = 5) {
  KafkaSenderOptions options;
  options.brokers = brokers;
  options.topic = topic;
  options.headers = {{"content-type", "application/x-protobuf"}};
  options.timeout_s = timeout_s;
  return options;
}

std::string fmt_hex(unsigned char byte) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return {kDigits[byte >> 4], kDigits[byte & 0xF]};
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(KafkaSender, OneMessagePerBatchWithKeyHeaderAndPayload) {
  MockCluster cluster;
  cluster.create_topic("spans");
  std::string error;
  auto sender =
      opsight::exporting::make_kafka_sender(options_for(cluster.bootstraps(), "spans"), &error);
  ASSERT_TRUE(sender) << error;
  EXPECT_EQ(sender->describe(), "kafka " + cluster.bootstraps() + " topic spans");
  std::string binary("\x0a\x00\xff payload", 11);
  SendResult first = sender->send_keyed("0123456789abcdeffedcba9876543210", binary);
  EXPECT_EQ(first.outcome, SendResult::Outcome::kSent) << first.message;
  SendResult second = sender->send("unkeyed");
  EXPECT_EQ(second.outcome, SendResult::Outcome::kSent) << second.message;

  auto messages = consume(cluster.bootstraps(), "spans", 2);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].key, "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(messages[0].value, binary);
  ASSERT_EQ(messages[0].headers.size(), 1u);
  EXPECT_EQ(messages[0].headers[0],
            (std::pair<std::string, std::string>{"content-type", "application/x-protobuf"}));
  EXPECT_EQ(messages[1].key, "");
  EXPECT_EQ(messages[1].value, "unkeyed");
}

TEST(KafkaSender, AnAuthorizationErrorFailsTheBatchAndSaysWhy) {
  MockCluster cluster;
  cluster.create_topic("spans");
  std::string error;
  auto sender =
      opsight::exporting::make_kafka_sender(options_for(cluster.bootstraps(), "spans"), &error);
  ASSERT_TRUE(sender) << error;
  ASSERT_EQ(sender->send("warm up").outcome, SendResult::Outcome::kSent);
  rd_kafka_mock_push_request_errors(cluster.get(), kProduceApiKey, 1,
                                    RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  SendResult result = sender->send("denied");
  EXPECT_EQ(result.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(result.message.find("uthoriz"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("topic spans"), std::string::npos) << result.message;
}

TEST(KafkaSender, AMessageOverTheSizeLimitFailsAtOnce) {
  MockCluster cluster;
  KafkaSenderOptions options = options_for(cluster.bootstraps(), "spans");
  options.properties = {{"message.max.bytes", "1000"}};
  std::string error;
  auto sender = opsight::exporting::make_kafka_sender(options, &error);
  ASSERT_TRUE(sender) << error;
  SendResult result = sender->send(std::string(5000, 'x'));
  EXPECT_EQ(result.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(result.message.find("5000 bytes; lower --batch-size"), std::string::npos)
      << result.message;
}

TEST(KafkaSender, ABrokerThatIsDownIsRetriedUntilItIsBack) {
  MockCluster cluster;
  cluster.create_topic("spans");
  std::string error;
  auto sender = opsight::exporting::make_kafka_sender(
      options_for(cluster.bootstraps(), "spans", /*timeout_s=*/1), &error);
  ASSERT_TRUE(sender) << error;
  // The warm-up only has to get through once: under ASan with another suite on the other
  // core, the first connection to the mock broker can outlast this test's 1 s timeout (a
  // report that arrives late is matched to its own send and ignored by the next).
  SendResult warm_up;
  for (int attempt = 0; attempt < 5 && warm_up.outcome != SendResult::Outcome::kSent; ++attempt)
    warm_up = sender->send("warm up");
  ASSERT_EQ(warm_up.outcome, SendResult::Outcome::kSent) << warm_up.message;
  rd_kafka_mock_broker_set_down(cluster.get(), 1);
  auto start = Clock::now();
  SendResult down = sender->send("while down");
  EXPECT_EQ(down.outcome, SendResult::Outcome::kRetryable) << down.message;
  // The report times the message out, or the sender stops waiting for it a second later.
  EXPECT_TRUE(down.message.find("timed out") != std::string::npos ||
              down.message.find("no delivery report within 2 s") != std::string::npos)
      << down.message;
  // Bounded: the 1 s timeout plus the 1 s grace (and room for a loaded machine: sanitizer
  // builds run beside other suites).
  EXPECT_LT(seconds_since(start), 10.0);

  // Through the pipeline: retried with backoff while down, delivered once it is up.
  BatchExporterOptions pipeline;
  pipeline.initial_backoff_s = 0.05;
  pipeline.max_backoff_s = 0.2;
  pipeline.max_elapsed_s = 30;
  BatchExporter exporter(std::move(sender), pipeline);
  exporter.offer({"after the outage", 7, "key"});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  start = Clock::now() - std::chrono::milliseconds(1500);
  rd_kafka_mock_broker_set_up(cluster.get(), 1);
  EXPECT_TRUE(exporter.flush(20));
  std::fprintf(stderr, "delivered %.1f s after the broker came back\n", seconds_since(start) - 1.5);
  auto stats = exporter.stats();
  EXPECT_EQ(stats.spans_sent, 7u) << stats.last_error;
  EXPECT_GE(stats.retries, 1u);
  EXPECT_EQ(stats.spans_dropped(), 0u);
  auto messages = consume(cluster.bootstraps(), "spans", 3, 3);
  ASSERT_GE(messages.size(), 2u);  // at least once: the abandoned one may be there too
  EXPECT_EQ(messages.front().value, "warm up");
  auto after = std::find_if(messages.begin(), messages.end(), [](const Consumed& message) {
    return message.value == "after the outage";
  });
  ASSERT_NE(after, messages.end());
  EXPECT_EQ(after->key, "key");
}

TEST(KafkaSender, NoBrokerAnsweringStaysBoundedInTimeAndSaysWhy) {
  std::string error;
  // Port 1 on the loopback: refused at once, every time.
  auto sender =
      opsight::exporting::make_kafka_sender(options_for("127.0.0.1:1", "spans", 0.5), &error);
  ASSERT_TRUE(sender) << error;
  auto start = Clock::now();
  SendResult result = sender->send("nowhere");
  EXPECT_EQ(result.outcome, SendResult::Outcome::kRetryable);
  EXPECT_LT(seconds_since(start), 10.0);  // 0.5 s + 1 s grace; room for a loaded machine
  EXPECT_NE(result.message.find("last error"), std::string::npos) << result.message;

  // Shutting down a pipeline that keeps retrying drops what is left, counted, in time.
  BatchExporterOptions pipeline;
  pipeline.initial_backoff_s = 0.05;
  pipeline.max_elapsed_s = 60;
  auto exporter = std::make_unique<BatchExporter>(std::move(sender), pipeline);
  exporter->offer({"a", 3, "k"});
  exporter->offer({"b", 4, "k"});
  start = Clock::now();
  exporter->shutdown(0.5);
  auto stats = exporter->stats();
  exporter.reset();  // destroys the producer
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_EQ(stats.spans_sent, 0u);
  EXPECT_EQ(stats.spans_dropped_shutdown, 7u);
  EXPECT_EQ(stats.spans_offered, stats.spans_sent + stats.spans_dropped() + stats.spans_pending);
}

TEST(KafkaSender, PropertiesAreCheckedByLibrdkafka) {
  std::string error;
  EXPECT_TRUE(opsight::exporting::check_kafka_properties(
      {{"security.protocol", "plaintext"}, {"compression.type", "lz4"}, {"acks", "all"}}, &error))
      << error;
  EXPECT_FALSE(opsight::exporting::check_kafka_properties({{"securty.protocol", "ssl"}}, &error));
  EXPECT_NE(error.find("'securty.protocol'"), std::string::npos) << error;
  EXPECT_FALSE(opsight::exporting::check_kafka_properties({{"acks", "several"}}, &error));
  EXPECT_NE(error.find("'acks'"), std::string::npos) << error;
}

// A whole trace through export_trace, to the mock cluster: one message per batch of
// --batch-size spans, each holding one trace and keyed by its id (two requests here joined
// a caller's trace), every span there once.
TEST(KafkaExport, ATraceBecomesOneMessagePerBatchOfOneTrace) {
  MockCluster cluster;
  cluster.create_topic("opsight-spans");
  opsight::trace::Trace trace;
  trace.run.command_line = "python serve.py";
  trace.run.trace_id = {0x1111222233334444ULL, 0x5555666677778888ULL};
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  auto track = trace.thread_track(5, 5);
  trace.slices.add(0, 10'000, trace.intern("serve"), 0, track);  // the root: row 0
  auto name = trace.intern("step");
  for (int i = 0; i < 25; ++i) trace.slices.add(10 + i * 100, 50, name, 0, track);
  trace.finalize();
  const opsight::trace::TraceId remote{0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL};
  trace.span_contexts.add(3, remote, 0x00f067aa0ba902b7ULL, 1);
  trace.span_contexts.add(17, remote, 0x00f067aa0ba902b7ULL, 1);

  std::string error;
  auto target = opsight::exporting::parse_export_target(
      "kafka=" + cluster.bootstraps() + "?topic=opsight-spans",
      [](const char*) -> const char* { return nullptr; }, &error);
  ASSERT_TRUE(target) << error;
  opsight::exporting::TraceExportOptions options;
  options.batch_spans = 10;
  options.timeout_s = 20;
  auto reports = opsight::exporting::export_trace(trace, {*target}, options);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].description, "kafka " + cluster.bootstraps() + " topic opsight-spans");
  EXPECT_EQ(reports[0].stats.spans_sent, 26u) << reports[0].stats.last_error;
  // The root's trace (it and 23 steps): 10, 10, 4; the caller's 2.
  EXPECT_EQ(reports[0].stats.batches_sent, 4u);

  auto messages = consume(cluster.bootstraps(), "opsight-spans", 4);
  ASSERT_EQ(messages.size(), 4u);
  std::map<std::string, size_t> spans_per_key;
  namespace testing = opsight::wire::testing;
  for (const Consumed& message : messages) {
    // Each decoded message is held in a variable: find_fields points into it.
    auto request = testing::decode_message(message.value);
    ASSERT_TRUE(request);
    for (const auto* resource_spans :
         testing::find_fields(*request, otlp::export_request::kResourceSpans)) {
      auto resource = testing::decode_message(resource_spans->bytes);
      ASSERT_TRUE(resource);
      for (const auto* scope : testing::find_fields(*resource, otlp::resource_spans::kScopeSpans)) {
        auto scope_spans = testing::decode_message(scope->bytes);
        ASSERT_TRUE(scope_spans);
        for (const auto* span : testing::find_fields(*scope_spans, otlp::scope_spans::kSpans)) {
          auto fields = testing::decode_message(span->bytes);
          ASSERT_TRUE(fields);
          std::string hex;
          for (unsigned char byte : testing::find_field(*fields, otlp::span::kTraceId)->bytes)
            hex += fmt_hex(byte);
          EXPECT_EQ(hex, message.key);  // every span of the message is in the key's trace
          ++spans_per_key[message.key];
        }
      }
    }
  }
  ASSERT_EQ(trace.str(trace.slices.name[0]), "serve");
  EXPECT_EQ(spans_per_key,
            (std::map<std::string, size_t>{
                {opsight::trace::root_trace_id(trace.slices.span_id[0]).to_hex(), 24},
                {"4bf92f3577b34da6a3ce929d0e0e4736", 2}}));
}

}  // namespace
