#include "analyze/critical_path.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace opsight::analyze {
namespace {

// Thread 1: load [0, 100) then (after waiting) infer [150, 400) > layer [160, 300).
// Thread 2: prefetch [20, 140) runs concurrently with load and ends before infer starts;
// Thread 3: logger [50, 390) is concurrent with everything and ends before infer does.
trace::Trace pipeline_trace() {
  trace::Trace trace;
  trace::TrackId main = trace.thread_track(1, 1);
  trace::TrackId helper = trace.thread_track(1, 2);
  trace::TrackId logging = trace.thread_track(1, 3);
  trace.slices.add(0, 100, trace.intern("load"), 0, main);
  trace.slices.add(150, 250, trace.intern("infer"), 0, main);
  trace.slices.add(160, 140, trace.intern("layer"), 0, main);
  trace.slices.add(20, 120, trace.intern("prefetch"), 0, helper);
  trace.slices.add(50, 340, trace.intern("logger"), 0, logging);
  trace.finalize();
  return trace;
}

TEST(CriticalPath, ChainsRootsBackFromTheEnd) {
  trace::Trace trace = pipeline_trace();
  CriticalPath path = compute_critical_path(trace);
  std::vector<std::string> roots;
  for (trace::RowIndex row : path.roots) roots.emplace_back(trace.str(trace.slices.name[row]));
  // infer ends last; before its start (150) the latest-ending root is prefetch (140);
  // before 20, nothing ends: the chain is prefetch -> infer. logger and load overlap.
  EXPECT_EQ(roots, (std::vector<std::string>{"prefetch", "infer"}));
  EXPECT_EQ(path.start_ns, 20);
  EXPECT_EQ(path.end_ns, 400);
  EXPECT_EQ(path.length_ns, 380);
  EXPECT_EQ(path.idle_ns, 10);  // 140 -> 150
  EXPECT_EQ(path.concurrent_roots_skipped, 2u);
  ASSERT_EQ(path.steps.size(), 3u);
  EXPECT_EQ(trace.str(trace.slices.name[path.steps[1].row]), "infer");
  EXPECT_EQ(path.steps[1].on_path_ns, 110);
  EXPECT_EQ(path.steps[2].depth, 1u);
  // By name: layer 140, prefetch 120, infer 110; plus idle 10 = the length.
  ASSERT_EQ(path.by_name.size(), 3u);
  EXPECT_EQ(trace.str(path.by_name[0].name), "layer");
  int64_t sum = path.idle_ns;
  for (const CriticalPathByName& entry : path.by_name) sum += entry.on_path_ns;
  EXPECT_EQ(sum, path.length_ns);
}

TEST(CriticalPath, EmptyTrace) {
  trace::Trace trace;
  trace.finalize();
  CriticalPath path = compute_critical_path(trace);
  EXPECT_EQ(path.length_ns, 0);
  EXPECT_TRUE(path.steps.empty());
}

}  // namespace
}  // namespace opsight::analyze
