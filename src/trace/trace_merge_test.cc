// Combining traces: merging, shifting onto another clock, keeping a time window.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trace/trace.hpp"
#include "trace/trace_test_support.hpp"

namespace {

using opsight::trace::testing::values;

using opsight::trace::ArgType;
using opsight::trace::ArgValue;
using opsight::trace::kNoRow;
using opsight::trace::Trace;

// ---- Several traces merged into one ----------------------------------------------------

// A process's trace: a request with a nested step (with args), an instant with an arg, a
// counter and an async lane, on pid `pid`.
Trace process_trace(int64_t pid, int64_t start) {
  Trace trace;
  trace.intern(pid == 1 ? "only in the first" : "only in the second");  // shifts string ids
  auto thread = trace.thread_track(pid, pid);
  trace.tracks[thread].name = trace.intern("main " + std::to_string(pid));
  trace.tracks[thread].overhead_ns = 10 * pid;
  trace.tracks[thread].events_recorded = 4;
  trace.process(pid).name = trace.intern("process " + std::to_string(pid));
  auto lane = trace.async_track(pid, pid, 0x99, "Task-1");
  auto request =
      trace.slices.add(start, 100, trace.intern("request"), trace.intern("http"), thread);
  auto step = trace.slices.add(start + 10, 50, trace.intern("step"), 0, thread);
  trace.slices.add(start + 20, 30, trace.intern("task"), 0, lane);
  trace.slice_args.add(step, trace.intern("pid"), ArgValue::of_int(pid));
  trace.slice_args.add(request, trace.intern("route"),
                       ArgValue::of_string(trace.intern("/p" + std::to_string(pid))));
  auto mark = trace.instants.add(start + 5, trace.intern("mark"), 0, thread);
  trace.instant_args.add(mark, trace.intern("why"), ArgValue::of_string(trace.intern("because")));
  trace.counters.add(start, trace.counter_track(pid, "rss", "bytes"), static_cast<double>(pid));
  trace.run.command_line = "cmd " + std::to_string(pid);
  trace.run.host = "host " + std::to_string(pid);
  trace.run.pid = pid;
  trace.run.trace_id = {static_cast<uint64_t>(pid), 7};
  trace.run.overhead_ns = 10 * pid;
  trace.run.events_dropped = static_cast<uint64_t>(pid);
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'000'000;
  trace.run.start_unix_ns = start - 5 + 1'000'000;
  trace.run.traced_ns = 200;
  trace.run.extra = {{"unmatched_ends", "2"}, {"model", "m" + std::to_string(pid)}};
  trace.finalize();
  return trace;
}

std::string arg_text(const Trace& trace, const opsight::trace::ArgTable& args, size_t arg) {
  const ArgValue& value = args.value[arg];
  return std::string(trace.str(args.key[arg])) + "=" +
         (value.type == ArgType::kString ? std::string(trace.str(value.string_value))
                                         : std::to_string(value.int_value));
}

TEST(AppendTrace, MergesTablesWithTheirRowsAndIdsShifted) {
  Trace merged = process_trace(1, 1000);
  Trace second = process_trace(2, 5000);
  opsight::trace::append_trace(merged, second);

  ASSERT_EQ(merged.slices.size(), 6u);
  ASSERT_EQ(merged.processes.size(), 2u);
  EXPECT_EQ(merged.str(merged.processes[1].name), "process 2");
  ASSERT_EQ(merged.tracks.size(), 4u);
  EXPECT_EQ(merged.str(merged.tracks[2].name), "main 2");
  EXPECT_EQ(merged.tracks[2].overhead_ns, 20);
  EXPECT_EQ(merged.tracks[3].async_key, 0x99u);
  EXPECT_EQ(merged.tracks[3].pid, 2);
  EXPECT_EQ(merged.counter_tracks.size(), 2u);
  // Each slice keeps its name, track, nesting and args.
  std::vector<std::string> rows;
  for (opsight::trace::RowIndex row = 0; row < merged.slices.size(); ++row) {
    const auto& track = merged.tracks[merged.slices.track[row]];
    std::string text = std::string(merged.str(merged.slices.name[row])) +
                       " pid=" + std::to_string(track.pid) + " " +
                       std::to_string(merged.slices.ts[row]) +
                       " depth=" + std::to_string(merged.slices.depth[row]);
    if (merged.slices.parent[row] != kNoRow)
      text += " in " + std::string(merged.str(merged.slices.name[merged.slices.parent[row]])) +
              "@" + std::to_string(merged.slices.ts[merged.slices.parent[row]]);
    for (auto arg = merged.slices.args_begin[row]; arg < merged.slices.args_begin[row + 1]; ++arg)
      text += " " + arg_text(merged, merged.slice_args, arg);
    rows.push_back(text);
  }
  EXPECT_EQ(rows, (std::vector<std::string>{
                      "request pid=1 1000 depth=0 route=/p1",
                      "step pid=1 1010 depth=1 in request@1000 pid=1",
                      "task pid=1 1020 depth=0",
                      "request pid=2 5000 depth=0 route=/p2",
                      "step pid=2 5010 depth=1 in request@5000 pid=2",
                      "task pid=2 5020 depth=0",
                  }));
  ASSERT_EQ(merged.instants.size(), 2u);
  EXPECT_EQ(merged.instants.ts[1], 5005);
  EXPECT_EQ(merged.tracks[merged.instants.track[1]].pid, 2);
  EXPECT_EQ(arg_text(merged, merged.instant_args, merged.instants.args_begin[1]), "why=because");
  ASSERT_EQ(merged.counters.size(), 2u);
  EXPECT_EQ(merged.counter_tracks[merged.counters.counter_track[1]].pid, 2);
  std::set<uint64_t> ids(merged.slices.span_id.begin(), merged.slices.span_id.end());
  EXPECT_EQ(ids.size(), 6u);

  // Run info: the first's identity, summed costs, the union of the recording windows.
  EXPECT_EQ(merged.run.command_line, "cmd 1");
  EXPECT_EQ(merged.run.host, "host 1");
  EXPECT_EQ(merged.run.pid, 1);
  EXPECT_EQ(merged.run.trace_id.high, 1u);
  EXPECT_EQ(merged.run.overhead_ns, 30);
  EXPECT_EQ(merged.run.events_dropped, 3u);
  EXPECT_TRUE(merged.run.complete);
  EXPECT_EQ(merged.run.traced_ns, 4995 + 200 - 995 - 0);  // from 995 to 5195
  EXPECT_EQ(merged.run.start_unix_ns, 995 + 1'000'000);
  EXPECT_EQ(merged.run.extra, (std::vector<std::pair<std::string, std::string>>{
                                  {"unmatched_ends", "4"}, {"model", "m1"}}));
}

TEST(AppendTrace, IncompleteIfEitherIsAndEmptyTakesTheOther) {
  Trace first = process_trace(1, 1000);
  Trace second = process_trace(2, 5000);
  second.run.complete = false;
  Trace merged;
  opsight::trace::append_trace(merged, first);
  EXPECT_EQ(merged.run.command_line, "cmd 1");
  EXPECT_EQ(merged.run.traced_ns, 200);
  EXPECT_EQ(merged.slices.span_id, first.slices.span_id);
  opsight::trace::append_trace(merged, second);
  EXPECT_FALSE(merged.run.complete);
  EXPECT_EQ(merged.slices.size(), 6u);
}

TEST(AppendTrace, CollidingSpanIdsAreReplaced) {
  Trace merged = process_trace(1, 1000);
  Trace second = process_trace(2, 5000);
  // Files of one trace id derive their span ids alike.
  for (size_t row = 0; row < second.slices.size(); ++row)
    second.slices.span_id[row] = merged.slices.span_id[row];
  opsight::trace::append_trace(merged, second);
  std::set<uint64_t> ids(merged.slices.span_id.begin(), merged.slices.span_id.end());
  EXPECT_EQ(ids.size(), 6u);
  EXPECT_EQ(ids.count(0), 0u);
}

TEST(AppendTrace, AThreadTrackBothHaveIsSharedAndRenestedWhenItsSlicesInterleave) {
  Trace first;
  auto track = first.thread_track(5, 5);
  first.slices.add(100, 10, first.intern("first early"), 0, track);
  first.slices.add(300, 100, first.intern("first late"), 0, track);
  first.finalize();
  Trace second;
  auto other = second.thread_track(5, 5);
  second.slices.add(200, 20, second.intern("second"), 0, other);
  second.slices.add(320, 10, second.intern("second inside"), 0, other);
  second.finalize();
  opsight::trace::append_trace(first, second);
  ASSERT_EQ(first.tracks.size(), 1u);
  std::vector<std::string> order;
  for (opsight::trace::RowIndex row = 0; row < first.slices.size(); ++row)
    order.push_back(std::string(first.str(first.slices.name[row])) +
                    " depth=" + std::to_string(first.slices.depth[row]));
  EXPECT_EQ(order, (std::vector<std::string>{"first early depth=0", "second depth=0",
                                             "first late depth=0", "second inside depth=1"}));
}

// ---- Run info merged (merge_run_info: append_trace's and the streaming merge's rule) ----

using opsight::trace::merge_run_info;
using opsight::trace::RunInfo;
using RunInfoExtras = std::vector<std::pair<std::string, std::string>>;
using RunInfoEvents = std::optional<std::pair<int64_t, int64_t>>;

TEST(MergeRunInfo, CountsAddUpOtherExtrasKeepTheFirstNewOnesGoLast) {
  RunInfo into;
  into.extra = {{"unmatched_ends", "2"},
                {"model", "first"},
                {"skipped_events.gpu", "5"},
                {"unknown_names", "not a count"},
                {"clock_max_error_ns", "40"}};
  RunInfo other;
  other.extra = {{"clock_max_error_ns", "2"},  {"model", "second"},
                 {"unknown_names", "3"},       {"unmatched_ends", "7"},
                 {"skipped_events.gpu", "10"}, {"converted_from", "chrome-json"},
                 {"undecodable_slots", "1"}};
  merge_run_info(into, std::nullopt, other, std::nullopt);
  EXPECT_EQ(into.extra, (RunInfoExtras{{"unmatched_ends", "9"},
                                       {"model", "first"},
                                       {"skipped_events.gpu", "15"},
                                       {"unknown_names", "not a count"},
                                       {"clock_max_error_ns", "42"},
                                       {"converted_from", "chrome-json"},
                                       {"undecodable_slots", "1"}}));
}

TEST(MergeRunInfo, FirstNonEmptyFieldsStayAndSumsAddUp) {
  RunInfo into;
  into.host = "host a";
  into.overhead_ns = std::numeric_limits<int64_t>::max() - 1;
  into.events_dropped = 4;
  RunInfo other;
  other.command_line = "cmd b";
  other.host = "host b";
  other.opsight_version = "1.2";
  other.source_format = "opsight";
  other.clock = "tsc";
  other.pid = 42;
  other.trace_id = {3, 4};
  other.overhead_ns = 10;
  other.events_dropped = 6;
  other.complete = false;
  merge_run_info(into, std::nullopt, other, std::nullopt);
  EXPECT_EQ(into.command_line, "cmd b");
  EXPECT_EQ(into.host, "host a");
  EXPECT_EQ(into.opsight_version, "1.2");
  EXPECT_EQ(into.source_format, "opsight");
  EXPECT_EQ(into.clock, "tsc");
  EXPECT_EQ(into.pid, 42);
  EXPECT_EQ(into.trace_id.high, 3u);
  EXPECT_EQ(into.overhead_ns, std::numeric_limits<int64_t>::max());  // saturates
  EXPECT_EQ(into.events_dropped, 10u);
  EXPECT_FALSE(into.complete);
  EXPECT_EQ(into.traced_ns, 0);  // neither knows a window
  EXPECT_FALSE(into.has_unix_offset);

  other.pid = 7;
  other.host = "host c";
  merge_run_info(into, std::nullopt, other, std::nullopt);
  EXPECT_EQ(into.pid, 42);
  EXPECT_EQ(into.host, "host a");
}

TEST(MergeRunInfo, TheWindowIsTheUnionOfBothRecordings) {
  // Both know their wall-clock start: [1000, 1300] and [900, 1100] (own time base), the
  // events' bounds do not count.
  RunInfo into;
  into.has_unix_offset = true;
  into.unix_offset_ns = 1'000'000;
  into.start_unix_ns = 1'001'000;
  into.traced_ns = 300;
  RunInfo other;
  other.has_unix_offset = true;
  other.unix_offset_ns = 2'000'000;  // `into`'s offset stays
  other.start_unix_ns = 2'000'900;
  other.traced_ns = 200;
  merge_run_info(into, RunInfoEvents{{0, 5000}}, other, RunInfoEvents{{0, 9000}});
  EXPECT_EQ(into.unix_offset_ns, 1'000'000);
  EXPECT_EQ(into.traced_ns, 400);  // 900 to 1300
  EXPECT_EQ(into.start_unix_ns, 1'000'900);
}

TEST(MergeRunInfo, WithoutAWallClockStartTheEventsBoundTheWindow) {
  // `into` has events from 100 to 150 and traced 80 (so to 180); `other` has events from
  // 50 to 120. No Unix offset: start_unix_ns is left alone.
  RunInfo into;
  into.traced_ns = 80;
  RunInfo other;
  merge_run_info(into, RunInfoEvents{{100, 150}}, other, RunInfoEvents{{50, 120}});
  EXPECT_EQ(into.traced_ns, 130);  // 50 to 180
  EXPECT_EQ(into.start_unix_ns, 0);

  // Without events `into` has no window: the other's is taken; the other's Unix offset too,
  // which then gives the start.
  RunInfo empty;
  RunInfo timed;
  timed.has_unix_offset = true;
  timed.unix_offset_ns = 1'000;
  timed.traced_ns = 10;
  merge_run_info(empty, std::nullopt, timed, RunInfoEvents{{200, 250}});
  EXPECT_EQ(empty.traced_ns, 50);  // 200 to max(250, 200 + 10)
  EXPECT_TRUE(empty.has_unix_offset);
  EXPECT_EQ(empty.start_unix_ns, 1'200);

  // The other without a window leaves `into`'s as it was.
  RunInfo kept;
  kept.traced_ns = 5;
  merge_run_info(kept, RunInfoEvents{{10, 40}}, RunInfo{}, std::nullopt);
  EXPECT_EQ(kept.traced_ns, 30);
}

TEST(ShiftTimestamps, MovesEveryTableAndKeepsWallTime) {
  Trace trace = process_trace(1, 1000);
  const auto depths = values(trace.slices.depth);
  const auto parents = values(trace.slices.parent);
  const auto ids = values(trace.slices.span_id);
  opsight::trace::shift_timestamps(trace, -250);
  EXPECT_EQ(values(trace.slices.ts), (std::vector<int64_t>{750, 760, 770}));
  EXPECT_EQ(values(trace.slices.dur), (std::vector<int64_t>{100, 50, 30}));
  EXPECT_EQ(values(trace.slices.depth), depths);
  EXPECT_EQ(values(trace.slices.parent), parents);
  EXPECT_EQ(values(trace.slices.span_id), ids);
  EXPECT_EQ(values(trace.instants.ts), (std::vector<int64_t>{755}));
  EXPECT_EQ(values(trace.counters.ts), (std::vector<int64_t>{750}));
  // The same instants of wall time: ts + unix_offset_ns is unchanged.
  EXPECT_EQ(trace.run.unix_offset_ns, 1'000'250);
  EXPECT_EQ(trace.run.start_unix_ns, 995 + 1'000'000);
  EXPECT_EQ(trace.time_bounds(), (std::pair<int64_t, int64_t>{750, 850}));

  opsight::trace::shift_timestamps(trace, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(trace.slices.ts[0], std::numeric_limits<int64_t>::max());  // saturated

  Trace unknown_wall_time = process_trace(2, 10);
  unknown_wall_time.run.has_unix_offset = false;
  unknown_wall_time.run.unix_offset_ns = 0;
  opsight::trace::shift_timestamps(unknown_wall_time, 5);
  EXPECT_EQ(unknown_wall_time.run.unix_offset_ns, 0);
  EXPECT_EQ(unknown_wall_time.slices.ts[0], 15);
}

// A foreign profile counted from its own zero, shifted onto a trace's clock, nests under
// the span of the call that caused it when both are on the same thread.
TEST(ShiftTimestamps, AShiftedProfileNestsUnderTheCallThatRanIt) {
  Trace recorded;
  auto thread = recorded.thread_track(7, 8);
  recorded.slices.add(10'000, 500, recorded.intern("onnxruntime.run model"), 0, thread);
  recorded.slices.add(20'000, 500, recorded.intern("onnxruntime.run model"), 0, thread);
  recorded.finalize();
  Trace profile;
  auto same_thread = profile.thread_track(7, 8);
  profile.slices.add(0, 400, profile.intern("model_run"), 0, same_thread);
  profile.slices.add(100, 200, profile.intern("MatMul_kernel_time"), 0, same_thread);
  profile.slices.add(10'000, 400, profile.intern("model_run"), 0, same_thread);
  profile.slices.add(10'100, 200, profile.intern("MatMul_kernel_time"), 0, same_thread);
  profile.finalize();
  opsight::trace::shift_timestamps(profile, 10'050);
  opsight::trace::append_trace(recorded, profile);

  std::vector<std::string> rows;
  for (opsight::trace::RowIndex row = 0; row < recorded.slices.size(); ++row) {
    std::string text = std::string(recorded.str(recorded.slices.name[row])) + "@" +
                       std::to_string(recorded.slices.ts[row]);
    if (recorded.slices.parent[row] != kNoRow)
      text += " in " +
              std::string(recorded.str(recorded.slices.name[recorded.slices.parent[row]])) + "@" +
              std::to_string(recorded.slices.ts[recorded.slices.parent[row]]);
    rows.push_back(text);
  }
  EXPECT_EQ(rows, (std::vector<std::string>{
                      "onnxruntime.run model@10000",
                      "model_run@10050 in onnxruntime.run model@10000",
                      "MatMul_kernel_time@10150 in model_run@10050",
                      "onnxruntime.run model@20000",
                      "model_run@20050 in onnxruntime.run model@20000",
                      "MatMul_kernel_time@20150 in model_run@20050",
                  }));
}

TEST(KeepTimeWindow, DropsWhatStartsOutsideAndNestsTheRestAgain) {
  Trace trace;
  auto thread = trace.thread_track(1, 1);
  auto before = trace.slices.add(0, 50, trace.intern("session_initialization"), 0, thread);
  auto parent = trace.slices.add(100, 5000, trace.intern("outer"), 0, thread);
  auto child = trace.slices.add(2000, 100, trace.intern("model_run"), 0, thread);
  auto late = trace.slices.add(9000, 10, trace.intern("late"), 0, thread);
  trace.slice_args.add(before, trace.intern("k"), ArgValue::of_int(1));
  trace.slice_args.add(child, trace.intern("k"), ArgValue::of_int(2));
  trace.slice_args.add(late, trace.intern("k"), ArgValue::of_int(3));
  trace.instants.add(50, trace.intern("early mark"), 0, thread);
  auto kept_mark = trace.instants.add(3000, trace.intern("mark"), 0, thread);
  trace.instant_args.add(kept_mark, trace.intern("why"), ArgValue::of_int(9));
  auto rss = trace.counter_track(1, "rss");
  trace.counters.add(10, rss, 1.0);
  trace.counters.add(2500, rss, 2.0);
  trace.finalize();
  ASSERT_EQ(trace.slices.parent[2], parent);

  opsight::trace::keep_time_window(trace, 1000, 8000);  // "outer" (from 100) goes
  ASSERT_EQ(trace.slices.size(), 1u);
  EXPECT_EQ(trace.str(trace.slices.name[0]), "model_run");
  EXPECT_EQ(trace.slices.parent[0], kNoRow);
  EXPECT_EQ(trace.slices.depth[0], 0);
  ASSERT_EQ(trace.slices.args_begin.size(), 2u);
  ASSERT_EQ(trace.slices.args_begin[1] - trace.slices.args_begin[0], 1u);
  EXPECT_EQ(trace.slice_args.value[trace.slices.args_begin[0]].int_value, 2);
  ASSERT_EQ(trace.instants.size(), 1u);
  EXPECT_EQ(trace.instants.ts[0], 3000);
  ASSERT_EQ(trace.instant_args.size(), 1u);
  EXPECT_EQ(trace.instant_args.owner[0], 0u);
  EXPECT_EQ(values(trace.counters.value), (std::vector<double>{2.0}));
  EXPECT_EQ(trace.tracks.size(), 1u);

  opsight::trace::keep_time_window(trace, 0, 100'000);  // everything is inside: unchanged
  EXPECT_EQ(trace.slices.size(), 1u);
  EXPECT_EQ(trace.instants.size(), 1u);
}

}  // namespace
