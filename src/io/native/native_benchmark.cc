// The native format on a 1M-slice trace (8 threads, nesting 4 deep, one arg on every
// eighth slice), against baselines from the same run: copying the bytes (memory
// bandwidth) and checksumming them (the reader's unavoidable pass); and writing a real file
// against writing the same bytes to it. A 1% time window read through the file's time
// index, and through an index rebuilt by a scan, against reading the whole file.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

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

void BM_NativeRead(benchmark::State& state) {
  const std::string& bytes = million_slice_bytes();
  for (auto _ : state) {
    auto result = opsight::io::read_native(bytes);
    if (result.trace.slices.size() != 1'000'000) state.SkipWithError("wrong slice count");
    benchmark::DoNotOptimize(result.trace.slices.ts.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size() * state.iterations()));
}
BENCHMARK(BM_NativeRead)->Unit(benchmark::kMillisecond);

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
