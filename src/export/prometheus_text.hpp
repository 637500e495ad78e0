// A trace's metrics in Prometheus's text exposition format (version 0.0.4), for a
// Pushgateway push and for the /metrics endpoint:
//   opsight_span_duration_seconds{span="..."}   histogram per span name (buckets from 10 µs
//                                               to 10 s, sum, count)
//   opsight_tracer_overhead_seconds_total       the recorder's own time
//   opsight_traced_seconds_total                wall time recorded
//   opsight_events_dropped_total                events lost to the memory bound
//   opsight_export_spans_dropped_total          spans an exporter gave up on (when known)
//   opsight_<counter>{pid="..."}                the last sample of each counter track
//                                               ("process.rss_bytes" ->
//                                               opsight_process_rss_bytes; _ns counters are
//                                               converted to _seconds)
// Every family has HELP and TYPE lines; names and label values are escaped as the format
// requires, so `promtool check metrics` accepts the output.
//
// Thread-safety: keeps no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trace/trace.hpp"

namespace opsight::exporting {

struct PrometheusOptions {
  uint64_t export_spans_dropped = 0;
  bool with_export_drops = false;  // write opsight_export_spans_dropped_total
};

std::string prometheus_exposition(const trace::Trace& trace, const PrometheusOptions& options = {});

// The upper bounds of opsight_span_duration_seconds's buckets, in seconds (+Inf apart).
inline constexpr double kDurationBuckets[] = {1e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                              5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,  0.25,
                                              0.5,  1.0,  2.5,    5.0,  10.0};

// A metric name made of [a-zA-Z0-9_:] ("gpu0.power_watts" -> "gpu0_power_watts").
std::string prometheus_name(std::string_view text);

}  // namespace opsight::exporting
