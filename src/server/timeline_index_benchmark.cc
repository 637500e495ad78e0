// The timeline index on a large synthetic track: building it, and a zoomed-out and a
// zoomed-in tile (what the UI asks for on open and while zooming).
#include <benchmark/benchmark.h>

#include "server/timeline_index.hpp"

namespace opsight::server {
namespace {

// `count` slices of 1-3 µs in rows of parent/child pairs, 500 ns apart.
trace::Trace parent_child_trace(size_t count) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  trace::StringId parent = trace.intern("step"), child = trace.intern("op");
  trace.slices.reserve(count);
  int64_t at = 0;
  for (size_t i = 0; i + 1 < count; i += 2) {
    int64_t dur = 1000 + static_cast<int64_t>(i % 2000);
    trace.slices.add(at, dur, parent, 0, track);
    trace.slices.add(at + 100, dur / 2, child, 0, track);
    at += dur + 500;
  }
  trace.finalize();
  return trace;
}

void BM_BuildIndex(benchmark::State& state) {
  trace::Trace trace = parent_child_trace(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    TimelineIndex index(trace);
    benchmark::DoNotOptimize(index.memory_bytes());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildIndex)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

void BM_TileWholeTrace(benchmark::State& state) {
  trace::Trace trace = parent_child_trace(1 << 20);
  TimelineIndex index(trace);
  auto [first, last] = trace.time_bounds();
  for (auto _ : state) {
    Tile tile = index.tile({0, first, last, (last - first) / 2000 + 1});
    benchmark::DoNotOptimize(tile.blocks.data());
  }
}
BENCHMARK(BM_TileWholeTrace)->Unit(benchmark::kMicrosecond);

void BM_TileZoomedIn(benchmark::State& state) {
  trace::Trace trace = parent_child_trace(1 << 20);
  TimelineIndex index(trace);
  auto [first, last] = trace.time_bounds();
  int64_t middle = (first + last) / 2;
  for (auto _ : state) {
    Tile tile = index.tile({0, middle, middle + 2'000'000, 1000});
    benchmark::DoNotOptimize(tile.blocks.data());
  }
}
BENCHMARK(BM_TileZoomedIn)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace opsight::server
