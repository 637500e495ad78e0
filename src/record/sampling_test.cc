// Sampling by unit (SessionOptions::sample_rate; record/sampling.hpp), recorded into memory
// and read back: which units are kept, that a sampled-out unit writes nothing (spans,
// arguments, flows), named roots, decisions given by the front end, async tracks, the
// listener, and what the run info says.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "opsight/opsight.hpp"
#include "record/record_and_read_for_tests.hpp"

namespace {

using opsight::record::RecordingOptions;
using opsight::trace::Trace;

RecordingOptions sampling(double rate, std::string root = {}) {
  RecordingOptions options;
  options.sample_rate = rate;
  options.sample_root = std::move(root);
  return options;
}

std::vector<std::string> names(const Trace& trace) {
  std::vector<std::string> out;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    out.emplace_back(trace.str(trace.slices.name[row]));
  return out;
}

std::string info(const Trace& trace, const std::string& key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return "(none)";
}

size_t count(const std::vector<std::string>& all, const std::string& name) {
  return static_cast<size_t>(std::count(all.begin(), all.end(), name));
}

TEST(Sampling, OneInFourRootSpansAreKeptWithEverythingUnderThem) {
  opsight::NameId root = opsight::register_name("request");
  opsight::NameId child = opsight::register_name("step");
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        for (int unit = 0; unit < 100; ++unit) {
          ASSERT_TRUE(opsight::begin(root));  // true for a sampled-out root too
          bool kept = opsight::recording();
          EXPECT_EQ(kept, unit % 4 == 0) << unit;  // the first, then one in every four
          for (int step = 0; step < 2; ++step) {
            bool recorded = opsight::begin(child);
            EXPECT_EQ(recorded, kept);
            if (recorded) {
              opsight::add_arg("step", step);
              opsight::end();
            }
          }
          opsight::end();
          EXPECT_TRUE(opsight::recording());  // the unit is over
        }
      },
      sampling(0.25));
  std::vector<std::string> all = names(trace);
  EXPECT_EQ(count(all, "request"), 25u);
  EXPECT_EQ(count(all, "step"), 50u);
  EXPECT_EQ(trace.slice_args.size(), 50u);
  EXPECT_EQ(info(trace, "sampling"), "1 in 4 of root spans");
  EXPECT_EQ(info(trace, "sampling_units"), "100");
  EXPECT_EQ(info(trace, "sampling_units_recorded"), "25");
}

// Rate 0 (OpenTelemetry's always_off): no unit is recorded, the first included.
TEST(Sampling, RateZeroRecordsNoUnit) {
  opsight::NameId root = opsight::register_name("request");
  opsight::NameId child = opsight::register_name("step");
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        for (int unit = 0; unit < 10; ++unit) {
          ASSERT_TRUE(opsight::begin(root));
          EXPECT_FALSE(opsight::recording()) << unit;
          EXPECT_FALSE(opsight::begin(child));
          opsight::end();
        }
      },
      sampling(0.0));
  EXPECT_TRUE(trace.slices.size() == 0);
  EXPECT_EQ(info(trace, "sampling"), "none (always off) of root spans");
  EXPECT_EQ(info(trace, "sampling_units"), "10");
  EXPECT_EQ(info(trace, "sampling_units_recorded"), "0");
}

TEST(Sampling, ANamedRootSamplesOnlyItsSpansAndWhatIsOutsideIsKept) {
  opsight::NameId server = opsight::register_name("serve forever");
  opsight::NameId request = opsight::register_name("handle_request");
  opsight::NameId inner = opsight::register_name("infer");
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        ASSERT_TRUE(opsight::begin(server));
        for (int unit = 0; unit < 10; ++unit) {
          ASSERT_TRUE(opsight::begin(request));
          // A span of the root's name inside a unit is part of it, not a unit of its own.
          if (opsight::begin(request)) opsight::end();
          if (opsight::begin(inner)) opsight::end();
          opsight::end();
        }
        opsight::end();
      },
      sampling(0.5, "handle_request"));
  std::vector<std::string> all = names(trace);
  EXPECT_EQ(count(all, "serve forever"), 1u);
  EXPECT_EQ(count(all, "handle_request"), 10u);  // 5 units, each with its nested one
  EXPECT_EQ(count(all, "infer"), 5u);
  EXPECT_EQ(info(trace, "sampling"), "1 in 2 of 'handle_request' spans");
  EXPECT_EQ(info(trace, "sampling_units"), "10");
  EXPECT_EQ(info(trace, "sampling_units_recorded"), "5");
}

TEST(Sampling, ACategoryRoot) {
  opsight::NameId get = opsight::register_name("GET /a", "http.server");
  opsight::NameId post = opsight::register_name("POST /b", "http.server");
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        for (int unit = 0; unit < 6; ++unit) {
          ASSERT_TRUE(opsight::begin(unit % 2 ? get : post));
          opsight::end();
        }
      },
      sampling(1.0 / 3, "category:http.server"));
  EXPECT_EQ(names(trace).size(), 2u);
  EXPECT_EQ(info(trace, "sampling"), "1 in 3 of spans of category 'http.server'");
}

TEST(Sampling, TheFrontEndsDecisionWinsAndIsCounted) {
  opsight::NameId root = opsight::register_name("request");
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        opsight::decide_next_sampling_unit(false);  // unit 0 would be kept by the rate
        ASSERT_TRUE(opsight::begin(root));
        EXPECT_TRUE(opsight::sampled_out());
        opsight::end();
        EXPECT_FALSE(opsight::sampled_out());
        ASSERT_TRUE(opsight::begin(root));  // the rate's first unit: kept
        opsight::end();
        opsight::decide_next_sampling_unit(true);  // the rate's next unit would be out
        ASSERT_TRUE(opsight::begin(root));
        EXPECT_TRUE(opsight::recording());
        opsight::end();
        ASSERT_TRUE(opsight::begin(root));  // the rate's second: out
        EXPECT_FALSE(opsight::recording());
        opsight::decide_next_sampling_unit(true);  // inside a unit: not taken, not kept
        EXPECT_FALSE(opsight::begin(root));
        opsight::end();
        EXPECT_TRUE(opsight::begin(root));  // the decision was for one begin only: rate, out
        EXPECT_FALSE(opsight::recording());
        opsight::end();
      },
      sampling(0.01));
  EXPECT_EQ(names(trace).size(), 2u);  // the rate's first and the forced one
  EXPECT_EQ(info(trace, "sampling_units"), "5");
  EXPECT_EQ(info(trace, "sampling_units_recorded"), "2");
}

TEST(Sampling, ADecisionGivenOpensAUnitWhateverTheRootName) {
  opsight::NameId job = opsight::register_name("job work");
  opsight::NameId request = opsight::register_name("handle_request");
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        opsight::decide_next_sampling_unit(false);  // a job handed over by a unit left out
        ASSERT_TRUE(opsight::begin(job));
        EXPECT_FALSE(opsight::begin(request));  // inside the unit: not one of its own
        opsight::end();
        opsight::decide_next_sampling_unit(true);
        ASSERT_TRUE(opsight::begin(job));
        ASSERT_TRUE(opsight::begin(request));
        opsight::end();
        opsight::end();
        ASSERT_TRUE(opsight::begin(job));  // no decision: not a root, recorded as outside
        opsight::end();
      },
      sampling(0.5, "handle_request"));
  std::vector<std::string> all = names(trace);
  EXPECT_EQ(count(all, "job work"), 2u);
  EXPECT_EQ(count(all, "handle_request"), 1u);
  EXPECT_EQ(info(trace, "sampling_units"), "2");
}

TEST(Sampling, EachAsyncTrackKeepsItsOwnUnitAndTheListenerHearsTheThread) {
  static std::vector<bool> heard;
  heard.clear();
  opsight::set_sampling_listener([](bool sampled_out) { heard.push_back(sampled_out); });
  opsight::NameId root = opsight::register_name("task");
  opsight::NameId child = opsight::register_name("work");
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        opsight::switch_track(1, "task A");
        ASSERT_TRUE(opsight::begin(root));  // unit 0: kept
        opsight::switch_track(2, "task B");
        ASSERT_TRUE(opsight::begin(root));  // unit 1: out
        EXPECT_FALSE(opsight::begin(child));
        opsight::switch_track(1);
        EXPECT_TRUE(opsight::recording());  // task A's unit is kept
        ASSERT_TRUE(opsight::begin(child));
        opsight::end();
        opsight::switch_track(2);
        EXPECT_FALSE(opsight::recording());
        opsight::end();  // B's root: its unit closes
        EXPECT_TRUE(opsight::recording());
        opsight::switch_track(1);
        opsight::end();
        opsight::switch_track(0);
      },
      sampling(0.5));
  opsight::set_sampling_listener(nullptr);
  std::vector<std::string> all = names(trace);
  EXPECT_EQ(count(all, "task"), 1u);
  EXPECT_EQ(count(all, "work"), 1u);
  // Out when B's unit began, in on the switch to A, out on the switch back to B, in at
  // B's end.
  EXPECT_EQ(heard, (std::vector<bool>{true, false, true, false}));
}

TEST(Sampling, ThreadsShareOneExactCount) {
  opsight::NameId root = opsight::register_name("request");
  opsight::NameId child = opsight::register_name("step");
  constexpr int kThreads = 4;
  constexpr int kUnits = 1000;
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        std::vector<std::thread> threads;
        for (int thread = 0; thread < kThreads; ++thread)
          threads.emplace_back([&] {
            for (int unit = 0; unit < kUnits; ++unit) {
              if (!opsight::begin(root)) continue;
              if (opsight::begin(child)) opsight::end();
              opsight::end();
            }
          });
        for (auto& thread : threads) thread.join();
      },
      sampling(0.1));
  std::vector<std::string> all = names(trace);
  EXPECT_EQ(count(all, "request"), 400u);  // one in ten of the 4000, whichever thread
  EXPECT_EQ(count(all, "step"), 400u);
  EXPECT_EQ(info(trace, "sampling_units"), "4000");
}

TEST(Sampling, ASessionThatDoesNotSampleRecordsEverythingAndSaysNothing) {
  opsight::NameId root = opsight::register_name("request");
  Trace trace = opsight::record::testing::record_and_read([&] {
    for (int unit = 0; unit < 5; ++unit) {
      ASSERT_TRUE(opsight::begin(root));
      opsight::end();
    }
  });
  EXPECT_EQ(names(trace).size(), 5u);
  EXPECT_EQ(info(trace, "sampling"), "(none)");
}

TEST(Sampling, AUnitCutByTheSessionsStopLeavesTheNextSessionWhole) {
  opsight::NameId root = opsight::register_name("request");
  opsight::record::testing::record_and_read(
      [&] {
        ASSERT_TRUE(opsight::begin(root));  // unit 0: kept
        opsight::end();
        ASSERT_TRUE(opsight::begin(root));  // unit 1: out, and never ended in the session
      },
      sampling(0.5));
  opsight::end();  // after the stop
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        ASSERT_TRUE(opsight::begin(root));
        EXPECT_TRUE(opsight::recording());
        opsight::end();
      },
      sampling(0.5));
  EXPECT_EQ(names(trace).size(), 1u);
}

}  // namespace

namespace {

// The always-on preset's scope: a unit sampled out is still recorded, span by span, with
// only the listener's hooks (the torch operators) off while it runs, on its own track.
TEST(Sampling, OperatorsOnlyRecordsEverySpanAndSwitchesOnlyTheHooks) {
  static std::vector<bool> heard;
  heard.clear();
  opsight::set_sampling_listener([](bool off) { heard.push_back(off); });
  opsight::NameId root = opsight::register_name("request");
  opsight::NameId child = opsight::register_name("step");
  RecordingOptions options = sampling(0.25);
  options.sample_operators_only = true;
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        for (int unit = 0; unit < 8; ++unit) {
          ASSERT_TRUE(opsight::begin(root));
          EXPECT_TRUE(opsight::recording());  // every unit records its spans
          ASSERT_TRUE(opsight::begin(child));
          opsight::add_arg("unit", unit);
          opsight::end();
          opsight::end();
        }
        opsight::switch_track(1, "task");
        ASSERT_TRUE(opsight::begin(root));  // unit 8: kept
        opsight::switch_track(2, "other task");
        ASSERT_TRUE(opsight::begin(root));  // unit 9: operators off
        opsight::switch_track(1);
        opsight::end();
        opsight::switch_track(2);
        opsight::end();
        opsight::switch_track(0);
      },
      options);
  opsight::set_sampling_listener(nullptr);
  std::vector<std::string> all = names(trace);
  EXPECT_EQ(count(all, "request"), 10u);
  EXPECT_EQ(count(all, "step"), 8u);
  EXPECT_EQ(trace.slice_args.size(), 8u);
  // Units 1-3 and 5-7 ran with the hooks off (off at their root, on when it ended); on
  // the tracks, off on the switch to unit 9's, on at the switch back, off again, on at
  // its end.
  std::vector<bool> expected;
  for (int unit = 0; unit < 8; ++unit)
    if (unit % 4 != 0) expected.insert(expected.end(), {true, false});
  expected.insert(expected.end(), {true, false, true, false});
  EXPECT_EQ(heard, expected);
  EXPECT_EQ(info(trace, "sampling"), "operators in 1 in 4 of root spans");
  EXPECT_EQ(info(trace, "sampling_units"), "10");
  EXPECT_EQ(info(trace, "sampling_units_recorded"), "3");
}

// An operator that is itself a root (torch run outside any span) is a unit left out whole
// under operators_only too: its spans are operators.
TEST(Sampling, OperatorsOnlyLeavesOutAnOperatorRootWhole) {
  opsight::NameId op = opsight::register_name("aten::linear", "operator");
  opsight::NameId inner = opsight::register_name("aten::t", "operator");
  RecordingOptions options = sampling(0.5);
  options.sample_operators_only = true;
  Trace trace = opsight::record::testing::record_and_read(
      [&] {
        for (int unit = 0; unit < 4; ++unit) {
          ASSERT_TRUE(opsight::begin(op));
          if (opsight::begin(inner)) opsight::end();
          opsight::end();
        }
      },
      options);
  std::vector<std::string> all = names(trace);
  EXPECT_EQ(count(all, "aten::linear"), 2u);
  EXPECT_EQ(count(all, "aten::t"), 2u);
}

}  // namespace
