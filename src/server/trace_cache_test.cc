#include "server/trace_cache.hpp"

#include <gtest/gtest.h>

namespace opsight::server {
namespace {

std::function<LoadOutcome()> loader(int* loads, int64_t slice_start) {
  return [loads, slice_start] {
    ++*loads;
    trace::Trace trace;
    trace.slices.add(slice_start, 10, trace.intern("x"), 0, trace.thread_track(1, 1));
    trace.finalize();
    return LoadOutcome{
        std::make_shared<const LoadedRun>(std::move(trace), "label", std::vector<std::string>{}),
        {},
        200};
  };
}

TEST(TraceCache, KeepsAtMostCapacityRunsLeastRecentlyUsedLeavesFirst) {
  TraceCache cache(2);
  int loads = 0;
  cache.get("a", loader(&loads, 1));
  cache.get("b", loader(&loads, 2));
  cache.get("a", loader(&loads, 1));  // hit: a is now the most recent
  EXPECT_EQ(loads, 2);
  cache.get("c", loader(&loads, 3));  // evicts b
  EXPECT_EQ(cache.keys(), (std::vector<std::string>{"c", "a"}));
  auto again = cache.get("b", loader(&loads, 2));
  EXPECT_EQ(loads, 4);
  ASSERT_TRUE(again.run);
  EXPECT_EQ(again.run->trace().slices.ts[0], 2);
  EXPECT_EQ(cache.keys(), (std::vector<std::string>{"b", "c"}));
}

TEST(TraceCache, AnEvictedRunStaysAliveForItsReaders) {
  TraceCache cache(1);
  int loads = 0;
  auto held = cache.get("a", loader(&loads, 5)).run;
  cache.get("b", loader(&loads, 6));
  EXPECT_EQ(cache.keys(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(held->trace().slices.ts[0], 5);
  EXPECT_EQ(held->timeline().slice_count(0), 1u);
}

TEST(TraceCache, FailedLoadsAreNotCached) {
  TraceCache cache(2);
  int attempts = 0;
  auto failing = [&] {
    ++attempts;
    return LoadOutcome{nullptr, "x.json: cannot open", 422};
  };
  EXPECT_EQ(cache.get("x", failing).status, 422);
  EXPECT_EQ(cache.get("x", failing).error, "x.json: cannot open");
  EXPECT_EQ(attempts, 2);
  EXPECT_TRUE(cache.keys().empty());
}

}  // namespace
}  // namespace opsight::server
