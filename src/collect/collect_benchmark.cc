// What each metric group adds to a span, against a plain span measured in the same run:
//   BM_PlainSpan        OPSIGHT_SPAN, the baseline
//   BM_SpanWith/<group> OPSIGHT_SPAN_METRICS with one group (cpu, memory, disk, network, gpu)
//   BM_SpanWithAll      every group at once
//   BM_Sample           one sample of the background sampler (process counters, no GPU)
// Each reports "added_ns" (its time per span minus the baseline's) and "ratio" (its time
// over the baseline's). Recording is streamed to a sink that counts the bytes and drops
// them; docs/metrics.md publishes the figures with the command that reproduces them.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>

#include "collect/sampler.hpp"
#include "opsight/metrics.hpp"
#include "opsight/opsight.hpp"
#include "record/recorder.hpp"

namespace {

// Throws the recording away: the benchmark measures reading metrics, not the disk.
class NullSink : public opsight::record::ByteSink {
 public:
  bool write(std::string_view) override { return true; }
  std::string error() const override { return {}; }
};

// One session for the whole run, with a large buffer (nothing dropped).
void session() {
  static const bool started = [] {
    opsight::record::RecordingOptions options;
    options.buffer_bytes = size_t{256} << 20;
    options.flush_interval_ms = 5;
    return !opsight::record::start_recording(
        [](std::string*) { return std::make_unique<NullSink>(); }, options);
  }();
  static_cast<void>(started);
}

double g_plain_span_ns = 0;

double per_iteration_ns(const benchmark::State& state, std::chrono::steady_clock::duration spent) {
  return std::chrono::duration<double, std::nano>(spent).count() /
         static_cast<double>(state.iterations());
}

void report_against_baseline(benchmark::State& state, double per_span_ns) {
  if (g_plain_span_ns <= 0) return;
  state.counters["added_ns"] = per_span_ns - g_plain_span_ns;
  state.counters["ratio"] = per_span_ns / g_plain_span_ns;
}

void BM_PlainSpan(benchmark::State& state) {
  session();
  auto began = std::chrono::steady_clock::now();
  for (auto _ : state) {
    OPSIGHT_SPAN("plain");
  }
  g_plain_span_ns = per_iteration_ns(state, std::chrono::steady_clock::now() - began);
}
BENCHMARK(BM_PlainSpan);

void BM_SpanWith(benchmark::State& state) {
  session();
  auto group = static_cast<uint32_t>(state.range(0));
  state.SetLabel(std::string(opsight::metric_group_name(group)));
  auto began = std::chrono::steady_clock::now();
  for (auto _ : state) {
    opsight::MetricSpan span("measured", group);
  }
  report_against_baseline(state, per_iteration_ns(state, std::chrono::steady_clock::now() - began));
}
BENCHMARK(BM_SpanWith)
    ->Arg(opsight::kMetricCpu)
    ->Arg(opsight::kMetricMemory)
    ->Arg(opsight::kMetricDisk)
    ->Arg(opsight::kMetricNetwork)
    ->Arg(opsight::kMetricGpu);

void BM_SpanWithAll(benchmark::State& state) {
  session();
  auto began = std::chrono::steady_clock::now();
  for (auto _ : state) {
    opsight::MetricSpan span("measured", opsight::kAllNativeMetrics);
  }
  report_against_baseline(state, per_iteration_ns(state, std::chrono::steady_clock::now() - began));
}
BENCHMARK(BM_SpanWithAll);

void BM_Sample(benchmark::State& state) {
  session();
  opsight::collect::ProcessSample previous = opsight::collect::take_process_sample();
  for (auto _ : state) {
    opsight::collect::ProcessSample sample = opsight::collect::take_process_sample();
    opsight::collect::record_process_sample(sample, &previous);
    previous = sample;
  }
}
BENCHMARK(BM_Sample);

}  // namespace
