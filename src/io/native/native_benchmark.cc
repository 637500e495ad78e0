// The native format on a 1M-slice trace (8 threads, nesting 4 deep, one arg on every
// eighth slice), against baselines from the same run: copying the bytes (memory
// bandwidth) and checksumming them (the reader's unavoidable pass); and writing a real file
// against writing the same bytes to it. A 1% time window read through the file's time
// index, and through an index rebuilt by a scan, against reading the whole file.
#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "format/chunk_codec.hpp"
#include "format/chunk_index.hpp"
#include "io/io.hpp"

namespace {

// With `flows`, every other root of a thread is linked from the same root of the previous
// thread: 109,375 flows in 1M slices, about the ratio (1M flows in 10M slices).
opsight::trace::Trace build_trace(bool flows) {
  {
    opsight::trace::Trace built;
    constexpr int kThreads = 8;
    constexpr int kSlices = 1'000'000;
    opsight::trace::StringId names[16];
    for (int i = 0; i < 16; ++i) names[i] = built.intern("function_" + std::to_string(i));
    auto key = built.intern("batch");
    for (int thread = 0; thread < kThreads; ++thread) {
      auto track = built.thread_track(1, 100 + thread);
      int64_t ts = 1'000'000;
      for (int i = 0; i < kSlices / kThreads / 4; ++i) {
        // A root with three nested children.
        auto root = built.slices.add(ts, 4000, names[i % 16], 0, track);
        built.slices.add(ts + 100, 3000, names[(i + 1) % 16], 0, track);
        built.slices.add(ts + 200, 2000, names[(i + 2) % 16], 0, track);
        built.slices.add(ts + 300, 1000, names[(i + 3) % 16], 0, track);
        if (i % 2 == 0) built.slice_args.add(root, key, opsight::trace::ArgValue::of_int(i));
        if (flows && thread > 0 && i % 2 == 0)
          built.flows.add(root - kSlices / kThreads, root, static_cast<uint64_t>(root) + 1);
        ts += 5000;
      }
    }
    built.finalize();
    return built;
  }
}

const opsight::trace::Trace& million_slice_trace() {
  static const opsight::trace::Trace trace = build_trace(false);
  return trace;
}

const opsight::trace::Trace& million_slice_trace_with_flows() {
  static const opsight::trace::Trace trace = build_trace(true);
  return trace;
}

const std::string& million_slice_bytes() {
  static const std::string bytes = opsight::io::write_native(million_slice_trace());
  return bytes;
}

void BM_NativeWrite(benchmark::State& state) {
  const auto& trace = million_slice_trace();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out = opsight::io::write_native(trace);
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.counters["slices"] = static_cast<double>(trace.slices.size());
}
BENCHMARK(BM_NativeWrite)->Unit(benchmark::kMillisecond);

// A scratch file of this process's: what the file benchmarks write and replace.
std::string scratch_path() {
  static const std::string path =
      "/tmp/opsight_native_benchmark_" + std::to_string(getpid()) + ".opsight";
  return path;
}

// What `opsight` pays to save a trace: write_trace_file (serialise, write a temporary file
// in the folder, rename it over the path), to a real file.
void BM_NativeWriteFile(benchmark::State& state) {
  const auto& trace = million_slice_trace();
  for (auto _ : state) {
    if (auto error = opsight::io::write_trace_file(trace, scratch_path())) {
      state.SkipWithError(error->c_str());
      break;
    }
  }
  std::remove(scratch_path().c_str());
  state.SetBytesProcessed(static_cast<int64_t>(million_slice_bytes().size() * state.iterations()));
}
BENCHMARK(BM_NativeWriteFile)->Unit(benchmark::kMillisecond);

// Its baseline: the same bytes, already serialised, written to the same file.
void BM_BaselineWriteFileBytes(benchmark::State& state) {
  const std::string& bytes = million_slice_bytes();
  for (auto _ : state) {
    if (auto error = opsight::io::write_file_bytes(scratch_path(), bytes)) {
      state.SkipWithError(error->c_str());
      break;
    }
  }
  std::remove(scratch_path().c_str());
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size() * state.iterations()));
}
BENCHMARK(BM_BaselineWriteFileBytes)->Unit(benchmark::kMillisecond);

// This thread's CPU time in seconds: the figures are one core's (the VM's neighbours
// stretch the wall time, not this).
double native_bench_thread_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The median of `rounds` timings of `run`, in seconds of this thread's CPU time.
template <typename Run>
double native_bench_median_seconds(int rounds, Run&& run) {
  std::vector<double> seconds;
  for (int i = 0; i < rounds; ++i) {
    double start = native_bench_thread_seconds();
    run();
    seconds.push_back(native_bench_thread_seconds() - start);
  }
  std::nth_element(seconds.begin(), seconds.begin() + rounds / 2, seconds.end());
  return seconds[rounds / 2];
}

// The read's baselines, measured in the same run (issue 28 item 4): what `cat FILE
// >/dev/null` does with a file in the page cache (a copy of its bytes into a buffer), and
// the writer producing the same bytes. Counters: `cat_GBps` and `write_GBps` (medians of 5
// and 3 rounds), and the read's time over each (`read_over_cat`, `write_over_read`: how
// many times faster than the writer the read is).
void report_native_read_baselines(benchmark::State& state, const std::string& bytes,
                                  const opsight::trace::Trace* written_from, double read_seconds) {
  std::string copy(bytes.size(), '\0');
  double cat = native_bench_median_seconds(5, [&] {
    std::memcpy(copy.data(), bytes.data(), bytes.size());
    benchmark::ClobberMemory();
  });
  const double gb = static_cast<double>(bytes.size()) / 1e9;
  state.counters["cat_GBps"] = gb / cat;
  state.counters["read_over_cat"] = read_seconds / cat;
  if (written_from != nullptr) {
    double write = native_bench_median_seconds(3, [&] {
      std::string out = opsight::io::write_native(*written_from);
      benchmark::DoNotOptimize(out.data());
    });
    state.counters["write_GBps"] = gb / write;
    state.counters["write_over_read"] = write / read_seconds;
  }
}

void BM_NativeRead(benchmark::State& state) {
  const std::string& bytes = million_slice_bytes();
  for (auto _ : state) {
    auto result = opsight::io::read_native(bytes);
    if (result.trace.slices.size() != 1'000'000) state.SkipWithError("wrong slice count");
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size() * state.iterations()));
  double read = native_bench_median_seconds(5, [&] {
    auto result = opsight::io::read_native(bytes);
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  });
  state.counters["read_GBps"] = static_cast<double>(bytes.size()) / 1e9 / read;
  report_native_read_baselines(state, bytes, &million_slice_trace(), read);
}
BENCHMARK(BM_NativeRead)->Unit(benchmark::kMillisecond);

// A file of the real recorder (or any .opsight file) named by OPSIGHT_NATIVE_BENCH_FILE:
// its bytes read into memory once (`cat`'s work, timed as the baseline), then decoded.
// The writer's baseline is the model writer on what was read (the recorder's own writer
// runs while the program does).
void BM_NativeReadFile(benchmark::State& state) {
  const char* path = std::getenv("OPSIGHT_NATIVE_BENCH_FILE");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set OPSIGHT_NATIVE_BENCH_FILE to an .opsight file to read");
    return;
  }
  std::string error;
  std::optional<std::string> file;
  // `cat FILE >/dev/null` itself: the file read from the page cache into memory.
  double cat_file = native_bench_median_seconds(3, [&] {
    file = opsight::io::read_file_bytes(path, &error);
    benchmark::DoNotOptimize(file);
  });
  if (!file) {
    state.SkipWithError(error.c_str());
    return;
  }
  const std::string& bytes = *file;
  state.counters["cat_file_GBps"] = static_cast<double>(bytes.size()) / 1e9 / cat_file;
  size_t slices = 0;
  for (auto _ : state) {
    auto result = opsight::io::read_native(bytes);
    slices = result.trace.slices.size();
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size() * state.iterations()));
  state.counters["slices"] = static_cast<double>(slices);
  double read = native_bench_median_seconds(5, [&] {
    auto result = opsight::io::read_native(bytes);
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  });
  state.counters["read_GBps"] = static_cast<double>(bytes.size()) / 1e9 / read;
  auto trace = opsight::io::read_native(bytes).trace;
  report_native_read_baselines(state, bytes, &trace, read);
}
// Registered only with the variable set: a run without it (scripts/run_benchmarks.sh)
// lists no errored benchmark.
const bool native_read_file_registered = [] {
  const char* path = std::getenv("OPSIGHT_NATIVE_BENCH_FILE");
  if (path == nullptr || *path == '\0') return false;
  benchmark::RegisterBenchmark("BM_NativeReadFile", BM_NativeReadFile)
      ->Unit(benchmark::kMillisecond);
  return true;
}();

// The same trace with flows (1 per 9 slices, across threads): against BM_NativeRead,
// the cost of reading flows (the bound: within 20% for 1M flows in 10M slices).
void BM_NativeReadWithFlows(benchmark::State& state) {
  static const std::string bytes = opsight::io::write_native(million_slice_trace_with_flows());
  size_t flows = 0;
  for (auto _ : state) {
    auto result = opsight::io::read_native(bytes);
    if (result.trace.slices.size() != 1'000'000) state.SkipWithError("wrong slice count");
    flows = result.trace.flows.size();
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  }
  if (flows != million_slice_trace_with_flows().flows.size()) state.SkipWithError("flows lost");
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size() * state.iterations()));
  state.counters["flows"] = static_cast<double>(flows);
}
BENCHMARK(BM_NativeReadWithFlows)->Unit(benchmark::kMillisecond);

// The fastest of five whole reads of `bytes`, in seconds: the baseline the window reads
// report their speed-up against, measured in the same run.
double whole_read_seconds(const std::string& bytes) {
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto result = opsight::io::read_native(bytes);
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// 1% of the trace's time (1.56 ms of 156 ms, in its middle) read through the index: the
// metadata chunks and the kEvents chunks around the window, each thread from the last
// chunk where it has no open span. `speedup` = whole read / window read.
void read_window(benchmark::State& state, const std::string& bytes) {
  const double whole = whole_read_seconds(bytes);
  const opsight::io::TimeWindow window{77'000'000, 78'560'000};
  size_t slices = 0;
  std::string chunks;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto result = opsight::io::read_native(bytes, window);
    slices = result.trace.slices.size();
    for (const auto& [key, value] : result.trace.run.extra)
      if (key == "window_chunks_read") chunks = value;
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  }
  double each = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                static_cast<double>(state.iterations());
  if (slices < 8'000 || slices > 12'000) state.SkipWithError("a 1% window holds about 10k slices");
  state.counters["slices"] = static_cast<double>(slices);
  state.counters["events_chunks_read"] = std::stod(chunks.empty() ? "0" : chunks);
  state.counters["whole_read_ms"] = whole * 1e3;
  state.counters["speedup"] = whole / each;
}

void BM_NativeReadWindowWithIndex(benchmark::State& state) {
  read_window(state, million_slice_bytes());
}
BENCHMARK(BM_NativeReadWindowWithIndex)->Unit(benchmark::kMillisecond);

// The same file without its index (a process killed mid-session, a file from before the
// index): the index is rebuilt by a scan of every chunk's slot headers first.
void BM_NativeReadWindowWithoutIndex(benchmark::State& state) {
  static const std::string bytes = [] {
    const std::string& full = million_slice_bytes();
    opsight::format::IndexTrailer trailer;
    std::memcpy(&trailer, full.data() + full.size() - sizeof(trailer), sizeof(trailer));
    return full.substr(0, trailer.index_offset);
  }();
  read_window(state, bytes);
}
BENCHMARK(BM_NativeReadWindowWithoutIndex)->Unit(benchmark::kMillisecond);

void BM_BaselineCopyBytes(benchmark::State& state) {
  const std::string& bytes = million_slice_bytes();
  std::string copy(bytes.size(), '\0');
  for (auto _ : state) {
    std::memcpy(copy.data(), bytes.data(), bytes.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size() * state.iterations()));
}
BENCHMARK(BM_BaselineCopyBytes)->Unit(benchmark::kMillisecond);

void BM_BaselineChecksumBytes(benchmark::State& state) {
  const std::string& bytes = million_slice_bytes();
  for (auto _ : state)
    benchmark::DoNotOptimize(opsight::format::checksum32(bytes.data(), bytes.size()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size() * state.iterations()));
}
BENCHMARK(BM_BaselineChecksumBytes)->Unit(benchmark::kMillisecond);

}  // namespace
