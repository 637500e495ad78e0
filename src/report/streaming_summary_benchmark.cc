// The streaming summary against the whole-trace one, on the same native file, in the same
// run: BM_SummaryWholeTrace (the baseline: read_native of the file's bytes, then
// render_summary: what `opsight report --summary --stream off` does) and
// BM_SummaryStreaming (render_summary_streaming: `--stream on`). Items are spans; the
// counters give the streaming path's bytes per span (its duration columns at their peak,
// and the largest name's copy for its percentiles).
//
// BM_MergedTreeWholeTrace / BM_MergedTreeStreaming and BM_BreakdownWholeTrace /
// BM_BreakdownStreaming (`--breakdown forward`) do the same for the streaming views.
//
//   build/<dir>/src/report/opsight_report_benchmarks --benchmark_filter=Summary
//   build/<dir>/src/report/opsight_report_benchmarks --benchmark_filter='MergedTree|Breakdown'
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "io/io.hpp"
#include "report/report.hpp"
#include "report/streaming_summary.hpp"

namespace {

constexpr int kSpans = 1'000'000;

// A run of request > forward > two operators on four threads, as opsight_synthetic_run
// records it, written once to a temporary file.
const std::string& streaming_benchmark_file() {
  static const std::string path = [] {
    opsight::trace::Trace trace;
    const char* names[] = {"request", "forward", "aten::linear", "aten::relu"};
    for (int thread = 0; thread < 4; ++thread) {
      auto track = trace.thread_track(1, 100 + thread);
      int64_t ts = 1000;
      for (int i = 0; i < kSpans / 16; ++i) {
        int64_t jitter = (i * 7919 + thread * 31) % 997;
        trace.slices.add(ts, 4000 + jitter, trace.intern(names[0]), 0, track);
        trace.slices.add(ts + 100, 3000 + jitter, trace.intern(names[1]), 0, track);
        trace.slices.add(ts + 200, 1000 + jitter / 2, trace.intern(names[2]),
                         trace.intern("operator"), track);
        trace.slices.add(ts + 1300, 800 + jitter / 3, trace.intern(names[3]),
                         trace.intern("operator"), track);
        ts += 5000;
      }
    }
    trace.finalize();
    std::string file =
        (std::filesystem::temp_directory_path() /
         ("opsight-streaming-summary-benchmark-" + std::to_string(::getpid()) + ".opsight"))
            .string();
    std::string bytes = opsight::io::write_native(trace);
    std::FILE* out = std::fopen(file.c_str(), "wb");
    if (out != nullptr) {
      std::fwrite(bytes.data(), 1, bytes.size(), out);
      std::fclose(out);
    }
    std::atexit([] { std::filesystem::remove(streaming_benchmark_file()); });
    return file;
  }();
  return path;
}

// A view's whole-trace baseline: read the file, render the view.
void streaming_benchmark_whole(benchmark::State& state,
                               const opsight::report::ReportOptions& options,
                               std::string (*render)(const opsight::trace::Trace&,
                                                     const opsight::report::ReportOptions&)) {
  const std::string& path = streaming_benchmark_file();
  for (auto _ : state) {
    opsight::io::ReadResult result = opsight::io::read_trace_file(path);
    std::string text = render(result.trace, options);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(state.iterations() * kSpans);
}

// A view streamed, with its bytes per span.
void streaming_benchmark_streamed(benchmark::State& state,
                                  const opsight::report::ReportOptions& options,
                                  const std::string& view) {
  const std::string& path = streaming_benchmark_file();
  opsight::report::StreamedReport report;
  for (auto _ : state) {
    report = opsight::report::render_streaming(path, {view}, options);
    benchmark::DoNotOptimize(report.text.data());
  }
  state.SetItemsProcessed(state.iterations() * kSpans);
  state.counters["column_bytes_per_span"] =
      static_cast<double>(report.column_bytes) / static_cast<double>(kSpans);
  state.counters["copy_bytes_per_span"] =
      static_cast<double>(report.largest_name_copy_bytes) / static_cast<double>(kSpans);
}

void BM_SummaryWholeTrace(benchmark::State& state) {
  streaming_benchmark_whole(state, {}, &opsight::report::render_summary);
}
BENCHMARK(BM_SummaryWholeTrace)->Unit(benchmark::kMillisecond);

void BM_SummaryStreaming(benchmark::State& state) {
  streaming_benchmark_streamed(state, {}, "summary");
}
BENCHMARK(BM_SummaryStreaming)->Unit(benchmark::kMillisecond);

opsight::report::ReportOptions streaming_benchmark_breakdown_options() {
  opsight::report::ReportOptions options;
  options.breakdown_span = "forward";
  return options;
}

void BM_MergedTreeWholeTrace(benchmark::State& state) {
  streaming_benchmark_whole(state, {}, &opsight::report::render_merged_tree);
}
BENCHMARK(BM_MergedTreeWholeTrace)->Unit(benchmark::kMillisecond);

void BM_MergedTreeStreaming(benchmark::State& state) {
  streaming_benchmark_streamed(state, {}, "merged_tree");
}
BENCHMARK(BM_MergedTreeStreaming)->Unit(benchmark::kMillisecond);

void BM_BreakdownWholeTrace(benchmark::State& state) {
  streaming_benchmark_whole(state, streaming_benchmark_breakdown_options(),
                            &opsight::report::render_breakdown);
}
BENCHMARK(BM_BreakdownWholeTrace)->Unit(benchmark::kMillisecond);

void BM_BreakdownStreaming(benchmark::State& state) {
  streaming_benchmark_streamed(state, streaming_benchmark_breakdown_options(), "breakdown");
}
BENCHMARK(BM_BreakdownStreaming)->Unit(benchmark::kMillisecond);

}  // namespace
