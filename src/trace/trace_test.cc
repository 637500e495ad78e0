// The trace model: interning, tracks, and what finalize() guarantees to every reader.
#include "trace/trace.hpp"

#include <gtest/gtest.h>

#include <set>

#include "trace/trace_test_support.hpp"

namespace {

using opsight::trace::testing::values;

using opsight::trace::ArgValue;
using opsight::trace::kNoRow;
using opsight::trace::Trace;

TEST(StringTable, InternsOnceAndSurvivesGrowth) {
  opsight::trace::StringTable strings;
  EXPECT_EQ(strings.get(0), "");
  EXPECT_EQ(strings.intern(""), 0u);
  std::vector<opsight::trace::StringId> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back(strings.intern("name " + std::to_string(i)));
  for (int i = 0; i < 5000; ++i) {
    EXPECT_EQ(strings.intern("name " + std::to_string(i)), ids[i]);  // short strings: SSO
    EXPECT_EQ(strings.get(ids[i]), "name " + std::to_string(i));
  }
  EXPECT_EQ(strings.size(), 5001u);
  EXPECT_FALSE(strings.find("absent").has_value());
}

TEST(Trace, TracksAndProcessesAreCreatedOnce) {
  Trace trace;
  auto first = trace.thread_track(1, 10);
  EXPECT_EQ(trace.thread_track(1, 10), first);
  EXPECT_NE(trace.thread_track(1, 11), first);
  EXPECT_NE(trace.thread_track(2, 10), first);
  EXPECT_EQ(trace.processes.size(), 2u);
  EXPECT_EQ(trace.counter_track(1, "rss"), trace.counter_track(1, "rss"));
  EXPECT_NE(trace.counter_track(1, "rss"), trace.counter_track(2, "rss"));
}

TEST(Trace, FinalizeSortsPerTrackAndNests) {
  Trace trace;
  auto a = trace.thread_track(1, 1);
  auto b = trace.thread_track(1, 2);
  auto name = [&](const char* text) { return trace.intern(text); };
  // Out of order, interleaved tracks, a tie on start (longer must become the parent).
  trace.slices.add(300, 100, name("child2"), 0, a);
  trace.slices.add(100, 50, name("other"), 0, b);
  trace.slices.add(100, 400, name("root"), 0, a);
  trace.slices.add(100, 150, name("child1"), 0, a);
  trace.slices.add(120, 10, name("grandchild"), 0, a);
  trace.slice_args.add(0, name("k"), ArgValue::of_int(7));  // on child2
  trace.finalize();

  std::vector<std::string> order;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    order.emplace_back(trace.str(trace.slices.name[row]));
  EXPECT_EQ(order, (std::vector<std::string>{"root", "child1", "grandchild", "child2", "other"}));
  EXPECT_EQ(values(trace.slices.depth), (std::vector<uint16_t>{0, 1, 2, 1, 0}));
  EXPECT_EQ(values(trace.slices.parent), (std::vector<uint32_t>{kNoRow, 0, 1, 0, kNoRow}));
  // The arg followed its slice through the sort.
  ASSERT_EQ(trace.slices.args_begin.size(), 6u);
  EXPECT_EQ(trace.slices.args_begin[3], 0u);
  EXPECT_EQ(trace.slices.args_begin[4], 1u);
  EXPECT_EQ(trace.slice_args.value[0].int_value, 7);
  for (size_t row : {0, 1, 2, 4})
    EXPECT_EQ(trace.slices.args_begin[row], trace.slices.args_begin[row + 1]);
  std::set<uint64_t> ids(trace.slices.span_id.begin(), trace.slices.span_id.end());
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids.count(0), 0u);
}

TEST(Trace, OverlappingSlicesAreClippedToTheirParentAndCounted) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(0, 100, trace.intern("parent"), 0, track);
  trace.slices.add(50, 100, trace.intern("overlaps"), 0, track);  // ends at 150 > 100
  trace.finalize();
  EXPECT_EQ(trace.slices.parent[1], 0u);
  EXPECT_EQ(trace.slices.end(1), 100);
  EXPECT_EQ(trace.clipped_slices, 1u);
}

TEST(Trace, AdjacentSlicesDoNotNestAndAMarkerAtAStartNestsInIt) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(0, 100, trace.intern("first"), 0, track);
  trace.slices.add(100, 0, trace.intern("marker"), 0, track);
  trace.slices.add(100, 50, trace.intern("second"), 0, track);
  trace.finalize();
  // Order: first, second (longer first on a tie), marker: inside second, not inside first.
  EXPECT_EQ(trace.str(trace.slices.name[2]), "marker");
  EXPECT_EQ(values(trace.slices.parent), (std::vector<uint32_t>{kNoRow, kNoRow, 1}));
}

TEST(Trace, TimeBoundsCoverEveryTable) {
  Trace trace;
  EXPECT_EQ(trace.time_bounds(), std::make_pair(int64_t{0}, int64_t{0}));
  auto track = trace.thread_track(1, 1);
  trace.slices.add(100, 50, trace.intern("s"), 0, track);
  trace.instants.add(20, trace.intern("i"), 0, track);
  trace.counters.add(400, trace.counter_track(1, "c"), 1.0);
  trace.finalize();
  EXPECT_EQ(trace.time_bounds(), std::make_pair(int64_t{20}, int64_t{400}));
}

TEST(Trace, IdsPrintAsW3CHex) {
  opsight::trace::TraceId id{0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL};
  EXPECT_EQ(id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(opsight::trace::span_id_to_hex(0x00f067aa0ba902b7ULL), "00f067aa0ba902b7");
}

}  // namespace

// Flows, async tracks, process metadata, instant scope and counter series: the parts of
// the model that link slices across threads and processes.
namespace model_links {

using opsight::trace::FlowBinding;
using opsight::trace::FlowEndpoint;
using opsight::trace::InstantScope;
using opsight::trace::RowIndex;
using opsight::trace::SliceLookup;
using opsight::trace::TrackKind;

TEST(TraceFlows, FollowTheirSlicesWhenFinalizeReordersRows) {
  Trace trace;
  auto a = trace.thread_track(1, 1);
  auto b = trace.thread_track(1, 2);
  // Rows out of time order: finalize() sorts them, and the flow must still join "send"
  // (on thread 1) to "serve" (on thread 2).
  RowIndex serve = trace.slices.add(300, 50, trace.intern("serve"), 0, b);
  trace.slices.add(0, 10, trace.intern("other"), 0, b);
  RowIndex send = trace.slices.add(100, 20, trace.intern("send"), 0, a);
  trace.flows.add(send, serve, 7, trace.intern("request"));
  trace.finalize();
  ASSERT_EQ(trace.flows.size(), 1u);
  EXPECT_EQ(trace.str(trace.slices.name[trace.flows.slice_out[0]]), "send");
  EXPECT_EQ(trace.str(trace.slices.name[trace.flows.slice_in[0]]), "serve");
  EXPECT_EQ(trace.flows.id[0], 7u);
  EXPECT_EQ(trace.str(trace.flows.name[0]), "request");
}

TEST(TraceFlows, ByTimeBindToTheEnclosingOrTheNextSlice) {
  Trace trace;
  auto a = trace.thread_track(1, 1);
  auto b = trace.thread_track(1, 2);
  trace.slices.add(0, 100, trace.intern("outer"), 0, a);
  trace.slices.add(10, 20, trace.intern("inner"), 0, a);
  trace.slices.add(200, 10, trace.intern("later"), 0, b);
  trace.slices.add(50, 10, trace.intern("earlier"), 0, b);
  // Enclosing at 15 is "inner" (the innermost), at 40 "outer" (inner ended at 30).
  trace.add_flow_by_time({a, 15, FlowBinding::kEnclosingSlice}, {b, 100, FlowBinding::kNextSlice},
                         1);
  trace.add_flow_by_time({a, 40, FlowBinding::kEnclosingSlice},
                         {b, 55, FlowBinding::kEnclosingSlice}, 2);
  // Nothing encloses 150 on thread 1 and nothing begins after 300 on thread 2: dropped.
  trace.add_flow_by_time({a, 150, FlowBinding::kEnclosingSlice}, {b, 55, FlowBinding::kNextSlice},
                         3);
  trace.add_flow_by_time({a, 15, FlowBinding::kEnclosingSlice}, {b, 300, FlowBinding::kNextSlice},
                         4);
  trace.finalize();
  ASSERT_EQ(trace.flows.size(), 2u);
  auto name_of = [&](RowIndex row) { return std::string(trace.str(trace.slices.name[row])); };
  EXPECT_EQ(name_of(trace.flows.slice_out[0]), "inner");
  EXPECT_EQ(name_of(trace.flows.slice_in[0]), "later");
  EXPECT_EQ(name_of(trace.flows.slice_out[1]), "outer");
  EXPECT_EQ(name_of(trace.flows.slice_in[1]), "earlier");
  EXPECT_EQ(trace.unbound_flows, 2u);
}

TEST(TraceFlows, SliceLookupFindsZeroLengthSlicesAndNothingBeforeTheFirst) {
  Trace trace;
  auto a = trace.thread_track(1, 1);
  trace.slices.add(10, 0, trace.intern("mark"), 0, a);
  trace.slices.add(20, 10, trace.intern("work"), 0, a);
  trace.finalize();
  SliceLookup lookup(trace);
  EXPECT_EQ(lookup.enclosing(a, 5), kNoRow);
  EXPECT_EQ(trace.str(trace.slices.name[lookup.enclosing(a, 10)]), "mark");
  EXPECT_EQ(lookup.enclosing(a, 15), kNoRow);
  EXPECT_EQ(trace.str(trace.slices.name[lookup.next(a, 11)]), "work");
  EXPECT_EQ(lookup.next(a, 21), kNoRow);
  EXPECT_EQ(lookup.enclosing(99, 0), kNoRow);  // no such track
}

TEST(TraceAsyncTracks, AreProcessWideAndNestLikeThreads) {
  Trace trace;
  auto request = trace.process_async_track(5, 0xabc, "request 0xabc");
  EXPECT_EQ(trace.tracks[request].kind, TrackKind::kAsync);
  EXPECT_TRUE(trace.tracks[request].is_async());
  EXPECT_EQ(trace.tracks[request].tid, 0);
  EXPECT_EQ(trace.track_label(request), "request 0xabc");
  EXPECT_EQ(trace.track_label(trace.process_async_track(5, 9)), "async 9");
  trace.slices.add(0, 100, trace.intern("queued"), 0, request);
  trace.slices.add(40, 30, trace.intern("batched"), 0, request);
  trace.finalize();
  EXPECT_EQ(trace.slices.depth[1], 1u);
  EXPECT_EQ(trace.slices.parent[1], 0u);
}

TEST(TraceMerge, KeepsFlowsAsyncTracksProcessMetadataScopesAndSeries) {
  Trace child;
  child.run.pid = 20;
  auto thread = child.thread_track(20, 21);
  auto lane = child.process_async_track(20, 5, "batch 5");
  RowIndex work = child.slices.add(100, 50, child.intern("work"), 0, thread);
  RowIndex batch = child.slices.add(120, 200, child.intern("batch"), 0, lane);
  child.flows.add(work, batch, 11, child.intern("handoff"));
  child.process(20).name = child.intern("worker");
  child.process(20).sort_index = 3;
  child.process(20).labels.push_back(child.intern("rank 1"));
  child.process(20).parent_pid = 10;
  child.tracks[thread].sort_index = -1;
  child.instants.add(130, child.intern("oom"), 0, thread, InstantScope::kGlobal);
  uint32_t heap = child.counter_series(20, "memory", "heap", "bytes");
  child.counters.add(100, heap, 4096);
  child.finalize();

  Trace parent;
  parent.run.pid = 10;
  auto main_thread = parent.thread_track(10, 10);
  parent.slices.add(0, 1000, parent.intern("main"), 0, main_thread);
  parent.finalize();
  opsight::trace::append_trace(parent, child);

  ASSERT_EQ(parent.flows.size(), 1u);
  auto name_of = [&](RowIndex row) { return std::string(parent.str(parent.slices.name[row])); };
  EXPECT_EQ(name_of(parent.flows.slice_out[0]), "work");
  EXPECT_EQ(name_of(parent.flows.slice_in[0]), "batch");
  EXPECT_EQ(parent.str(parent.flows.name[0]), "handoff");
  EXPECT_EQ(parent.tracks[parent.slices.track[parent.flows.slice_in[0]]].kind, TrackKind::kAsync);
  const auto& worker = parent.process(20);
  EXPECT_EQ(parent.str(worker.name), "worker");
  EXPECT_EQ(worker.sort_index, 3);
  EXPECT_EQ(worker.parent_pid, 10);
  ASSERT_EQ(worker.labels.size(), 1u);
  EXPECT_EQ(parent.str(worker.labels[0]), "rank 1");
  EXPECT_EQ(parent.tracks[parent.thread_track(20, 21)].sort_index, -1);
  ASSERT_EQ(parent.instants.size(), 1u);
  EXPECT_EQ(parent.instants.scope[0], InstantScope::kGlobal);
  ASSERT_EQ(parent.counter_tracks.size(), 1u);
  EXPECT_EQ(parent.str(parent.counter_tracks[0].name), "memory heap");
  EXPECT_EQ(parent.str(parent.counter_tracks[0].group), "memory");
  EXPECT_EQ(parent.str(parent.counter_tracks[0].series), "heap");
}

// A trace of one process with one root slice and, optionally, an open flow end.
Trace process_with_open_end(int64_t pid, const char* name, bool outgoing, uint64_t id) {
  Trace trace;
  trace.run.pid = pid;
  RowIndex row =
      trace.slices.add(pid * 1000, 10, trace.intern(name), 0, trace.thread_track(pid, pid));
  trace.open_flow_ends.push_back({row, id, outgoing});
  trace.finalize();
  return trace;
}

TEST(TraceMerge, OneCallsOutgoingEndJoinsEveryChildInAnyOrder) {
  for (bool parent_first : {true, false}) {
    Trace merged = parent_first ? process_with_open_end(1, "spawn", true, 5)
                                : process_with_open_end(2, "child a", false, 5);
    opsight::trace::append_trace(merged, parent_first
                                             ? process_with_open_end(2, "child a", false, 5)
                                             : process_with_open_end(1, "spawn", true, 5));
    opsight::trace::append_trace(merged, process_with_open_end(3, "child b", false, 5));
    std::multiset<std::string> arrows;
    for (size_t row = 0; row < merged.flows.size(); ++row)
      arrows.insert(std::string(merged.str(merged.slices.name[merged.flows.slice_out[row]])) +
                    " -> " +
                    std::string(merged.str(merged.slices.name[merged.flows.slice_in[row]])));
    EXPECT_EQ(arrows, (std::multiset<std::string>{"spawn -> child a", "spawn -> child b"}))
        << "parent first: " << parent_first;
    EXPECT_EQ(merged.unjoined_flow_ends(), 0u);
  }
  // An incoming end with no outgoing one stays open, and is counted.
  Trace lone = process_with_open_end(4, "orphan", false, 9);
  opsight::trace::append_trace(lone, process_with_open_end(5, "other", true, 8));
  EXPECT_EQ(lone.flows.size(), 0u);
  EXPECT_EQ(lone.unjoined_flow_ends(), 2u);
}

TEST(TraceWindow, KeepsOnlyFlowsWhoseBothSlicesStay) {
  Trace trace;
  auto a = trace.thread_track(1, 1);
  RowIndex early = trace.slices.add(0, 10, trace.intern("early"), 0, a);
  RowIndex middle = trace.slices.add(100, 10, trace.intern("middle"), 0, a);
  RowIndex late = trace.slices.add(200, 10, trace.intern("late"), 0, a);
  trace.flows.add(early, middle, 1);
  trace.flows.add(middle, late, 2);
  trace.finalize();
  opsight::trace::keep_time_window(trace, 50, 300);
  ASSERT_EQ(trace.flows.size(), 1u);
  EXPECT_EQ(trace.flows.id[0], 2u);
  EXPECT_EQ(trace.str(trace.slices.name[trace.flows.slice_out[0]]), "middle");
  EXPECT_EQ(trace.str(trace.slices.name[trace.flows.slice_in[0]]), "late");
}

}  // namespace model_links
