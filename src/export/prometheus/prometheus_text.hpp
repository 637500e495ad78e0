// Metrics in Prometheus's text exposition format (version 0.0.4), for a Pushgateway push
// (from a finished trace) and for the live /metrics endpoint (from MetricsSnapshot, which
// the endpoint fills as spans end):
//   opsight_span_duration_seconds{span="..."}   histogram per span name (buckets from 10 µs
//                                               to 10 s, sum, count)
//   opsight_tracer_overhead_seconds_total       the recorder's own time (when known)
//   opsight_traced_seconds_total                wall time recorded (when known)
//   opsight_events_dropped_total                events lost to the memory bound
//   opsight_<counter>{pid="..."}                the last sample of each counter track
//                                               ("process.rss_bytes" ->
//                                               opsight_process_rss_bytes; _ns counters are
//                                               converted to _seconds)
//   opsight_<quantity>_total{pid="..."}         a rate track ("process.io_read_bytes_per_s")
//                                               as the counter of its unit that PromQL's
//                                               rate() expects (opsight_process_io_read_
//                                               bytes_total): the rates integrated over the
//                                               times between their samples
// OpenTelemetry's GenAI metrics, from the `gen_ai.request` spans opsight.llm writes
// (docs/llm.md): gen_ai_client_token_usage, gen_ai_client_operation_duration_seconds,
// gen_ai_client_operation_time_to_first_chunk_seconds,
// gen_ai_client_operation_time_per_output_chunk_seconds (one per gen_ai.inter_token child)
// (a span of kind client: measured by the caller), gen_ai_server_request_duration_seconds,
// gen_ai_server_time_to_first_token_seconds, gen_ai_server_time_per_output_token_seconds (any other
// span: measured where the model runs); histograms with the conventions' bucket boundaries,
// labelled with the span's gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model,
// error.type, server.address and server.port, named by OpenTelemetry's Prometheus rules (dots
// become underscores, the unit "s" becomes the suffix _seconds, an annotation unit like {token} is
// dropped);
// and, for metrics that are not a trace's (opsight explain's graph-break counts), any
// MetricFamily of labelled samples (record_export.hpp pushes them).
// Every family has HELP and TYPE lines; names and label values are escaped as the format
// requires, so `promtool check metrics` accepts the output.
//
// The same snapshot also renders in OpenMetrics 1.0 (what a scraper gets when its Accept
// header asks for application/openmetrics-text: exposition_format_for): counter families
// are named without `_total` (their sample keeps it), the text ends with `# EOF`, and each
// bucket of opsight_span_duration_seconds (and of the GenAI histograms: the request span)
// carries an exemplar: the last span observed in that bucket, as `# {trace_id="<32
// hex>",span_id="<16 hex>"} <seconds> <unix end time>` (the ids the span exporters give it), which
// links a slow bucket to its trace. Keeping an exemplar is a fixed slot per bucket overwritten by
// each span: no allocation per span.
//
// Thread-safety: MetricsSnapshot is a plain value (one writer); the functions keep no state.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "export/span_view.hpp"
#include "trace/trace.hpp"

namespace opsight::exporting {

// The upper bounds of opsight_span_duration_seconds's buckets, in seconds (+Inf apart).
inline constexpr double kDurationBuckets[] = {1e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                              5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,  0.25,
                                              0.5,  1.0,  2.5,    5.0,  10.0};
inline constexpr size_t kDurationBucketCount = std::size(kDurationBuckets);

// One observation kept to stand for its bucket (an OpenMetrics exemplar): the span it came
// from, by the ids its trace exporters give it.
struct Exemplar {
  trace::TraceId trace_id;
  uint64_t span_id = 0;  // 0: no exemplar
  double value_seconds = 0;
  int64_t end_unix_ns = 0;  // when the span ended (the exemplar's timestamp)
};

// The span a duration came from (for its bucket's exemplar); span_id 0: not known.
struct SpanOrigin {
  trace::TraceId trace_id;
  uint64_t span_id = 0;
  int64_t end_unix_ns = 0;
};

struct DurationHistogram {
  uint64_t buckets[kDurationBucketCount] = {};  // per bucket, not cumulative
  uint64_t count = 0;
  double sum_seconds = 0;
  // The latest observation per bucket (+Inf's last), when its span is known.
  Exemplar exemplars[kDurationBucketCount + 1] = {};
  void add(int64_t duration_ns, const SpanOrigin& origin = {});
};

// One finished `gen_ai.request` span, as the GenAI metrics read it: filled attribute by
// attribute (set()), then added to a MetricsSnapshot. The views point into the span's
// storage: use it before that goes.
struct GenAiRequest {
  std::string_view operation, provider, model, error_type, server_address;
  int64_t server_port = -1;
  bool client = false;        // span.kind "client": the caller measured it
  int64_t input_tokens = -1;  // < 0: not known
  int64_t output_tokens = -1;
  double duration_seconds = 0;        // the span's: arrival to the last token (or the failure)
  double time_to_first_token = -1;    // seconds; < 0: none
  double time_per_output_token = -1;  // seconds; < 0: none (fewer than two tokens)

  // One attribute of the span (`text` is a string attribute's value; other keys are ignored).
  void set(std::string_view key, const trace::ArgValue& value, std::string_view text);
};

// The span names the GenAI metrics are read from: a request, and each of its chunks after
// the first (its child).
inline constexpr std::string_view kGenAiRequestSpan = "gen_ai.request";
inline constexpr std::string_view kGenAiChunkSpan = "gen_ai.inter_token";

// Counters whose name ends in _per_s are rates of the quantity before the suffix
// ("process.io_read_bytes_per_s" of "process.io_read_bytes"): the exporters send the
// quantity's total (MetricsSnapshot::rate_totals), not the rate.
inline constexpr std::string_view kRateCounterSuffix = "_per_s";
inline bool is_rate_counter(std::string_view name) {
  return name.size() > kRateCounterSuffix.size() && name.ends_with(kRateCounterSuffix);
}
inline std::string_view rate_counter_quantity(std::string_view name) {
  return is_rate_counter(name) ? name.substr(0, name.size() - kRateCounterSuffix.size()) : name;
}

// OpenTelemetry's GenAI metrics (MetricsSnapshot::gen_ai, by index): each one's name in
// the semantic conventions and in Prometheus, its unit, description and bucket bounds.
struct GenAiMetricInfo {
  std::string_view name;             // "gen_ai.server.time_to_first_token"
  std::string_view prometheus_name;  // "gen_ai_server_time_to_first_token_seconds"
  std::string_view unit;             // "s", "{token}"
  std::string_view help;
  std::span<const double> bounds;
};
std::span<const GenAiMetricInfo> gen_ai_metrics();
// The labels of a GenAI histogram (MetricsSnapshot::gen_ai's label text, Prometheus's
// `name="value",...`) as OpenTelemetry attributes, in order: gen_ai.operation.name,
// gen_ai.provider.name, gen_ai.request.model, gen_ai.token.type, error.type,
// server.address (strings, unescaped) and server.port (a whole number in its text).
std::vector<std::pair<std::string, std::string>> gen_ai_attributes(std::string_view label_text);

// A histogram with its own bucket bounds (the GenAI metrics').
struct BucketHistogram {
  std::vector<uint64_t> buckets;  // per bucket, not cumulative
  uint64_t count = 0;
  double sum = 0;
  // The latest observation per bucket (+Inf's last), its request span's; sized once, with
  // `buckets`.
  std::vector<Exemplar> exemplars;
};

struct MetricsSnapshot {
  std::map<std::string, DurationHistogram, std::less<>> spans;  // by span name
  double overhead_seconds = -1;                                 // < 0: unknown, not written
  double traced_seconds = -1;
  uint64_t events_dropped = 0;
  // The last sample per (counter name, pid).
  std::map<std::pair<std::string, int64_t>, double> counters;
  // Per (rate counter name, pid), for the counters whose name ends in _per_s: the rate
  // integrated over time, each sample times the time since the one before it (a rate
  // sample is the amount since the previous sample over that time, recorded when measured;
  // the amount before the first sample is not known, so the total counts from there).
  struct RateTotal {
    double total = 0;
    int64_t last_ns = 0;
    bool started = false;
  };
  std::map<std::pair<std::string, int64_t>, RateTotal> rate_totals;

  // The GenAI histograms by (metric, label text): see add_gen_ai_request.
  std::map<std::pair<int, std::string>, BucketHistogram> gen_ai;

  void add_span(std::string_view name, int64_t duration_ns, const SpanOrigin& origin = {});
  // Adds a finished gen_ai.request span to the GenAI histograms (the header says which);
  // `chunk_ns`: the durations of its gen_ai.inter_token children (the times between chunks);
  // `origin`: the request span, the exemplar of every bucket it adds to.
  void add_gen_ai_request(const GenAiRequest& request, std::span<const int64_t> chunk_ns = {},
                          const SpanOrigin& origin = {});
  // A counter sample at `ns` (any clock, the same for every sample of a counter).
  void set_counter(std::string_view name, int64_t pid, double value, int64_t ns = 0);
};

// The metrics of a finished trace. With `ids` (the span view exporters send the trace's
// spans through), each bucket keeps its last span as an exemplar, by the ids that view gives
// it (OTLP metrics carry them); without, no exemplars (a Pushgateway takes none).
MetricsSnapshot metrics_of(const trace::Trace& trace, const SpanView* ids = nullptr);

enum class ExpositionFormat { kPrometheusText, kOpenMetrics };
inline constexpr std::string_view kPrometheusTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";
inline constexpr std::string_view kOpenMetricsContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
// The format a scraper asks for with its Accept header: OpenMetrics when it names
// application/openmetrics-text (version 1.0.0, 0.0.1 or none) with a q-value above zero and
// not below that of text/plain (or */*); else the Prometheus text (an empty header too).
ExpositionFormat exposition_format_for(std::string_view accept);

std::string prometheus_exposition(const MetricsSnapshot& metrics,
                                  ExpositionFormat format = ExpositionFormat::kPrometheusText);
inline std::string openmetrics_exposition(const MetricsSnapshot& metrics) {
  return prometheus_exposition(metrics, ExpositionFormat::kOpenMetrics);
}
inline std::string prometheus_exposition(const trace::Trace& trace) {
  return prometheus_exposition(metrics_of(trace));
}

// A metric family of labelled samples, for metrics that are not a trace's.
using Labels = std::vector<std::pair<std::string, std::string>>;
struct MetricSample {
  Labels labels;
  double value = 0;
};
struct MetricFamily {
  std::string name;            // made Prometheus-safe when written
  std::string type = "gauge";  // gauge, counter or untyped
  std::string help;
  std::vector<MetricSample> samples;
};

// The exposition of `families`, in order (label names made Prometheus-safe too).
std::string prometheus_exposition(std::span<const MetricFamily> families);

// A metric name made of [a-zA-Z0-9_:] ("gpu0.power_watts" -> "gpu0_power_watts").
std::string prometheus_name(std::string_view text);

}  // namespace opsight::exporting
