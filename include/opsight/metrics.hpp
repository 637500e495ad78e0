// Metrics beyond latency: what a span measures besides its duration.
//
//   #include <opsight/metrics.hpp>
//
//   void load_shard(const std::string& path) {
//     OPSIGHT_SPAN_METRICS("load_shard", opsight::kMetricDisk | opsight::kMetricMemory);
//     ...  // the span gets metric.io_read_bytes, metric.rss_delta_bytes, ... as arguments
//   }
//
//   opsight::MetricSpan span("infer", opsight::kMetricCpu);  // a run-time name
//
// Each metric group reads kernel counters at the span's start and end (docs/metrics.md
// says what each reads, how exact it is and what it costs: microseconds, not
// nanoseconds). The time spent reading is added to the tracer overhead the reports show,
// per metric group. A background sampler (SessionOptions::sample_interval_ms) records
// process and GPU counters over time.
//
// Thread-safety: every function here may be called from any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "opsight/opsight.hpp"

namespace opsight {

// Metric groups, combined with |.
enum MetricGroup : uint32_t {
  kMetricCpu = 1u << 0,      // CPU time of the span's thread
  kMetricMemory = 1u << 1,   // process RSS at start and end, its change and peak
  kMetricDisk = 1u << 2,     // the thread's read/write bytes and storage I/O
  kMetricNetwork = 1u << 3,  // bytes the thread sent and received through sockets
  kMetricGpu = 1u << 4,      // GPU memory, utilization and power (NVML)
  kAllNativeMetrics = (1u << 5) - 1,
};

// "cpu" -> kMetricCpu, ..., "gpu" -> kMetricGpu; 0 for any other name ("latency" is
// every span's duration and has no bit; "heap" is measured by the Python package).
OPSIGHT_API uint32_t metric_group_from_name(std::string_view name);
// The name of one group bit ("cpu"), or "" for anything else.
OPSIGHT_API std::string_view metric_group_name(uint32_t group);

// The readings taken at a span's start, kept by whoever opened the span until its end.
struct MetricStart {
  uint32_t groups = 0;  // what was read (0: nothing, finish_metrics does nothing)
  uint32_t peak_slot = 0;
  int64_t cpu_ns = 0;
  int64_t rss_bytes = 0;
  int64_t rss_high_water_bytes = 0;
  uint64_t io_read_bytes = 0, io_write_bytes = 0;
  uint64_t storage_read_bytes = 0, storage_write_bytes = 0;
  uint64_t net_sent_bytes = 0, net_received_bytes = 0;
  int64_t gpu_memory_used_bytes = -1;  // -1: no GPU
};

// Reads the metric groups `groups` at the start of a span. Call it right after a begin
// that recorded; returns an empty start (groups 0) when nothing records.
OPSIGHT_API MetricStart start_metrics(uint32_t groups);
// Reads them again and adds the differences as "metric.*" arguments to the innermost
// open span of the thread. Call it right before that span's end().
OPSIGHT_API void finish_metrics(const MetricStart& start);

// Counts bytes the calling thread sent or received through a socket. The Python package
// calls it for every socket of the Python socket module while network metrics are on;
// a C++ program can call it from its own I/O layer. Spans with kMetricNetwork report the
// calling thread's bytes between their start and end.
OPSIGHT_API void count_network_bytes(uint64_t sent, uint64_t received);

namespace internal {
// For front ends that measure a metric themselves (the Python package's heap metric):
// adds `ticks` of the recorder's clock (internal::now_ticks()) spent on `readings` reads
// of metric group `group` ("heap", "cpu", ...) to the per-metric cost the reports show and
// to the calling thread's tracer overhead.
OPSIGHT_API void account_metric_cost(std::string_view group, uint64_t readings, uint64_t ticks);
}  // namespace internal

// A scoped span that also measures `groups`; what OPSIGHT_SPAN_METRICS expands to, and
// usable with a run-time name.
class MetricSpan {
 public:
  MetricSpan(std::string_view name, uint32_t groups) noexcept : recorded_(begin(name)) {
    if (recorded_) start_ = start_metrics(groups);
  }
  MetricSpan(const CallSite& site, uint32_t groups) noexcept
      : recorded_(internal::begin_span(site)) {
    if (recorded_) start_ = start_metrics(groups);
  }
  ~MetricSpan() {
    if (!recorded_) return;
    finish_metrics(start_);
    internal::end_span();
  }
  MetricSpan(const MetricSpan&) = delete;
  MetricSpan& operator=(const MetricSpan&) = delete;

 private:
  bool recorded_;
  MetricStart start_;
};

}  // namespace opsight

#if OPSIGHT_ENABLE
// A span from here to the end of the enclosing scope that also measures `groups`
// (kMetricCpu | kMetricMemory ...). `name` must be a string literal.
#define OPSIGHT_SPAN_METRICS(name, groups)                                                    \
  static constinit ::opsight::CallSite OPSIGHT_INTERNAL_CONCAT(opsight_call_site_, __LINE__){ \
      name, "", __FILE__, static_cast<uint32_t>(__LINE__)};                                   \
  ::opsight::MetricSpan OPSIGHT_INTERNAL_CONCAT(opsight_span_, __LINE__) {                    \
    OPSIGHT_INTERNAL_CONCAT(opsight_call_site_, __LINE__), (groups)                           \
  }
#else
#define OPSIGHT_SPAN_METRICS(name, groups) static_cast<void>(0)
#endif
