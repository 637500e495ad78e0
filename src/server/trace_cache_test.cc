#include "server/trace_cache.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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

// Many threads asking for a few keys at once (what the HTTP server's workers do): every
// answer holds the run of its key, each key is loaded at most once while it stays cached,
// and the cache never holds more than its capacity. Run under TSan by make tsan-test.
TEST(TraceCache, ConcurrentRequestsShareLoadsAndStayBounded) {
  TraceCache cache(3);
  std::atomic<int> loads{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 8; ++thread)
    threads.emplace_back([&, thread] {
      for (int i = 0; i < 200; ++i) {
        int key = (thread + i) % 3;
        auto outcome = cache.get("k" + std::to_string(key), [&loads, key] {
          loads.fetch_add(1);
          trace::Trace trace;
          trace.slices.add(key, 1, trace.intern("x"), 0, trace.thread_track(1, 1));
          trace.finalize();
          return LoadOutcome{std::make_shared<const LoadedRun>(std::move(trace), "label",
                                                               std::vector<std::string>{}),
                             {},
                             200};
        });
        if (!outcome.run || outcome.run->trace().slices.ts[0] != key) wrong.fetch_add(1);
        if (cache.keys().size() > 3) wrong.fetch_add(1);
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(loads.load(), 3);  // three keys, capacity three: each loaded once
}

}  // namespace
}  // namespace opsight::server
