// A run's metrics as one OTLP ExportMetricsServiceRequest (protobuf), for `otlp-metrics`
// targets: the same MetricsSnapshot the Prometheus text renders, named so that a backend
// that translates OTLP names the Prometheus way (dots to underscores, the unit "s" as
// `_seconds`, monotonic sums as `_total`) arrives at the Prometheus text's names:
//   opsight.span.duration   histogram (s) per span name (attribute `span`), the Prometheus
//                           text's buckets as explicit bounds, exemplars where known
//   opsight.tracer.overhead monotonic sum (s): the recorder's own time (when known)
//   opsight.traced          monotonic sum (s): the wall time recorded (when known)
//   opsight.events.dropped  monotonic sum: events lost to the memory bound
//   opsight.<counter>       gauge per counter track name, attribute `pid`, its last sample
//                           (a name ending `_ns` loses it, in seconds with unit "s")
//   gen_ai.*                OpenTelemetry's GenAI histograms (from the gen_ai.request spans
//                           opsight.llm writes: gen_ai.client.token.usage,
//                           gen_ai.server.time_to_first_token,
//                           gen_ai.server.time_per_output_token, ...; prometheus_text.hpp's
//                           gen_ai_metrics()), named, bucketed and attributed as the
//                           semantic conventions say, exemplars where known
//   opsight.<quantity>      monotonic sum per rate track ("process.io_read_bytes_per_s" ->
//                           opsight.process.io_read_bytes in "By"; _ns -> seconds in "s"),
//                           attribute `pid`: the rates integrated over the times between
//                           their samples (MetricsSnapshot::rate_totals, the Prometheus
//                           text's opsight_<quantity>_total), not a gauge of the rate
// Histograms and sums carry the temporality asked for (OTLP's AggregationTemporality):
// for a finished run exported once, cumulative and delta hold the same numbers over the
// same interval (the run's start to its end), which is what both mean for one report.
// The resource is the first process's (service.name first, OTEL_RESOURCE_ATTRIBUTES).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "export/prometheus/prometheus_text.hpp"
#include "export/span_view.hpp"

namespace opsight::exporting {

enum class MetricsTemporality { kCumulative, kDelta };

struct MetricsInterval {
  uint64_t start_unix_ns = 0;  // the aggregation's start (the run's start)
  uint64_t end_unix_ns = 0;    // when the values were taken (the run's end)
};

// `data_points`, when given, receives the number of data points written (what an OTLP
// partial success's rejected_data_points counts).
std::string encode_otlp_metrics(const MetricsSnapshot& metrics, std::span<const Attribute> resource,
                                const MetricsInterval& interval, MetricsTemporality temporality,
                                uint64_t* data_points = nullptr);

// What `now` gained since `before`, an earlier snapshot of the same run (a delta
// export's content): each histogram's buckets, count and sum less the earlier ones (a
// span name that gained nothing is left out), each rate total and the drops less the
// earlier ones; the counters' last samples and the tracer's own totals as they are.
MetricsSnapshot metrics_since(const MetricsSnapshot& now, const MetricsSnapshot& before);

// The run's interval: from its recorded start to its last slice's end, in wall time (the
// export's own clock when the trace knows no wall time).
MetricsInterval metrics_interval_of(const trace::Trace& trace);

}  // namespace opsight::exporting
