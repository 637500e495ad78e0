#include "analyze/aggregate_tree.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace opsight::analyze {
namespace {

// Two threads each run "request" twice; each request calls "load" then "infer" (which
// calls "layer" twice); the second thread's second request skips "load".
trace::Trace requests_trace() {
  trace::Trace trace;
  const trace::StringId request = trace.intern("request"), load = trace.intern("load"),
                        infer = trace.intern("infer"), layer = trace.intern("layer");
  const trace::StringId category = trace.intern("python");
  for (int64_t thread = 1; thread <= 2; ++thread) {
    trace::TrackId track = trace.thread_track(1, thread);
    for (int64_t call = 0; call < 2; ++call) {
      const int64_t base = thread * 100000 + call * 10000;
      const int64_t scale = thread * 10 + call;  // distinct durations per request
      trace.slices.add(base, 1000 + scale, request, category, track);
      const bool skip_load = thread == 2 && call == 1;
      if (!skip_load) trace.slices.add(base + 10, 100 + scale, load, category, track);
      trace.slices.add(base + 200, 700 + scale, infer, category, track);
      trace.slices.add(base + 210, 300, layer, category, track);
      trace.slices.add(base + 520, 300 + scale, layer, category, track);
    }
  }
  trace.finalize();
  return trace;
}

TEST(AggregateTree, MergesPathsAcrossThreadsAndInvocations) {
  trace::Trace trace = requests_trace();
  AggregateTree tree = AggregateTree::build(trace, /*keep_durations=*/true);
  ASSERT_EQ(tree.nodes().size(), 4u);
  ASSERT_EQ(tree.roots().size(), 1u);
  const AggregateNode& request = tree.nodes()[0];
  EXPECT_EQ(trace.str(request.name), "request");
  EXPECT_EQ(request.duration.count, 4u);
  EXPECT_EQ(request.duration.total_ns, 4000 + 10 + 11 + 20 + 21);
  EXPECT_EQ(request.duration.min_ns, 1010);
  EXPECT_EQ(request.duration.max_ns, 1021);
  EXPECT_DOUBLE_EQ(request.duration.p50_ns, (1011.0 + 1020.0) / 2.0);
  // Pre-order, children by first start: load, infer > layer.
  EXPECT_EQ(tree.path(trace, 1), "request / load");
  EXPECT_EQ(tree.path(trace, 2), "request / infer");
  EXPECT_EQ(tree.path(trace, 3), "request / infer / layer");
  EXPECT_EQ(tree.nodes()[1].duration.count, 3u);
  EXPECT_DOUBLE_EQ(tree.nodes()[1].calls_per_parent_call, 0.75);
  EXPECT_EQ(tree.nodes()[3].duration.count, 8u);
  EXPECT_DOUBLE_EQ(tree.nodes()[3].calls_per_parent_call, 2.0);
  EXPECT_EQ(tree.nodes()[3].depth, 2u);
  EXPECT_EQ(tree.nodes()[3].parent, 2u);
  // Self time of infer: its duration minus both layers, summed over its four calls.
  int64_t infer_total = tree.nodes()[2].duration.total_ns;
  EXPECT_EQ(tree.nodes()[2].self_ns, infer_total - tree.nodes()[3].duration.total_ns);
  EXPECT_DOUBLE_EQ(
      tree.nodes()[2].share_of_parent,
      static_cast<double>(infer_total) / static_cast<double>(request.duration.total_ns));
  std::span<const int64_t> layer_durations = tree.durations(3);
  ASSERT_EQ(layer_durations.size(), 8u);
  EXPECT_TRUE(std::is_sorted(layer_durations.begin(), layer_durations.end()));
  EXPECT_EQ(layer_durations.front(), 300);
}

TEST(AggregateTree, SameNameUnderDifferentParentsStaysApart) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId a = trace.intern("a"), b = trace.intern("b"), x = trace.intern("x");
  trace.slices.add(0, 100, a, 0, track);
  trace.slices.add(10, 10, x, 0, track);
  trace.slices.add(200, 100, b, 0, track);
  trace.slices.add(210, 20, x, 0, track);
  trace.slices.add(400, 5, x, 0, track);  // x as a root too
  trace.finalize();
  AggregateTree tree = AggregateTree::build(trace);
  ASSERT_EQ(tree.nodes().size(), 5u);
  std::vector<std::string> paths;
  for (uint32_t node = 0; node < tree.nodes().size(); ++node)
    paths.push_back(tree.path(trace, node));
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "a / x", "b", "b / x", "x"}));
  EXPECT_TRUE(tree.durations(0).empty());  // not kept
}

TEST(AggregateTree, EmptyTrace) {
  trace::Trace trace;
  trace.finalize();
  AggregateTree tree = AggregateTree::build(trace, true);
  EXPECT_TRUE(tree.nodes().empty());
  EXPECT_TRUE(tree.roots().empty());
}

TEST(AggregateTree, DeepChainDoesNotOverflowTheStack) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId name = trace.intern("recurse");
  constexpr int64_t kDepth = 60000;
  for (int64_t level = 0; level < kDepth; ++level)
    trace.slices.add(level, 2 * (kDepth - level), name, 0, track);
  trace.finalize();
  AggregateTree tree = AggregateTree::build(trace, true);
  EXPECT_EQ(tree.nodes().size(), static_cast<size_t>(kDepth));
  EXPECT_EQ(tree.nodes().back().depth, static_cast<uint32_t>(kDepth - 1));
}

}  // namespace
}  // namespace opsight::analyze
