// OTLP metrics: the request encode_otlp_metrics writes, decoded back field by field with
// the wire walker (python/tests/test_otlp_metrics.py checks the same bytes against the
// opentelemetry-proto package's descriptors, and tests/integration against the OpenTelemetry
// Collector's own OTLP receiver), and the otlp-metrics target's settings.
#include <gtest/gtest.h>

#include <bit>
#include <map>

#include "export/export.hpp"
#include "export/otlp/otlp_fields.hpp"
#include "export/otlp/otlp_metrics_encoder.hpp"
#include "wire/proto_decoder_for_tests.hpp"

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
  variables["OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"] = "grpc";
  EXPECT_FALSE(parse_export_target("otlp-metrics", environment, &error));
  EXPECT_NE(error.find("http/protobuf only"), std::string::npos) << error;
}

}  // namespace
