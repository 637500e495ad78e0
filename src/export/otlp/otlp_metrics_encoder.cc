#include "export/otlp/otlp_metrics_encoder.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <map>
#include <vector>

#include "export/otlp/otlp_common.hpp"
#include "export/otlp/otlp_fields.hpp"

namespace opsight::exporting {

namespace {

using otlp::ProtoEncoder;

// Writes one metric: name, unit, then the data message `kind` that `body` fills.
template <typename Body>
void write_metric(ProtoEncoder& encoder, std::string_view name, std::string_view description,
                  std::string_view unit, uint32_t kind, Body body) {
  size_t metric = encoder.begin_message(otlp::scope_metrics::kMetrics);
  encoder.bytes_field(otlp::metric::kName, name);
  if (!description.empty()) encoder.bytes_field(otlp::metric::kDescription, description);
  if (!unit.empty()) encoder.bytes_field(otlp::metric::kUnit, unit);
  size_t data = encoder.begin_message(kind);
  body();
  encoder.end_message(data);
  encoder.end_message(metric);
}

// A monotonic sum with one data point.
void write_total(ProtoEncoder& encoder, std::string_view name, std::string_view description,
                 std::string_view unit, double value, const MetricsInterval& interval,
                 uint64_t temporality) {
  write_metric(encoder, name, description, unit, otlp::metric::kSum, [&] {
    size_t point = encoder.begin_message(otlp::sum::kDataPoints);
    encoder.fixed64_field(otlp::number_data_point::kStartTimeUnixNano, interval.start_unix_ns);
    encoder.fixed64_field(otlp::number_data_point::kTimeUnixNano, interval.end_unix_ns);
    encoder.double_field(otlp::number_data_point::kAsDouble, value);
    encoder.end_message(point);
    encoder.varint_field(otlp::sum::kAggregationTemporality, temporality);
    encoder.bool_field(otlp::sum::kIsMonotonic, true);
  });
}

// A sample of a counter track, or of a rate's total, per pid.
struct OtlpMetricsPidSample {
  int64_t pid;
  double value;
};

// The OTLP name and UCUM unit of a counter's quantity ("process.io_read_bytes" in "By";
// "x_ns" becomes "x" in "s", its values scaled by `scale`).
struct OtlpMetricsQuantity {
  std::string name;
  std::string_view unit;
  double scale = 1;
};
OtlpMetricsQuantity otlp_metrics_quantity_of(std::string_view quantity) {
  OtlpMetricsQuantity out{"opsight." + std::string(quantity), "", 1};
  if (quantity.size() > 3 && quantity.ends_with("_ns")) {
    out.name.resize(out.name.size() - 3);
    out.unit = "s";
    out.scale = 1e-9;
  } else if (quantity.size() > 6 && quantity.ends_with("_bytes")) {
    out.unit = "By";
  }
  return out;
}

void write_exemplar(ProtoEncoder& encoder, const Exemplar& exemplar) {
  if (exemplar.span_id == 0) return;
  size_t message = encoder.begin_message(otlp::histogram_data_point::kExemplars);
  encoder.fixed64_field(otlp::exemplar::kTimeUnixNano,
                        static_cast<uint64_t>(std::max<int64_t>(0, exemplar.end_unix_ns)));
  encoder.double_field(otlp::exemplar::kAsDouble, exemplar.value_seconds);
  char span_id[8];
  otlp::put_span_id(span_id, exemplar.span_id);
  encoder.bytes_field(otlp::exemplar::kSpanId, std::string_view(span_id, 8));
  char trace_id[16];
  otlp::put_trace_id(trace_id, exemplar.trace_id);
  encoder.bytes_field(otlp::exemplar::kTraceId, std::string_view(trace_id, 16));
  encoder.end_message(message);
}

}  // namespace

std::string encode_otlp_metrics(const MetricsSnapshot& metrics, std::span<const Attribute> resource,
                                const MetricsInterval& interval, MetricsTemporality temporality,
                                uint64_t* data_points) {
  uint64_t points = 0;
  const uint64_t aggregation = temporality == MetricsTemporality::kDelta
                                   ? otlp::kTemporalityDelta
                                   : otlp::kTemporalityCumulative;
  std::string out;
  ProtoEncoder encoder(out);
  size_t resource_metrics = encoder.begin_message(otlp::export_metrics_request::kResourceMetrics);
  size_t resource_message = encoder.begin_message(otlp::resource_metrics::kResource);
  for (const Attribute& attribute : resource)
    otlp::write_attribute(encoder, otlp::resource::kAttributes, attribute);
  encoder.end_message(resource_message);
  size_t scope_metrics = encoder.begin_message(otlp::resource_metrics::kScopeMetrics);
  size_t scope = encoder.begin_message(otlp::scope_metrics::kScope);
  encoder.bytes_field(otlp::scope::kName, "opsight");
  encoder.end_message(scope);

  if (!metrics.spans.empty()) {
    // The bounds and the per-bucket counts as OTLP packs them (little-endian 8 bytes each).
    std::string bounds;
    for (double bound : kDurationBuckets) {
      uint64_t bits = std::bit_cast<uint64_t>(bound);
      for (int i = 0; i < 8; ++i) bounds += static_cast<char>(bits >> (8 * i));
    }
    write_metric(
        encoder, "opsight.span.duration", "Duration of the spans opsight recorded, per span name.",
        "s", otlp::metric::kHistogram, [&] {
          std::string counts;
          for (const auto& [name, histogram] : metrics.spans) {
            size_t point = encoder.begin_message(otlp::histogram::kDataPoints);
            ++points;
            otlp::write_attribute(encoder, otlp::histogram_data_point::kAttributes,
                                  {"span", AttributeValue::of(std::string_view(name))});
            encoder.fixed64_field(otlp::histogram_data_point::kStartTimeUnixNano,
                                  interval.start_unix_ns);
            encoder.fixed64_field(otlp::histogram_data_point::kTimeUnixNano, interval.end_unix_ns);
            encoder.fixed64_field(otlp::histogram_data_point::kCount, histogram.count);
            encoder.double_field(otlp::histogram_data_point::kSum, histogram.sum_seconds);
            // kDurationBucketCount bounds make one more bucket: what lies above the last.
            uint64_t within = 0;
            counts.clear();
            auto add_count = [&](uint64_t count) {
              for (int i = 0; i < 8; ++i) counts += static_cast<char>(count >> (8 * i));
            };
            for (uint64_t count : histogram.buckets) {
              add_count(count);
              within += count;
            }
            add_count(histogram.count - std::min(histogram.count, within));
            encoder.bytes_field(otlp::histogram_data_point::kBucketCounts, counts);
            encoder.bytes_field(otlp::histogram_data_point::kExplicitBounds, bounds);
            for (const Exemplar& exemplar : histogram.exemplars) write_exemplar(encoder, exemplar);
            encoder.end_message(point);
          }
          encoder.varint_field(otlp::histogram::kAggregationTemporality, aggregation);
        });
  }
  // OpenTelemetry's GenAI histograms (from the gen_ai.request spans), named by the semantic
  // conventions, with their bucket bounds and attributes: a metric per kind, a data point per
  // attribute set (MetricsSnapshot::gen_ai is ordered by kind).
  std::span<const GenAiMetricInfo> gen_ai_kinds = gen_ai_metrics();
  for (auto it = metrics.gen_ai.begin(); it != metrics.gen_ai.end();) {
    int kind = it->first.first;
    auto end = it;
    while (end != metrics.gen_ai.end() && end->first.first == kind) ++end;
    if (kind < 0 || static_cast<size_t>(kind) >= gen_ai_kinds.size()) {
      it = end;
      continue;
    }
    const GenAiMetricInfo& info = gen_ai_kinds[static_cast<size_t>(kind)];
    std::string bounds;
    for (double bound : info.bounds) {
      uint64_t bits = std::bit_cast<uint64_t>(bound);
      for (int i = 0; i < 8; ++i) bounds += static_cast<char>(bits >> (8 * i));
    }
    auto first = it;
    write_metric(encoder, info.name, info.help, info.unit, otlp::metric::kHistogram, [&] {
      std::string counts;
      for (auto point_it = first; point_it != end; ++point_it) {
        const BucketHistogram& histogram = point_it->second;
        size_t point = encoder.begin_message(otlp::histogram::kDataPoints);
        ++points;
        for (const auto& attribute : gen_ai_attributes(point_it->first.second)) {
          bool port = attribute.first == "server.port";
          otlp::write_attribute(
              encoder, otlp::histogram_data_point::kAttributes,
              {attribute.first, port ? AttributeValue::of(static_cast<int64_t>(
                                           std::strtoll(attribute.second.c_str(), nullptr, 10)))
                                     : AttributeValue::of(std::string_view(attribute.second))});
        }
        encoder.fixed64_field(otlp::histogram_data_point::kStartTimeUnixNano,
                              interval.start_unix_ns);
        encoder.fixed64_field(otlp::histogram_data_point::kTimeUnixNano, interval.end_unix_ns);
        encoder.fixed64_field(otlp::histogram_data_point::kCount, histogram.count);
        encoder.double_field(otlp::histogram_data_point::kSum, histogram.sum);
        counts.clear();
        uint64_t within = 0;
        for (size_t i = 0; i < info.bounds.size(); ++i) {
          uint64_t count = i < histogram.buckets.size() ? histogram.buckets[i] : 0;
          within += count;
          for (int byte = 0; byte < 8; ++byte) counts += static_cast<char>(count >> (8 * byte));
        }
        uint64_t above = histogram.count - std::min(histogram.count, within);
        for (int byte = 0; byte < 8; ++byte) counts += static_cast<char>(above >> (8 * byte));
        encoder.bytes_field(otlp::histogram_data_point::kBucketCounts, counts);
        encoder.bytes_field(otlp::histogram_data_point::kExplicitBounds, bounds);
        for (const Exemplar& exemplar : histogram.exemplars) write_exemplar(encoder, exemplar);
        encoder.end_message(point);
      }
      encoder.varint_field(otlp::histogram::kAggregationTemporality, aggregation);
    });
    it = end;
  }

  auto add_total = [&](std::string_view name, std::string_view description, std::string_view unit,
                       double value) {
    ++points;
    write_total(encoder, name, description, unit, value, interval, aggregation);
  };
  if (metrics.overhead_seconds >= 0)
    add_total("opsight.tracer.overhead", "Time the tracer spent on itself.", "s",
              metrics.overhead_seconds);
  if (metrics.traced_seconds >= 0)
    add_total("opsight.traced", "Wall time the tracer recorded.", "s", metrics.traced_seconds);
  add_total("opsight.events.dropped", "Events the tracer dropped at its memory bound.", "",
            static_cast<double>(metrics.events_dropped));

  // A rate track ("process.io_read_bytes_per_s") as the monotonic sum of its quantity
  // ("opsight.process.io_read_bytes", in By), a data point per pid: the rates integrated
  // over the times between their samples (MetricsSnapshot::rate_totals, what the
  // Prometheus exposition's _total counters hold).
  using Sample = OtlpMetricsPidSample;
  std::map<std::string, std::pair<OtlpMetricsQuantity, std::vector<Sample>>> totals;
  for (const auto& [key, rate] : metrics.rate_totals) {
    OtlpMetricsQuantity quantity = otlp_metrics_quantity_of(rate_counter_quantity(key.first));
    auto& entry = totals[quantity.name];
    entry.second.push_back({key.second, rate.total * quantity.scale});
    entry.first = std::move(quantity);
  }
  for (const auto& total : totals) {
    const OtlpMetricsQuantity& quantity = total.second.first;
    const std::vector<Sample>& samples = total.second.second;
    write_metric(
        encoder, quantity.name, "Total of the rate opsight sampled, since its first sample.",
        quantity.unit, otlp::metric::kSum, [&] {
          for (const Sample& sample : samples) {
            size_t point = encoder.begin_message(otlp::sum::kDataPoints);
            ++points;
            otlp::write_attribute(encoder, otlp::number_data_point::kAttributes,
                                  {"pid", AttributeValue::of(sample.pid)});
            encoder.fixed64_field(otlp::number_data_point::kStartTimeUnixNano,
                                  interval.start_unix_ns);
            encoder.fixed64_field(otlp::number_data_point::kTimeUnixNano, interval.end_unix_ns);
            encoder.double_field(otlp::number_data_point::kAsDouble, sample.value);
            encoder.end_message(point);
          }
          encoder.varint_field(otlp::sum::kAggregationTemporality, aggregation);
          encoder.bool_field(otlp::sum::kIsMonotonic, true);
        });
  }

  // One gauge per counter name (but the rates: their totals above), a data point per pid.
  std::map<std::string, std::vector<Sample>> gauges;
  for (const auto& [key, value] : metrics.counters) {
    if (is_rate_counter(key.first)) continue;
    std::string name = key.first;
    bool nanoseconds = name.ends_with("_ns");
    if (nanoseconds) name.resize(name.size() - 3);
    gauges[name].push_back({key.second, nanoseconds ? value * 1e-9 : value});
  }
  for (const auto& gauge : gauges) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture those in a lambda.
    const std::string& name = gauge.first;
    const std::vector<Sample>& samples = gauge.second;
    bool seconds = metrics.counters.count({name + "_ns", samples.front().pid}) > 0;
    write_metric(encoder, "opsight." + name, "Last sample of the counter opsight recorded.",
                 seconds ? "s" : "", otlp::metric::kGauge, [&] {
                   for (const Sample& sample : samples) {
                     size_t point = encoder.begin_message(otlp::gauge::kDataPoints);
                     ++points;
                     otlp::write_attribute(encoder, otlp::number_data_point::kAttributes,
                                           {"pid", AttributeValue::of(sample.pid)});
                     encoder.fixed64_field(otlp::number_data_point::kTimeUnixNano,
                                           interval.end_unix_ns);
                     encoder.double_field(otlp::number_data_point::kAsDouble, sample.value);
                     encoder.end_message(point);
                   }
                 });
  }
  encoder.end_message(scope_metrics);
  encoder.end_message(resource_metrics);
  if (data_points != nullptr) *data_points = points;
  return out;
}

MetricsSnapshot metrics_since(const MetricsSnapshot& now, const MetricsSnapshot& before) {
  MetricsSnapshot out;
  for (const auto& [name, histogram] : now.spans) {
    auto earlier = before.spans.find(name);
    if (earlier == before.spans.end()) {
      out.spans.emplace(name, histogram);
      continue;
    }
    if (histogram.count <= earlier->second.count) continue;  // nothing new
    DurationHistogram& gained = out.spans[name];
    gained.count = histogram.count - earlier->second.count;
    gained.sum_seconds = histogram.sum_seconds - earlier->second.sum_seconds;
    for (size_t i = 0; i < kDurationBucketCount; ++i)
      gained.buckets[i] =
          histogram.buckets[i] - std::min(histogram.buckets[i], earlier->second.buckets[i]);
    uint64_t within = 0;
    for (uint64_t count : gained.buckets) within += count;
    for (size_t i = 0; i <= kDurationBucketCount; ++i) {
      // A bucket's exemplar, where the bucket gained (+Inf: when the overflow did).
      bool gained_here = i < kDurationBucketCount ? gained.buckets[i] > 0 : gained.count > within;
      if (gained_here) gained.exemplars[i] = histogram.exemplars[i];
    }
  }
  for (const auto& [key, histogram] : now.gen_ai) {
    auto earlier = before.gen_ai.find(key);
    if (earlier == before.gen_ai.end()) {
      out.gen_ai.emplace(key, histogram);
      continue;
    }
    if (histogram.count <= earlier->second.count) continue;  // nothing new
    BucketHistogram& gained = out.gen_ai[key];
    gained.count = histogram.count - earlier->second.count;
    gained.sum = histogram.sum - earlier->second.sum;
    gained.buckets.resize(histogram.buckets.size());
    gained.exemplars.resize(histogram.exemplars.size());
    uint64_t within = 0;
    for (size_t i = 0; i < histogram.buckets.size(); ++i) {
      uint64_t was = i < earlier->second.buckets.size() ? earlier->second.buckets[i] : 0;
      gained.buckets[i] = histogram.buckets[i] - std::min(histogram.buckets[i], was);
      within += gained.buckets[i];
    }
    for (size_t i = 0; i < histogram.exemplars.size(); ++i) {
      bool gained_here = i < gained.buckets.size() ? gained.buckets[i] > 0 : gained.count > within;
      if (gained_here) gained.exemplars[i] = histogram.exemplars[i];
    }
  }
  out.overhead_seconds = now.overhead_seconds;
  out.traced_seconds = now.traced_seconds;
  out.events_dropped = now.events_dropped - std::min(now.events_dropped, before.events_dropped);
  out.counters = now.counters;
  out.rate_totals = now.rate_totals;
  for (auto& [key, rate] : out.rate_totals)
    if (auto earlier = before.rate_totals.find(key); earlier != before.rate_totals.end())
      rate.total -= earlier->second.total;
  return out;
}

MetricsInterval metrics_interval_of(const trace::Trace& trace) {
  int64_t last_end = INT64_MIN, first_start = INT64_MAX;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    first_start = std::min(first_start, trace.slices.ts[row]);
    last_end = std::max(last_end, trace.slices.end(static_cast<trace::RowIndex>(row)));
  }
  MetricsInterval interval;
  if (trace.run.has_unix_offset && last_end != INT64_MIN) {
    interval.end_unix_ns =
        static_cast<uint64_t>(std::max<int64_t>(0, last_end + trace.run.unix_offset_ns));
    interval.start_unix_ns =
        trace.run.start_unix_ns > 0
            ? static_cast<uint64_t>(trace.run.start_unix_ns)
            : static_cast<uint64_t>(std::max<int64_t>(0, first_start + trace.run.unix_offset_ns));
  } else {
    // No wall time in the trace: the run is taken to have just ended, lasting what it spans.
    auto now = std::chrono::system_clock::now().time_since_epoch();
    interval.end_unix_ns =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
    uint64_t length = last_end == INT64_MIN ? 0 : static_cast<uint64_t>(last_end - first_start);
    interval.start_unix_ns = interval.end_unix_ns - std::min(length, interval.end_unix_ns);
  }
  interval.start_unix_ns = std::min(interval.start_unix_ns, interval.end_unix_ns);
  return interval;
}

}  // namespace opsight::exporting
