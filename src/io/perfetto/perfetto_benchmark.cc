// Speed of the Perfetto protobuf writer, against the other writers on the same trace in
// the same run: a 1M-slice trace (8 threads, nesting 4 deep, two args on every other root,
// one of them a string) with 100k counter samples.
//
//   BM_WritePerfetto           write_perfetto
//   BM_WriteChromeJsonSameTrace  write_chrome_json of the same trace (the baseline: what
//                              `opsight convert` wrote for Perfetto UI before)
//   BM_WriteNativeSameTrace    write_native of the same trace
//
// Each reports bytes/s of its own output and slices/s (items). The Perfetto/Chrome JSON
// ratio of slices/s is the figure docs/performance.md quotes.
//
// And the readers, each reading that trace as its writer wrote it:
//
//   BM_PerfettoRead             read_perfetto of the .pftrace
//   BM_ChromeJsonReadSameTrace  read_chrome_json of the .json (the baseline: the reader a
//                               trace for Perfetto UI went through before; its default
//                               threads, two where the machine has two cores)
//   BM_NativeReadSameTrace      read_native of the .opsight
//
// Each reports bytes/s of its own input and slices/s (items), per wall-clock second (the
// Chrome JSON reader's helper thread is not in the calling thread's CPU time).
// Run: build/release/src/io/opsight_io_benchmarks --benchmark_filter='SameTrace|Perfetto'
#include <benchmark/benchmark.h>

#include <string>
#include <string_view>

#include "io/io.hpp"
#include "trace/trace.hpp"

namespace {

const opsight::trace::Trace& benchmark_trace() {
  static const opsight::trace::Trace trace = [] {
    opsight::trace::Trace built;
    built.run.source_format = "opsight";
    built.process(1).name = built.intern("bench");
    constexpr int kThreads = 8;
    constexpr int kSlices = 1'000'000;
    opsight::trace::StringId names[16];
    for (int i = 0; i < 16; ++i) names[i] = built.intern("function_" + std::to_string(i));
    auto category = built.intern("python");
    auto batch = built.intern("batch");
    auto shape = built.intern("shape");
    auto shape_value = built.intern("[8, 1024]");
    for (int thread = 0; thread < kThreads; ++thread) {
      auto track = built.thread_track(1, 100 + thread);
      int64_t ts = 1'000'000;
      for (int i = 0; i < kSlices / kThreads / 4; ++i) {
        auto root = built.slices.add(ts, 4000, names[i % 16], category, track);
        built.slices.add(ts + 100, 3000, names[(i + 1) % 16], category, track);
        built.slices.add(ts + 200, 2000, names[(i + 2) % 16], category, track);
        built.slices.add(ts + 300, 1000, names[(i + 3) % 16], category, track);
        if (i % 2 == 0) {
          built.slice_args.add(root, batch, opsight::trace::ArgValue::of_int(i));
          built.slice_args.add(root, shape, opsight::trace::ArgValue::of_string(shape_value));
        }
        ts += 5000;
      }
    }
    auto rss = built.counter_track(1, "process.rss_bytes", "bytes");
    for (int i = 0; i < 100'000; ++i) built.counters.add(1'000'000 + i * 1000, rss, 1e6 + i);
    built.finalize();
    return built;
  }();
  return trace;
}

template <std::string (*Write)(const opsight::trace::Trace&)>
void write_benchmark(benchmark::State& state) {
  const auto& trace = benchmark_trace();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out = Write(trace);
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.SetItemsProcessed(static_cast<int64_t>(trace.slices.size() * state.iterations()));
  state.counters["output_mb"] = static_cast<double>(bytes) / 1e6;
}

void BM_WritePerfetto(benchmark::State& state) {
  write_benchmark<opsight::io::write_perfetto>(state);
}
BENCHMARK(BM_WritePerfetto)->Unit(benchmark::kMillisecond);

void BM_WriteChromeJsonSameTrace(benchmark::State& state) {
  write_benchmark<opsight::io::write_chrome_json>(state);
}
BENCHMARK(BM_WriteChromeJsonSameTrace)->Unit(benchmark::kMillisecond);

void BM_WriteNativeSameTrace(benchmark::State& state) {
  write_benchmark<opsight::io::write_native>(state);
}
BENCHMARK(BM_WriteNativeSameTrace)->Unit(benchmark::kMillisecond);

// `Write`'s output of the benchmark trace, made once, read by `Read` in each iteration.
template <std::string (*Write)(const opsight::trace::Trace&),
          opsight::io::ReadResult (*Read)(std::string_view)>
void read_benchmark(benchmark::State& state) {
  static const std::string input = Write(benchmark_trace());
  size_t slices = 0;
  for (auto _ : state) {
    opsight::io::ReadResult result = Read(input);
    if (!result.ok() || result.damage) {
      state.SkipWithError("the input did not read whole");
      return;
    }
    slices = result.trace.slices.size();
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(input.size() * state.iterations()));
  state.SetItemsProcessed(static_cast<int64_t>(slices * state.iterations()));
  state.counters["input_mb"] = static_cast<double>(input.size()) / 1e6;
}

opsight::io::ReadResult read_chrome_json_default(std::string_view bytes) {
  return opsight::io::read_chrome_json(bytes);
}

void BM_PerfettoRead(benchmark::State& state) {
  read_benchmark<opsight::io::write_perfetto, opsight::io::read_perfetto>(state);
}
BENCHMARK(BM_PerfettoRead)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ChromeJsonReadSameTrace(benchmark::State& state) {
  read_benchmark<opsight::io::write_chrome_json, read_chrome_json_default>(state);
}
BENCHMARK(BM_ChromeJsonReadSameTrace)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_NativeReadSameTrace(benchmark::State& state) {
  read_benchmark<opsight::io::write_native, opsight::io::read_native>(state);
}
BENCHMARK(BM_NativeReadSameTrace)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
