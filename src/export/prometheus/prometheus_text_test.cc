// The Prometheus exposition of sampled rates: a counter track named "..._per_s" is exposed
// as the counter of its quantity (opsight_<quantity>_total), the rates integrated over the
// times between their samples, so that PromQL's rate() gives the rate back and promtool
// does not lint an abbreviated unit; the other counter tracks stay gauges.
#include "export/prometheus/prometheus_text.hpp"

#include <gtest/gtest.h>

#include <string>

#include "trace/trace.hpp"

namespace opsight::exporting {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(PrometheusRates, ARateIsExposedAsTheTotalOfItsQuantity) {
  MetricsSnapshot metrics;
  // 1000 B/s measured over the second before 1 s (the amount before the first sample is not
  // known), then 2000 B/s over 0.5 s and 4000 B/s over 0.5 s: 1000 + 2000 bytes since.
  metrics.set_counter("process.io_read_bytes_per_s", 42, 1000, 1 * kSecond);
  metrics.set_counter("process.io_read_bytes_per_s", 42, 2000, kSecond + kSecond / 2);
  metrics.set_counter("process.io_read_bytes_per_s", 42, 4000, 2 * kSecond);
  metrics.set_counter("process.rss_bytes", 42, 5e6, 2 * kSecond);
  std::string text = prometheus_exposition(metrics);
  EXPECT_NE(text.find("# TYPE opsight_process_io_read_bytes_total counter\n"
                      "opsight_process_io_read_bytes_total{pid=\"42\"} 3000\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("per_s"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE opsight_process_rss_bytes gauge\n"
                      "opsight_process_rss_bytes{pid=\"42\"} 5000000\n"),
            std::string::npos)
      << text;
}

TEST(PrometheusRates, OpenMetricsNamesTheCounterFamilyWithoutItsTotalSuffix) {
  MetricsSnapshot metrics;
  metrics.set_counter("process.net_sent_bytes_per_s", 7, 10, 0);
  metrics.set_counter("process.net_sent_bytes_per_s", 7, 10, 3 * kSecond);
  std::string text = openmetrics_exposition(metrics);
  EXPECT_NE(text.find("# TYPE opsight_process_net_sent_bytes counter\n"
                      "opsight_process_net_sent_bytes_total{pid=\"7\"} 30\n"),
            std::string::npos)
      << text;
}

TEST(PrometheusRates, ASampleNotLaterThanTheLastAddsNothingAndProcessesAreApart) {
  MetricsSnapshot metrics;
  metrics.set_counter("gpu0.busy_ns_per_s", 1, 5e8, kSecond);
  metrics.set_counter("gpu0.busy_ns_per_s", 1, 5e8, 2 * kSecond);  // 0.5 s busy
  metrics.set_counter("gpu0.busy_ns_per_s", 1, 9e9, 2 * kSecond);  // same time: nothing
  metrics.set_counter("gpu0.busy_ns_per_s", 1, 9e9, kSecond);      // earlier: nothing
  metrics.set_counter("gpu0.busy_ns_per_s", 2, 1e8, kSecond);
  std::string text = prometheus_exposition(metrics);
  // _ns quantities become seconds, as the gauges do.
  EXPECT_NE(text.find("opsight_gpu0_busy_seconds_total{pid=\"1\"} 0.5\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("opsight_gpu0_busy_seconds_total{pid=\"2\"} 0\n"), std::string::npos) << text;
}

TEST(PrometheusRates, AFinishedTracesRateTrackIsIntegratedInTimeOrder) {
  trace::Trace trace;
  auto track = trace.counter_track(42, "process.io_write_bytes_per_s");
  trace.counters.add(1 * kSecond, track, 100);
  trace.counters.add(2 * kSecond, track, 300);
  trace.counters.add(4 * kSecond, track, 50);
  trace.finalize();
  std::string text = prometheus_exposition(trace);
  EXPECT_NE(text.find("opsight_process_io_write_bytes_total{pid=\"42\"} 400\n"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace opsight::exporting
