// OTLP metrics: the request encode_otlp_metrics writes, decoded back field by field with
// the wire walker (python/tests/test_otlp_metrics.py checks the same bytes against the
// opentelemetry-proto package's descriptors, and tests/integration against the OpenTelemetry
// Collector's own OTLP receiver), and the otlp-metrics target's settings.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "export/export.hpp"
#include "export/otlp/grpc_sender.hpp"
#include "export/otlp/otlp_fields.hpp"
#include "export/otlp/otlp_metrics_encoder.hpp"
#include "wire/proto_decoder_for_tests.hpp"
#include "wire/proto_encoder.hpp"

namespace {

using opsight::exporting::Attribute;
using opsight::exporting::AttributeValue;
using opsight::exporting::encode_otlp_metrics;
using opsight::exporting::kDurationBucketCount;
using opsight::exporting::kDurationBuckets;
using opsight::exporting::MetricsInterval;
using opsight::exporting::MetricsSnapshot;
using opsight::exporting::MetricsTemporality;
using opsight::exporting::parse_export_target;
using opsight::wire::testing::decode_message;
using opsight::wire::testing::ProtoField;
namespace otlp = opsight::exporting::otlp;

std::vector<ProtoField> fields_of(std::string_view bytes) {
  auto fields = decode_message(bytes);
  EXPECT_TRUE(fields.has_value());
  return fields.value_or(std::vector<ProtoField>{});
}

std::vector<std::string_view> all(const std::vector<ProtoField>& fields, uint32_t number) {
  std::vector<std::string_view> found;
  for (const ProtoField& field : fields)
    if (field.number == number) found.push_back(field.bytes);
  return found;
}

const ProtoField* first(const std::vector<ProtoField>& fields, uint32_t number) {
  for (const ProtoField& field : fields)
    if (field.number == number) return &field;
  return nullptr;
}

// A KeyValue's key and its value's string or int.
std::pair<std::string, std::string> key_value(std::string_view bytes) {
  auto fields = fields_of(bytes);
  std::string key(first(fields, otlp::key_value::kKey)->bytes);
  auto value = fields_of(first(fields, otlp::key_value::kValue)->bytes);
  if (auto text = first(value, otlp::any_value::kStringValue))
    return {key, std::string(text->bytes)};
  return {key, std::to_string(first(value, otlp::any_value::kIntValue)->as_int())};
}

// The metrics of a request by name: each one's fields.
std::map<std::string, std::vector<ProtoField>> metrics_by_name(std::string_view request,
                                                               std::string* resource_name) {
  auto top = fields_of(request);
  auto resource_metrics = fields_of(all(top, otlp::export_metrics_request::kResourceMetrics).at(0));
  auto resource = fields_of(first(resource_metrics, otlp::resource_metrics::kResource)->bytes);
  for (auto attribute : all(resource, otlp::resource::kAttributes)) {
    auto [key, value] = key_value(attribute);
    if (key == "service.name") *resource_name = value;
  }
  auto scope = fields_of(first(resource_metrics, otlp::resource_metrics::kScopeMetrics)->bytes);
  std::map<std::string, std::vector<ProtoField>> metrics;
  for (auto metric : all(scope, otlp::scope_metrics::kMetrics)) {
    auto fields = fields_of(metric);
    metrics[std::string(first(fields, otlp::metric::kName)->bytes)] = fields;
  }
  return metrics;
}

std::vector<uint64_t> packed_fixed64(std::string_view bytes) {
  std::vector<uint64_t> values;
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    uint64_t value = 0;
    for (int b = 0; b < 8; ++b)
      value |= uint64_t{static_cast<unsigned char>(bytes[i + b])} << (8 * b);
    values.push_back(value);
  }
  return values;
}

TEST(OtlpMetrics, SpanDurationsAreAHistogramPerSpanNameWithThePrometheusBuckets) {
  MetricsSnapshot metrics;
  for (int64_t ns : {5'000, 50'000, 50'000, 3'000'000}) metrics.add_span("forward", ns);
  metrics.add_span("load", 20'000'000'000);  // 20 s: above the last bound
  metrics.overhead_seconds = 0.25;
  metrics.traced_seconds = 10;
  metrics.events_dropped = 7;
  metrics.set_counter("process.rss_bytes", 42, 1e9);
  metrics.set_counter("gpu.busy_ns", 42, 5e8);
  Attribute service{"service.name", AttributeValue::of(std::string_view("svc"))};
  std::string request =
      encode_otlp_metrics(metrics, std::span(&service, 1), MetricsInterval{1000, 2000},
                          MetricsTemporality::kCumulative);
  std::string service_name;
  auto by_name = metrics_by_name(request, &service_name);
  EXPECT_EQ(service_name, "svc");
  ASSERT_TRUE(by_name.count("opsight.span.duration"));
  const auto& duration = by_name["opsight.span.duration"];
  EXPECT_EQ(first(duration, otlp::metric::kUnit)->bytes, "s");
  auto histogram = fields_of(first(duration, otlp::metric::kHistogram)->bytes);
  EXPECT_EQ(first(histogram, otlp::histogram::kAggregationTemporality)->value,
            otlp::kTemporalityCumulative);
  std::map<std::string, std::vector<ProtoField>> points;
  for (auto point : all(histogram, otlp::histogram::kDataPoints)) {
    auto fields = fields_of(point);
    points[key_value(first(fields, otlp::histogram_data_point::kAttributes)->bytes).second] =
        fields;
  }
  ASSERT_EQ(points.size(), 2u);
  const auto& forward = points["forward"];
  EXPECT_EQ(first(forward, otlp::histogram_data_point::kCount)->value, 4u);
  EXPECT_NEAR(first(forward, otlp::histogram_data_point::kSum)->as_double(), 3.105e-3, 1e-12);
  EXPECT_EQ(first(forward, otlp::histogram_data_point::kStartTimeUnixNano)->value, 1000u);
  EXPECT_EQ(first(forward, otlp::histogram_data_point::kTimeUnixNano)->value, 2000u);
  auto bounds = packed_fixed64(first(forward, otlp::histogram_data_point::kExplicitBounds)->bytes);
  ASSERT_EQ(bounds.size(), kDurationBucketCount);
  for (size_t i = 0; i < bounds.size(); ++i)
    EXPECT_EQ(std::bit_cast<double>(bounds[i]), kDurationBuckets[i]);
  auto counts = packed_fixed64(first(forward, otlp::histogram_data_point::kBucketCounts)->bytes);
  ASSERT_EQ(counts.size(), kDurationBucketCount + 1);  // one more than the bounds
  EXPECT_EQ(counts[0], 1u);                            // 5 µs <= 10 µs
  EXPECT_EQ(counts[1], 2u);                            // 50 µs <= 100 µs
  EXPECT_EQ(counts[6], 1u);                            // 2.5 ms < 3 ms <= 5 ms
  uint64_t total = 0;
  for (uint64_t count : counts) total += count;
  EXPECT_EQ(total, 4u);
  auto load =
      packed_fixed64(first(points["load"], otlp::histogram_data_point::kBucketCounts)->bytes);
  EXPECT_EQ(load.back(), 1u);  // above the last bound: the overflow bucket

  auto sum_value = [&](const std::string& name) {
    auto sum = fields_of(first(by_name.at(name), otlp::metric::kSum)->bytes);
    EXPECT_EQ(first(sum, otlp::sum::kIsMonotonic)->value, 1u);
    auto point = fields_of(first(sum, otlp::sum::kDataPoints)->bytes);
    return first(point, otlp::number_data_point::kAsDouble)->as_double();
  };
  EXPECT_EQ(sum_value("opsight.tracer.overhead"), 0.25);
  EXPECT_EQ(sum_value("opsight.traced"), 10);
  EXPECT_EQ(sum_value("opsight.events.dropped"), 7);

  auto gauge_value = [&](const std::string& name) {
    auto gauge = fields_of(first(by_name.at(name), otlp::metric::kGauge)->bytes);
    auto point = fields_of(first(gauge, otlp::gauge::kDataPoints)->bytes);
    EXPECT_EQ(key_value(first(point, otlp::number_data_point::kAttributes)->bytes),
              (std::pair<std::string, std::string>{"pid", "42"}));
    return first(point, otlp::number_data_point::kAsDouble)->as_double();
  };
  EXPECT_EQ(gauge_value("opsight.process.rss_bytes"), 1e9);
  EXPECT_DOUBLE_EQ(gauge_value("opsight.gpu.busy"), 0.5);  // _ns: in seconds
  EXPECT_EQ(first(by_name.at("opsight.gpu.busy"), otlp::metric::kUnit)->bytes, "s");
}

TEST(OtlpMetrics, DeltaTemporalityIsWrittenWhenAsked) {
  MetricsSnapshot metrics;
  metrics.add_span("forward", 1000);
  std::string request =
      encode_otlp_metrics(metrics, {}, MetricsInterval{1, 2}, MetricsTemporality::kDelta);
  std::string service;
  auto by_name = metrics_by_name(request, &service);
  auto histogram =
      fields_of(first(by_name.at("opsight.span.duration"), otlp::metric::kHistogram)->bytes);
  EXPECT_EQ(first(histogram, otlp::histogram::kAggregationTemporality)->value,
            otlp::kTemporalityDelta);
}

TEST(OtlpMetrics, TheTargetReadsTheMetricsVariablesOverTheGeneralOnes) {
  std::map<std::string, std::string> variables{
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "a=1"},
      {"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "a=2"},
      {"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "gzip"},
      {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Delta"}};
  auto environment = [&](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
  std::string error;
  auto target = parse_export_target("otlp-metrics", environment, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->label(), "otlp-metrics");
  EXPECT_EQ(target->endpoint.url(), "http://collector:4318/v1/metrics");
  EXPECT_EQ(target->headers, (std::vector<std::pair<std::string, std::string>>{{"a", "2"}}));
  EXPECT_TRUE(target->gzip);
  EXPECT_TRUE(target->delta_temporality);

  variables["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] =
      "http://prometheus:9090/api/v1/otlp/v1/metrics";
  target = parse_export_target("otlp-metrics", environment, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "http://prometheus:9090/api/v1/otlp/v1/metrics");  // as is

  variables["OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"] = "sometimes";
  EXPECT_FALSE(parse_export_target("otlp-metrics", environment, &error));
  EXPECT_NE(error.find("TEMPORALITY_PREFERENCE 'sometimes'"), std::string::npos) << error;
  variables.erase("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE");
  // grpc makes it otlp-metrics-grpc (OtlpGrpcTarget.MetricsAndLogsTakeGrpcFromTheirProtocol);
  // OTLP/JSON is not sent for metrics.
  variables["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"] = "http/json";
  EXPECT_FALSE(parse_export_target("otlp-metrics", environment, &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL 'http/json': opsight sends metrics "
                       "as http/protobuf or grpc"),
            std::string::npos)
      << error;
}

// A sampled rate is sent as the monotonic sum of its quantity in its base unit (what the
// Prometheus exposition's _total counter holds: MetricsSnapshot::rate_totals), a data point
// per pid, never as a gauge of the rate.
TEST(OtlpMetrics, ARateIsAMonotonicSumOfItsQuantityInItsBaseUnit) {
  MetricsSnapshot metrics;
  // 1 MB/s for 2 s, then 4 MB/s for 0.5 s (the first sample only starts the total).
  metrics.set_counter("process.io_read_bytes_per_s", 7, 5e6, 1'000'000'000);
  metrics.set_counter("process.io_read_bytes_per_s", 7, 1e6, 3'000'000'000);
  metrics.set_counter("process.io_read_bytes_per_s", 7, 4e6, 3'500'000'000);
  metrics.set_counter("process.io_read_bytes_per_s", 8, 2e6, 0);
  metrics.set_counter("process.io_read_bytes_per_s", 8, 2e6, 1'000'000'000);
  metrics.set_counter("gpu.busy_ns_per_s", 7, 5e8, 0);
  metrics.set_counter("gpu.busy_ns_per_s", 7, 5e8, 2'000'000'000);  // 0.5 s/s for 2 s: 1 s
  metrics.set_counter("process.rss_bytes", 7, 123);
  uint64_t data_points = 0;
  std::string request = encode_otlp_metrics(metrics, {}, MetricsInterval{1000, 2000},
                                            MetricsTemporality::kCumulative, &data_points);
  std::string service;
  auto by_name = metrics_by_name(request, &service);
  EXPECT_FALSE(by_name.count("opsight.process.io_read_bytes_per_s"));  // no gauge of the rate
  EXPECT_FALSE(by_name.count("opsight.gpu.busy_ns_per_s"));
  ASSERT_TRUE(by_name.count("opsight.process.io_read_bytes"));
  const auto& read = by_name["opsight.process.io_read_bytes"];
  EXPECT_EQ(first(read, otlp::metric::kUnit)->bytes, "By");
  EXPECT_EQ(first(read, otlp::metric::kGauge), nullptr);
  auto sum = fields_of(first(read, otlp::metric::kSum)->bytes);
  EXPECT_EQ(first(sum, otlp::sum::kIsMonotonic)->value, 1u);
  EXPECT_EQ(first(sum, otlp::sum::kAggregationTemporality)->value, otlp::kTemporalityCumulative);
  std::map<std::string, double> by_pid;
  for (auto point_bytes : all(sum, otlp::sum::kDataPoints)) {
    auto point = fields_of(point_bytes);
    EXPECT_EQ(first(point, otlp::number_data_point::kStartTimeUnixNano)->value, 1000u);
    EXPECT_EQ(first(point, otlp::number_data_point::kTimeUnixNano)->value, 2000u);
    auto pid = key_value(first(point, otlp::number_data_point::kAttributes)->bytes);
    EXPECT_EQ(pid.first, "pid");
    by_pid[pid.second] = first(point, otlp::number_data_point::kAsDouble)->as_double();
  }
  EXPECT_EQ(by_pid, (std::map<std::string, double>{{"7", 4e6}, {"8", 2e6}}));
  ASSERT_TRUE(by_name.count("opsight.gpu.busy"));  // _ns: seconds
  EXPECT_EQ(first(by_name["opsight.gpu.busy"], otlp::metric::kUnit)->bytes, "s");
  auto busy = fields_of(first(by_name["opsight.gpu.busy"], otlp::metric::kSum)->bytes);
  EXPECT_DOUBLE_EQ(first(fields_of(first(busy, otlp::sum::kDataPoints)->bytes),
                         otlp::number_data_point::kAsDouble)
                       ->as_double(),
                   1.0);
  EXPECT_TRUE(by_name.count("opsight.process.rss_bytes"));  // a plain counter stays a gauge
  // 2 + 1 rate points, the gauge's, and opsight.events.dropped (overhead and traced unknown).
  EXPECT_EQ(data_points, 5u);

  request =
      encode_otlp_metrics(metrics, {}, MetricsInterval{1000, 2000}, MetricsTemporality::kDelta);
  by_name = metrics_by_name(request, &service);
  sum = fields_of(first(by_name.at("opsight.process.io_read_bytes"), otlp::metric::kSum)->bytes);
  EXPECT_EQ(first(sum, otlp::sum::kAggregationTemporality)->value, otlp::kTemporalityDelta);
}

// A collector's partial success (ExportMetricsServiceResponse.partial_success: rejected
// data points under the traces' field numbers): the rejected data points are counted as
// dropped, and the report names them data points, not spans.
TEST(OtlpMetrics, APartialSuccessCountsRejectedDataPoints) {
  std::string partial, answer;
  opsight::wire::ProtoEncoder(partial).varint_field(otlp::partial_success::kRejectedSpans, 2);
  opsight::wire::ProtoEncoder(partial).bytes_field(otlp::partial_success::kErrorMessage, "too old");
  opsight::wire::ProtoEncoder(answer).bytes_field(otlp::export_response::kPartialSuccess, partial);
  httplib::Server server;
  std::mutex mutex;
  std::vector<std::string> bodies;
  server.Post("/v1/metrics", [&](const httplib::Request& request, httplib::Response& response) {
    std::lock_guard lock(mutex);
    bodies.push_back(request.body);
    response.set_content(answer, "application/x-protobuf");
  });
  server.set_keep_alive_timeout(1);
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  opsight::trace::Trace trace;
  auto track = trace.thread_track(1, 1);
  for (int i = 0; i < 5; ++i) trace.slices.add(i * 100, 50, trace.intern("work"), 0, track);
  trace.finalize();
  std::string error;
  auto target = parse_export_target(
      "otlp-metrics=http://127.0.0.1:" + std::to_string(port),
      [](const char*) -> const char* { return nullptr; }, &error);
  ASSERT_TRUE(target) << error;
  opsight::exporting::TraceExportOptions options;
  options.requests_in_flight = 1;
  auto reports = opsight::exporting::export_trace(trace, {*target}, options);
  server.stop();
  serving.join();
  ASSERT_EQ(reports.size(), 1u);
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(reports[0].item, "data point");
  // One histogram point ("work") and the tracer's three totals: 4, not the trace's 5 spans.
  EXPECT_EQ(reports[0].stats.spans_offered, 4u);
  EXPECT_EQ(reports[0].stats.spans_sent, 2u);
  EXPECT_EQ(reports[0].stats.spans_dropped_failed, 2u);
  EXPECT_NE(reports[0].stats.last_error.find(
                "rejected 2 data points of the batch (OTLP partial success): too old"),
            std::string::npos)
      << reports[0].stats.last_error;
}

// OTEL_METRIC_EXPORT_TIMEOUT bounds each export of an OTLP metrics target, over HTTP and gRPC:
// against a black hole (a port that takes connections and never answers) the export ends
// within it and counts every data point dropped, where the request's own 10 s timeout and
// the retries would hold it for the whole 30 s of the export.
TEST(OtlpMetrics, TheMetricExportTimeoutBoundsEachExportOverHttpAndGrpc) {
  using opsight::exporting::apply_batch_environment;
  std::map<std::string, std::string> variables;
  auto environment = [&](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
  opsight::exporting::TraceExportOptions options;
  EXPECT_EQ(apply_batch_environment(environment, false, &options), "");
  EXPECT_DOUBLE_EQ(options.metric_export_timeout_s, 30);  // the specification's default
  variables["OTEL_METRIC_EXPORT_TIMEOUT"] = "soon";
  EXPECT_NE(apply_batch_environment(environment, false, &options)
                .find("OTEL_METRIC_EXPORT_TIMEOUT 'soon' is not a positive whole number"),
            std::string::npos);
  variables["OTEL_METRIC_EXPORT_TIMEOUT"] = "400";
  EXPECT_EQ(apply_batch_environment(environment, false, &options), "");
  EXPECT_DOUBLE_EQ(options.metric_export_timeout_s, 0.4);

  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 64), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::string port = std::to_string(ntohs(address.sin_port));

  opsight::trace::Trace trace;
  auto track = trace.thread_track(1, 1);
  for (int i = 0; i < 5; ++i) trace.slices.add(i * 100, 50, trace.intern("work"), 0, track);
  trace.finalize();
  std::vector<std::string> specs{"otlp-metrics=http://127.0.0.1:" + port};
  if (opsight::exporting::grpc_available())
    specs.push_back("otlp-metrics-grpc=http://127.0.0.1:" + port);
  for (const std::string& spec : specs) {
    SCOPED_TRACE(spec);
    std::string error;
    auto target = parse_export_target(spec, environment, &error);
    ASSERT_TRUE(target) << error;
    options.timeout_s = 30;
    options.requests_in_flight = 1;
    auto start = std::chrono::steady_clock::now();
    auto reports = opsight::exporting::export_trace(trace, {*target}, options);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(reports.size(), 1u);
    // HTTP: the request's 0.4 s (its HTTP/2 check within it). gRPC: its connection attempts
    // fail fast (the channel's short connect timeout) and are retried until the next retry
    // would pass the bound. Without the bound: 10 s a request, retried for the export's 30 s.
    // The limit is half of one unbounded request, not a few times the bound: a loaded CI
    // machine may deschedule the export for a second or more.
    EXPECT_LT(seconds, 5.0) << reports[0].stats.drop_reasons();
    EXPECT_EQ(reports[0].stats.spans_offered, 4u);
    EXPECT_EQ(reports[0].stats.spans_sent, 0u);
    EXPECT_EQ(reports[0].stats.spans_dropped(), 4u) << reports[0].stats.drop_reasons();
  }
  ::close(listener);
}

// A delta export's content (live otlp-metrics with delta temporality): what each histogram,
// rate total and the drops gained since the export before; a span name that gained nothing
// is left out; counters' last samples as they are.
TEST(OtlpMetrics, MetricsSinceIsWhatEachIntervalAdded) {
  MetricsSnapshot before;
  before.add_span("forward", 5'000);
  before.add_span("idle", 5'000);
  before.set_counter("process.io_read_bytes_per_s", 7, 1e6, 0);
  before.set_counter("process.io_read_bytes_per_s", 7, 1e6, 1'000'000'000);  // 1 MB
  before.events_dropped = 3;
  MetricsSnapshot now = before;
  now.add_span("forward", 50'000);
  now.add_span("forward", 20'000'000'000);  // above the last bound
  now.add_span("new", 1'000);
  now.set_counter("process.io_read_bytes_per_s", 7, 2e6, 2'000'000'000);  // + 2 MB
  now.set_counter("process.rss_bytes", 7, 42);
  now.events_dropped = 5;
  MetricsSnapshot delta = opsight::exporting::metrics_since(now, before);
  EXPECT_EQ(delta.spans.count("idle"), 0u);  // nothing new
  ASSERT_EQ(delta.spans.count("forward"), 1u);
  const auto& forward = delta.spans.at("forward");
  EXPECT_EQ(forward.count, 2u);
  EXPECT_NEAR(forward.sum_seconds, 20.00005, 1e-9);
  EXPECT_EQ(forward.buckets[0], 0u);  // the earlier 5 µs
  EXPECT_EQ(forward.buckets[1], 1u);  // 50 µs
  uint64_t within = 0;
  for (uint64_t count : forward.buckets) within += count;
  EXPECT_EQ(within, 1u);  // the 20 s one is in the overflow bucket
  EXPECT_EQ(delta.spans.at("new").count, 1u);
  EXPECT_DOUBLE_EQ(delta.rate_totals.at({"process.io_read_bytes_per_s", 7}).total, 2e6);
  EXPECT_EQ(delta.events_dropped, 2u);
  EXPECT_EQ(delta.counters.at({"process.rss_bytes", 7}), 42);
}

// OpenTelemetry's GenAI histograms over OTLP: named, with units, bucket bounds and
// attributes as the semantic conventions give them (a model name with a quote and a server
// port survive the Prometheus label text they are kept in).
TEST(OtlpMetrics, GenAiHistogramsAreTheConventionsMetrics) {
  MetricsSnapshot metrics;
  opsight::exporting::GenAiRequest request;
  request.operation = "chat";
  request.model = "gpt2 \"tiny\"";
  request.server_address = "127.0.0.1";
  request.server_port = 8000;
  request.input_tokens = 20;
  request.output_tokens = 5;
  request.duration_seconds = 0.3;
  request.time_to_first_token = 0.03;
  request.time_per_output_token = 0.07;
  metrics.add_gen_ai_request(request);
  request.time_to_first_token = 0.003;
  metrics.add_gen_ai_request(request);
  uint64_t data_points = 0;
  std::string encoded = encode_otlp_metrics(metrics, {}, MetricsInterval{10, 20},
                                            MetricsTemporality::kCumulative, &data_points);
  std::string service;
  auto by_name = metrics_by_name(encoded, &service);
  for (const char* name :
       {"gen_ai.server.time_to_first_token", "gen_ai.server.time_per_output_token",
        "gen_ai.server.request.duration", "gen_ai.client.token.usage"})
    EXPECT_TRUE(by_name.count(name)) << name;
  EXPECT_EQ(first(by_name["gen_ai.client.token.usage"], otlp::metric::kUnit)->bytes, "{token}");
  const auto& ttft = by_name["gen_ai.server.time_to_first_token"];
  EXPECT_EQ(first(ttft, otlp::metric::kUnit)->bytes, "s");
  auto histogram = fields_of(first(ttft, otlp::metric::kHistogram)->bytes);
  EXPECT_EQ(first(histogram, otlp::histogram::kAggregationTemporality)->value,
            otlp::kTemporalityCumulative);
  auto points = all(histogram, otlp::histogram::kDataPoints);
  ASSERT_EQ(points.size(), 1u);
  auto point = fields_of(points[0]);
  std::map<std::string, std::string> attributes;
  for (auto attribute : all(point, otlp::histogram_data_point::kAttributes))
    attributes.insert(key_value(attribute));
  EXPECT_EQ(attributes["gen_ai.operation.name"], "chat");
  EXPECT_EQ(attributes["gen_ai.request.model"], "gpt2 \"tiny\"");
  EXPECT_EQ(attributes["server.address"], "127.0.0.1");
  EXPECT_EQ(attributes.count("server.port"), 1u);
  EXPECT_EQ(first(point, otlp::histogram_data_point::kCount)->value, 2u);
  EXPECT_NEAR(first(point, otlp::histogram_data_point::kSum)->as_double(), 0.033, 1e-12);
  auto bounds = packed_fixed64(first(point, otlp::histogram_data_point::kExplicitBounds)->bytes);
  ASSERT_EQ(bounds.size(), 16u);  // the conventions' 0.001 ... 10
  EXPECT_EQ(std::bit_cast<double>(bounds[0]), 0.001);
  EXPECT_EQ(std::bit_cast<double>(bounds[15]), 10.0);
  auto counts = packed_fixed64(first(point, otlp::histogram_data_point::kBucketCounts)->bytes);
  ASSERT_EQ(counts.size(), 17u);
  EXPECT_EQ(counts[1], 1u);  // 3 ms <= 5 ms
  EXPECT_EQ(counts[4], 1u);  // 30 ms <= 40 ms
  // Token usage: one point per token type.
  auto usage =
      fields_of(first(by_name["gen_ai.client.token.usage"], otlp::metric::kHistogram)->bytes);
  std::map<std::string, uint64_t> tokens;
  for (auto usage_point : all(usage, otlp::histogram::kDataPoints)) {
    auto fields = fields_of(usage_point);
    std::string type;
    for (auto attribute : all(fields, otlp::histogram_data_point::kAttributes))
      if (key_value(attribute).first == "gen_ai.token.type") type = key_value(attribute).second;
    tokens[type] =
        static_cast<uint64_t>(first(fields, otlp::histogram_data_point::kSum)->as_double());
  }
  EXPECT_EQ(tokens, (std::map<std::string, uint64_t>{{"input", 40}, {"output", 10}}));
  // ttft, tpot, request duration, 2 token types, and events.dropped.
  EXPECT_EQ(data_points, 6u);
}

}  // namespace
