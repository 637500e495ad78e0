// Async spans and flows end to end: recorded with opsight::begin_async / flow_out / flow_in
// on several threads (and in a child process), read back with the native reader, written
// and read again, and merged across processes with trace::append_trace.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include "io/io.hpp"
#include "opsight/opsight.hpp"
#include "record/record_and_read_for_tests.hpp"
#include "record/recorder.hpp"
#include "record/stream_writer.hpp"

namespace {

using opsight::trace::kNoRow;
using opsight::trace::RowIndex;
using opsight::trace::Trace;
using opsight::trace::TrackKind;

using opsight::record::testing::record_and_read;
using opsight::record::testing::row_named;

std::string name_of(const Trace& trace, RowIndex row) {
  return std::string(trace.str(trace.slices.name[row]));
}

// "from -> to" for every flow.
std::multiset<std::string> flow_arrows(const Trace& trace) {
  std::multiset<std::string> arrows;
  for (size_t row = 0; row < trace.flows.size(); ++row)
    arrows.insert(name_of(trace, trace.flows.slice_out[row]) + " -> " +
                  name_of(trace, trace.flows.slice_in[row]));
  return arrows;
}

TEST(AsyncSpans, BegunOnOneThreadEndedOnAnotherNestOnTheirIdsTrack) {
  Trace trace = record_and_read([] {
    opsight::begin_async("request 7", 7);
    opsight::begin_async("queued", 7);
    std::thread worker([] {
      opsight::end_async(7);  // closes "queued", the innermost of id 7
      opsight::begin_async("other request", 8);
      opsight::end_async(8);
      opsight::end_async(7);  // closes "request 7"
    });
    worker.join();
    opsight::begin_async("never ends", 9);
    opsight::end_async(12345);  // nothing open: counted
  });
  RowIndex request = row_named(trace, "request 7");
  RowIndex queued = row_named(trace, "queued");
  RowIndex other = row_named(trace, "other request");
  ASSERT_NE(request, kNoRow);
  ASSERT_NE(queued, kNoRow);
  ASSERT_NE(other, kNoRow);
  const auto& request_track = trace.tracks[trace.slices.track[request]];
  EXPECT_EQ(request_track.kind, TrackKind::kAsync);
  EXPECT_EQ(request_track.async_key, 7u);
  EXPECT_EQ(request_track.pid, getpid());
  EXPECT_EQ(trace.slices.track[queued], trace.slices.track[request]);
  EXPECT_NE(trace.slices.track[other], trace.slices.track[request]);
  EXPECT_EQ(trace.slices.parent[queued], request);
  EXPECT_EQ(trace.slices.depth[queued], 1);
  EXPECT_LE(trace.slices.end(queued), trace.slices.end(request));
  RowIndex never = row_named(trace, "never ends");
  ASSERT_NE(never, kNoRow);
  EXPECT_TRUE(trace.slices.flags[never] & opsight::trace::kSliceUnfinished);
  bool counted = false;
  for (const auto& [key, value] : trace.run.extra)
    if (key == "unmatched_async_ends") counted = value == "1";
  EXPECT_TRUE(counted);
}

// begin_async/end_async write one slot each (like a span's begin and end) unless the id is
// 2^40 or more, when the begin takes a second slot; both forms read back alike, also past
// the recorder's 4096-slot chunks.
TEST(AsyncSpans, SmallIdsTakeOneSlotPerEventLargeIdsTwoPerBeginAndBothReadAlike) {
  constexpr int kSpans = 3000;  // 6000+ slots: more than one chunk
  opsight::NameId name = opsight::register_name("request", "test");
  auto record_spans = [&](uint64_t first_id, size_t* bytes) {
    auto sink = std::make_unique<opsight::record::MemorySink>();
    EXPECT_FALSE(opsight::record::start_recording([&](std::string*) { return std::move(sink); }, {})
                     .has_value());
    for (int i = 0; i < kSpans; ++i) {
      opsight::begin_async(name, first_id + i);
      opsight::begin_async(name, first_id + i);
      opsight::end_async(first_id + i);
      opsight::end_async(first_id + i);
    }
    auto stopped = opsight::record::stop_recording();
    const std::string& file = static_cast<opsight::record::MemorySink&>(*stopped.sink).bytes();
    *bytes = file.size();
    auto result = opsight::io::read_native(file);
    EXPECT_TRUE(result.ok());
    EXPECT_FALSE(result.damage.has_value());
    return std::move(result.trace);
  };
  size_t small_bytes = 0;
  size_t large_bytes = 0;
  Trace small = record_spans(1, &small_bytes);
  Trace large = record_spans(uint64_t{1} << 40, &large_bytes);
  for (const Trace* trace : {&small, &large}) {
    ASSERT_EQ(trace->slices.size(), 2u * kSpans);
    size_t nested = 0;
    for (RowIndex row = 0; row < trace->slices.size(); ++row) {
      EXPECT_EQ(trace->tracks[trace->slices.track[row]].kind, TrackKind::kAsync);
      EXPECT_FALSE(trace->slices.flags[row] & opsight::trace::kSliceUnfinished);
      if (trace->slices.depth[row] == 1) {
        ++nested;
        EXPECT_LE(trace->slices.end(row), trace->slices.end(trace->slices.parent[row]));
      }
    }
    EXPECT_EQ(nested, size_t{kSpans});
  }
  // One slot (16 bytes) more per large-id begin; chunk headers and run info differ little.
  double extra_per_begin = static_cast<double>(large_bytes - small_bytes) / (2.0 * kSpans);
  EXPECT_NEAR(extra_per_begin, 16.0, 1.0);
}

TEST(Flows, LinkTheSubmitterToTheJobOnAnotherThreadAndSurviveARoundTrip) {
  Trace trace = record_and_read([] {
    opsight::Span submit("submit");
    uint64_t first = opsight::new_flow_id();
    uint64_t second = opsight::new_flow_id();
    EXPECT_NE(first, second);
    opsight::flow_out(first);
    opsight::flow_out(second);
    std::thread worker([first, second] {
      {
        opsight::Span job("job");
        opsight::flow_in(first);
      }
      opsight::flow_into_next(second);  // before the span that picks the work up
      opsight::Span later("later job");
    });
    worker.join();
    opsight::flow_in(opsight::new_flow_id());  // no partner: an open end, not an arrow
  });
  EXPECT_EQ(flow_arrows(trace),
            (std::multiset<std::string>{"submit -> job", "submit -> later job"}));
  EXPECT_EQ(trace.open_flow_ends.size(), 1u);
  EXPECT_NE(trace.slices.track[trace.flows.slice_out[0]],
            trace.slices.track[trace.flows.slice_in[0]]);

  auto again = opsight::io::read_native(opsight::io::write_native(trace));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(flow_arrows(again.trace), flow_arrows(trace));
  EXPECT_EQ(again.trace.open_flow_ends.size(), 1u);
}

TEST(Flows, AChainThroughAnAsyncSpanAndTheModelsTablesSurviveTheNativeFormat) {
  Trace trace;
  trace.run.pid = 5;
  auto thread = trace.thread_track(5, 5);
  auto batcher = trace.process_async_track(5, 77, "batch 77");
  RowIndex enqueue = trace.slices.add(100, 10, trace.intern("enqueue"), 0, thread);
  RowIndex waiting = trace.slices.add(105, 400, trace.intern("waiting"), 0, batcher);
  trace.slices.add(200, 50, trace.intern("padding"), 0, batcher);
  RowIndex reply = trace.slices.add(600, 10, trace.intern("reply"), 0, thread);
  trace.flows.add(enqueue, waiting, 3);  // a chain: one id, two rows
  trace.flows.add(waiting, reply, 3);
  trace.open_flow_ends.push_back({reply, 99, true});
  trace.process(5).name = trace.intern("server");
  trace.process(5).parent_pid = 1;
  trace.process(5).sort_index = 2;
  trace.process(5).labels.push_back(trace.intern("rank 0"));
  trace.tracks[thread].sort_index = 4;
  trace.instants.add(300, trace.intern("oom"), 0, thread, opsight::trace::InstantScope::kProcess);
  trace.counters.add(100, trace.counter_series(5, "memory", "heap", "bytes"), 1.0);
  trace.finalize();

  auto read = opsight::io::read_native(opsight::io::write_native(trace));
  ASSERT_TRUE(read.ok());
  const Trace& back = read.trace;
  EXPECT_EQ(flow_arrows(back),
            (std::multiset<std::string>{"enqueue -> waiting", "waiting -> reply"}));
  RowIndex padding = row_named(back, "padding");
  ASSERT_NE(padding, kNoRow);
  EXPECT_EQ(name_of(back, back.slices.parent[padding]), "waiting");
  EXPECT_EQ(back.tracks[back.slices.track[padding]].kind, TrackKind::kAsync);
  EXPECT_EQ(back.tracks[back.slices.track[padding]].async_key, 77u);
  ASSERT_EQ(back.open_flow_ends.size(), 1u);
  EXPECT_EQ(back.open_flow_ends[0].id, 99u);
  EXPECT_TRUE(back.open_flow_ends[0].outgoing);
  EXPECT_EQ(name_of(back, back.open_flow_ends[0].slice), "reply");
  Trace& mutable_back = read.trace;
  const auto& process = mutable_back.process(5);
  EXPECT_EQ(back.str(process.name), "server");
  EXPECT_EQ(process.parent_pid, 1);
  EXPECT_EQ(process.sort_index, 2);
  ASSERT_EQ(process.labels.size(), 1u);
  EXPECT_EQ(back.str(process.labels[0]), "rank 0");
  EXPECT_EQ(back.tracks[mutable_back.thread_track(5, 5)].sort_index, 4);
  ASSERT_EQ(back.instants.size(), 1u);
  EXPECT_EQ(back.instants.scope[0], opsight::trace::InstantScope::kProcess);
  ASSERT_EQ(back.counter_tracks.size(), 1u);
  EXPECT_EQ(back.str(back.counter_tracks[0].group), "memory");
  EXPECT_EQ(back.str(back.counter_tracks[0].series), "heap");
}

TEST(Flows, AChildProcessRootJoinsTheParentsCallWhenTheirTracesMerge) {
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_flow_child_" + std::to_string(getpid()) + ".opsight");
  const uint64_t flow = opsight::new_flow_id();
  // This thread records once before the fork, so that the child inherits its thread record
  // (the case where the child's main thread must take its own tid). The fork itself comes
  // outside any session: no recorder thread is alive (ThreadSanitizer forbids a child of a
  // multi-threaded process to start threads).
  record_and_read([] { opsight::Span warm_up("warm up"); });
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child starts its own session, like a process under opsight run.
    bool started = !opsight::record::start_recording(
                        [&](std::string* error) {
                          return opsight::record::open_file_sink(path.string(), error);
                        },
                        {})
                        .has_value();
    opsight::flow_into_next(flow);
    { opsight::Span root("child main"); }
    bool stopped = opsight::record::stop_recording().sink != nullptr;
    // _exit skips the static destructor that joins the stopped writer's thread (the stop
    // does not wait for it); ThreadSanitizer reports a thread never joined.
    opsight::record::join_finished_writer_threads();
    _exit(started && stopped ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The parent's call that handed the work off (recorded after the child here; the join
  // does not depend on the order).
  Trace parent = record_and_read([&] {
    opsight::Span spawn("spawn child");
    opsight::flow_out(flow);
  });
  auto child_read = opsight::io::read_trace_file(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(child_read.ok());
  EXPECT_EQ(parent.open_flow_ends.size(), 1u);
  EXPECT_EQ(child_read.trace.open_flow_ends.size(), 1u);
  // The child knows its parent.
  ASSERT_FALSE(child_read.trace.processes.empty());
  EXPECT_EQ(child_read.trace.process(child_read.trace.run.pid).parent_pid, getpid());

  opsight::trace::append_trace(parent, child_read.trace);
  EXPECT_EQ(flow_arrows(parent), (std::multiset<std::string>{"spawn child -> child main"}));
  EXPECT_EQ(parent.unjoined_flow_ends(), 0u);
  ASSERT_EQ(parent.flows.size(), 1u);
  RowIndex root = parent.flows.slice_in[0];
  EXPECT_EQ(parent.tracks[parent.slices.track[root]].pid, child);
  // The forking thread is the child's main thread: its tid is the child's pid, not the
  // parent thread's tid it had before the fork.
  EXPECT_EQ(parent.tracks[parent.slices.track[root]].tid, child);
}

TEST(Flows, WithoutASessionNothingIsRecordedAndIdsStayUnique) {
  opsight::flow_out(1);  // no session: does nothing, must not crash
  opsight::flow_in(1);
  EXPECT_FALSE(opsight::begin_async("x", 1));
  opsight::end_async(1);
  std::set<uint64_t> ids;
  for (int i = 0; i < 10000; ++i) ids.insert(opsight::new_flow_id());
  EXPECT_EQ(ids.size(), 10000u);
  EXPECT_EQ(ids.count(0), 0u);
}

}  // namespace
