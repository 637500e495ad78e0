// Throughput of the analyses on a large synthetic trace, against plain loops over the same
// columns measured in the same run (DESIGN.md: report ratios, not absolute times).
//
// The trace: 10M slices on 4 threads, 1M call trees of 10 slices each (a root, 3 children,
// 2 grandchildren per child), 100 distinct names (10 root, 30 child, 60 grandchild names),
// pseudo-random durations. Built once and shared by every benchmark.
//
// Run: build/<dir>/src/analyze/opsight_analyze_benchmarks --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "analyze/aggregate_tree.hpp"
#include "analyze/breakdown.hpp"
#include "analyze/call_tree.hpp"
#include "analyze/critical_path.hpp"
#include "analyze/statistics.hpp"

namespace opsight::analyze {
namespace {

constexpr size_t kTreeCount = 1'000'000;
constexpr size_t kThreadCount = 4;

trace::Trace build_synthetic_trace() {
  trace::Trace trace;
  std::vector<trace::StringId> root_names, child_names, grandchild_names;
  for (int i = 0; i < 10; ++i) root_names.push_back(trace.intern("request_" + std::to_string(i)));
  for (int i = 0; i < 30; ++i) child_names.push_back(trace.intern("layer_" + std::to_string(i)));
  for (int i = 0; i < 60; ++i)
    grandchild_names.push_back(trace.intern("kernel_" + std::to_string(i)));
  trace::StringId category = trace.intern("synthetic");
  std::vector<trace::TrackId> tracks;
  for (size_t thread = 0; thread < kThreadCount; ++thread)
    tracks.push_back(trace.thread_track(1, static_cast<int64_t>(thread + 1)));
  std::vector<int64_t> next_start(kThreadCount, 0);
  trace.slices.ts.reserve(kTreeCount * 10);
  trace.slices.dur.reserve(kTreeCount * 10);
  trace.slices.name.reserve(kTreeCount * 10);
  trace.slices.category.reserve(kTreeCount * 10);
  trace.slices.track.reserve(kTreeCount * 10);
  trace.slices.depth.reserve(kTreeCount * 10);
  trace.slices.flags.reserve(kTreeCount * 10);
  trace.slices.parent.reserve(kTreeCount * 10);
  trace.slices.span_id.reserve(kTreeCount * 10);

  uint64_t random_state = 12345;
  auto random_below = [&random_state](uint64_t bound) {
    random_state = trace::mix64(random_state);
    return static_cast<int64_t>(random_state % bound);
  };
  for (size_t tree = 0; tree < kTreeCount; ++tree) {
    size_t thread = tree % kThreadCount;
    trace::TrackId track = tracks[thread];
    // Durations bottom-up, then slices top-down in start order.
    int64_t grandchild_durations[3][2];
    int64_t child_durations[3];
    int64_t gap = 10;
    int64_t root_duration = gap;
    for (int child = 0; child < 3; ++child) {
      child_durations[child] = gap;
      for (int grandchild = 0; grandchild < 2; ++grandchild) {
        grandchild_durations[child][grandchild] = 100 + random_below(10000);
        child_durations[child] += grandchild_durations[child][grandchild] + gap;
      }
      root_duration += child_durations[child] + gap;
    }
    int64_t start = next_start[thread];
    auto root_name = root_names[static_cast<size_t>(random_below(root_names.size()))];
    trace.slices.add(start, root_duration, root_name, category, track);
    int64_t child_start = start + gap;
    for (int child = 0; child < 3; ++child) {
      auto child_name = child_names[static_cast<size_t>(random_below(child_names.size()))];
      trace.slices.add(child_start, child_durations[child], child_name, category, track);
      int64_t grandchild_start = child_start + gap;
      for (int grandchild = 0; grandchild < 2; ++grandchild) {
        auto grandchild_name =
            grandchild_names[static_cast<size_t>(random_below(grandchild_names.size()))];
        trace.slices.add(grandchild_start, grandchild_durations[child][grandchild], grandchild_name,
                         category, track);
        grandchild_start += grandchild_durations[child][grandchild] + gap;
      }
      child_start += child_durations[child] + gap;
    }
    next_start[thread] = start + root_duration + 100;
  }
  trace.finalize();
  return trace;
}

const trace::Trace& synthetic_trace() {
  static const trace::Trace trace = build_synthetic_trace();
  return trace;
}

void set_slices_processed(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations() *
                          static_cast<int64_t>(synthetic_trace().slices.size()));
}

// Baseline: the cheapest useful pass over the data, summing the duration column.
void BM_BaselineSumDurations(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    int64_t sum = std::accumulate(trace.slices.dur.begin(), trace.slices.dur.end(), int64_t{0});
    benchmark::DoNotOptimize(sum);
  }
  set_slices_processed(state);
}
BENCHMARK(BM_BaselineSumDurations)->Unit(benchmark::kMillisecond);

// Baseline: copying the duration column and sorting it once (what a naive exact-percentile
// implementation does, ignoring the grouping by name).
void BM_BaselineSortDurations(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    std::vector<int64_t> durations(trace.slices.dur.begin(), trace.slices.dur.end());
    std::sort(durations.begin(), durations.end());
    benchmark::DoNotOptimize(durations.data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_BaselineSortDurations)->Unit(benchmark::kMillisecond);

void BM_NameStatistics(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    TraceStatistics statistics = compute_name_statistics(trace);
    benchmark::DoNotOptimize(statistics.names.data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_NameStatistics)->Unit(benchmark::kMillisecond);

void BM_SelfTimes(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    std::vector<int64_t> self_times = compute_self_times(trace);
    benchmark::DoNotOptimize(self_times.data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_SelfTimes)->Unit(benchmark::kMillisecond);

void BM_CallForestBuild(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    CallForest forest = CallForest::build(trace);
    benchmark::DoNotOptimize(forest.roots().data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_CallForestBuild)->Unit(benchmark::kMillisecond);

// Building the forest and flattening every root into nodes (what the tree report walks).
void BM_CallForestBuildAndFlattenAll(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    CallForest forest = CallForest::build(trace);
    size_t node_count = 0;
    for (trace::RowIndex root : forest.roots()) node_count += forest.flatten(trace, root).size();
    benchmark::DoNotOptimize(node_count);
  }
  set_slices_processed(state);
}
BENCHMARK(BM_CallForestBuildAndFlattenAll)->Unit(benchmark::kMillisecond);

// The aggregated call tree: every slice hashed to its path node, durations grouped by node,
// percentiles per node.
void BM_AggregateTree(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    AggregateTree tree = AggregateTree::build(trace);
    benchmark::DoNotOptimize(tree.nodes().data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_AggregateTree)->Unit(benchmark::kMillisecond);

// The same, keeping every node's sorted durations (what opsight compare needs).
void BM_AggregateTreeKeepDurations(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    AggregateTree tree = AggregateTree::build(trace, true);
    benchmark::DoNotOptimize(tree.nodes().data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_AggregateTreeKeepDurations)->Unit(benchmark::kMillisecond);

// Per-inference breakdown of one of the ten root names (a tenth of the trees).
void BM_Breakdown(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    Breakdown breakdown = compute_breakdown(trace, "request_3");
    benchmark::DoNotOptimize(breakdown.phases.data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_Breakdown)->Unit(benchmark::kMillisecond);

void BM_CriticalPath(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  for (auto _ : state) {
    CriticalPath path = compute_critical_path(trace);
    benchmark::DoNotOptimize(path.steps.data());
  }
  set_slices_processed(state);
}
BENCHMARK(BM_CriticalPath)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace opsight::analyze
