// The names under which metrics travel through a trace, shared by their writers (the
// collect module, the Python package) and their readers (analyses, reports, DataFrames).
//
// Per-span metrics are numeric span arguments whose key starts with kMetricArgPrefix
// ("metric.cpu_ns"); anything a user records under that prefix is treated the same way.
// Counters sampled over time are counter tracks named "<source>.<quantity>"
// ("process.rss_bytes", "gpu0.power_watts"). In both, the unit is the name's suffix:
// _ns, _bytes, _percent, _watts, _celsius, _per_s (a rate of the unit before it), or none
// (a plain number).
//
// What each metric measures, and how exactly, is in docs/metrics.md.
#pragma once

#include <string_view>

namespace opsight::schema {

inline constexpr std::string_view kMetricArgPrefix = "metric.";

// Span metric arguments (the key without the prefix), by the group a user asks for.
// cpu: CPU time of the span's thread while the span ran.
inline constexpr std::string_view kMetricCpuNs = "cpu_ns";
// memory: process resident set at the start and end, the difference, and the largest
// resident set the process had while the span ran.
inline constexpr std::string_view kMetricRssStart = "rss_start_bytes";
inline constexpr std::string_view kMetricRssEnd = "rss_end_bytes";
inline constexpr std::string_view kMetricRssDelta = "rss_delta_bytes";
inline constexpr std::string_view kMetricRssPeak = "rss_peak_bytes";
// heap (Python, tracemalloc): bytes allocated and not freed, and the span's peak above
// its start.
inline constexpr std::string_view kMetricHeapDelta = "heap_delta_bytes";
inline constexpr std::string_view kMetricHeapPeak = "heap_peak_bytes";
// disk: bytes the span's thread passed to read/write-like system calls (whether served by
// the page cache or not), and bytes it caused to be fetched from or sent to storage.
inline constexpr std::string_view kMetricIoRead = "io_read_bytes";
inline constexpr std::string_view kMetricIoWrite = "io_write_bytes";
inline constexpr std::string_view kMetricStorageRead = "storage_read_bytes";
inline constexpr std::string_view kMetricStorageWrite = "storage_write_bytes";
// network: bytes the span's thread sent and received through sockets opsight counts.
inline constexpr std::string_view kMetricNetSent = "net_sent_bytes";
inline constexpr std::string_view kMetricNetReceived = "net_received_bytes";
// gpu: memory used on all GPUs at the end and its change; utilization and power of the
// busiest GPU at the end.
inline constexpr std::string_view kMetricGpuMemoryUsed = "gpu_memory_used_bytes";
inline constexpr std::string_view kMetricGpuMemoryDelta = "gpu_memory_delta_bytes";
inline constexpr std::string_view kMetricGpuUtilization = "gpu_utilization_percent";
inline constexpr std::string_view kMetricGpuPower = "gpu_power_watts";

// RunInfo::extra keys that carry the measured cost of metrics:
// "metric_cost.<group>" = "<readings> <total_ns>", e.g. "metric_cost.memory" =
// "2000 5120000" (2000 span ends or starts read, 5.12 ms in all). The cost of per-span
// metrics is also part of the tracer overhead of the thread that paid it; the sampler's
// is on its own thread ("metric_cost.sampler", readings = samples).
inline constexpr std::string_view kMetricCostPrefix = "metric_cost.";
inline constexpr std::string_view kMetricCostSampler = "sampler";

// RunInfo::extra keys that carry what an export did with the run's spans (written by
// `opsight run` and opsight.profile(export=...)): "export:<target>" = "<spans> <sent>
// <dropped>", e.g. "export:otlp http://127.0.0.1:4318/v1/traces" = "6000 5488 512".
inline constexpr std::string_view kExportPrefix = "export:";

// RunInfo::extra key: the sampler's interval in ns, when one ran.
inline constexpr std::string_view kSamplerIntervalKey = "sampler_interval_ns";
// RunInfo::extra key: why GPU metrics are absent ("no GPU: libnvidia-ml.so.1 not found").
inline constexpr std::string_view kGpuUnavailableKey = "gpu_unavailable";

// The unit of a metric or counter name, from its suffix: "ns", "bytes", "percent",
// "watts", "celsius", "bytes/s", ..., or "" for a plain number.
constexpr std::string_view metric_unit(std::string_view name) {
  constexpr std::string_view kRate = "_per_s";
  bool rate = name.size() > kRate.size() && name.substr(name.size() - kRate.size()) == kRate;
  if (rate) name = name.substr(0, name.size() - kRate.size());
  struct Suffix {
    std::string_view suffix, unit, rate_unit;
  };
  constexpr Suffix kSuffixes[] = {{"_ns", "ns", "ns/s"},
                                  {"_bytes", "bytes", "bytes/s"},
                                  {"_percent", "percent", "percent/s"},
                                  {"_watts", "watts", "watts/s"},
                                  {"_celsius", "celsius", "celsius/s"}};
  for (const Suffix& entry : kSuffixes) {
    if (name.size() > entry.suffix.size() &&
        name.substr(name.size() - entry.suffix.size()) == entry.suffix)
      return rate ? entry.rate_unit : entry.unit;
  }
  return rate ? "/s" : "";
}

}  // namespace opsight::schema
