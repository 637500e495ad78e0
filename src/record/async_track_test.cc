// Async tracks end to end: spans recorded with opsight::switch_track, read back with the
// native reader (this test binary links io; the record library does not), then written
// and read again as .opsight and Chrome JSON. Also the merge of traces that two processes
// recorded (trace::append_trace over what they wrote).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "format/chunk_codec.hpp"
#include "io/io.hpp"
#include "opsight/opsight.hpp"
#include "record/recorder.hpp"
#include "record/slow_sink_for_tests.hpp"
#include "record/stream_writer.hpp"

namespace {

using opsight::trace::kNoRow;
using opsight::trace::Trace;
using opsight::trace::TrackId;

constexpr uint64_t kTaskA = 0x7f00'0000'1000;
constexpr uint64_t kTaskB = 0x7f00'0000'2000;

// Records `body` into memory and returns the native bytes.
std::string record_bytes(const std::function<void()>& body,
                         opsight::record::RecordingOptions options = {}) {
  auto sink = std::make_unique<opsight::record::MemorySink>();
  EXPECT_FALSE(opsight::record::start_recording([&](std::string*) { return std::move(sink); },
                                                std::move(options))
                   .has_value());
  body();
  auto stopped = opsight::record::stop_recording();
  EXPECT_TRUE(stopped.sink);
  if (!stopped.sink) return {};
  return std::move(static_cast<opsight::record::MemorySink&>(*stopped.sink).bytes());
}

Trace read(std::string_view bytes) {
  auto result = opsight::io::read_native(bytes);
  EXPECT_TRUE(result.ok()) << (result.error ? result.error->message : "");
  EXPECT_FALSE(result.damage.has_value()) << result.damage->message;
  return std::move(result.trace);
}

// One line per slice, ordered by track label then start: name, track, depth, parent's
// name, unfinished, args.
std::string describe(const Trace& trace) {
  std::multimap<std::pair<std::string, int64_t>, std::string> lines;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    TrackId track = trace.slices.track[row];
    std::string label = trace.track_label(track);
    std::string line = std::string(trace.str(trace.slices.name[row])) + " on " + label +
                       (trace.tracks[track].is_async() ? " (async)" : " (thread)") +
                       " depth=" + std::to_string(trace.slices.depth[row]);
    if (trace.slices.parent[row] != kNoRow)
      line += " in " + std::string(trace.str(trace.slices.name[trace.slices.parent[row]]));
    if (trace.slices.flags[row] & opsight::trace::kSliceUnfinished) line += " unfinished";
    for (auto arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1]; ++arg)
      line += " " + std::string(trace.str(trace.slice_args.key[arg])) + "=" +
              std::to_string(trace.slice_args.value[arg].int_value);
    lines.emplace(std::pair{label, trace.slices.ts[row]}, line + "\n");
  }
  std::string text;
  for (const auto& [key, line] : lines) text += line;
  return text;
}

const opsight::trace::Track* track_named(const Trace& trace, std::string_view name) {
  for (TrackId id = 0; id < trace.tracks.size(); ++id)
    if (trace.str(trace.tracks[id].name) == name) return &trace.tracks[id];
  return nullptr;
}

// Two tasks interleaved on one thread inside a span of the thread itself:
//   thread: [work ........................................]
//   task A:      [a_outer ....[a_inner]..........]
//   task B:            [b_outer [b_inner ....]........]
void record_two_interleaved_tasks() {
  opsight::begin(std::string_view("work"));
  opsight::switch_track(kTaskA, "asyncio Task-1 (a)");
  opsight::begin(std::string_view("a_outer"));
  opsight::add_arg("request", 1);
  opsight::switch_track(kTaskB, "asyncio Task-2 (b)");
  opsight::begin(std::string_view("b_outer"));
  opsight::add_arg("request", 2);
  opsight::begin(std::string_view("b_inner"));
  opsight::switch_track(kTaskA);
  opsight::begin(std::string_view("a_inner"));
  opsight::instant("a_checkpoint");
  opsight::end();  // a_inner
  opsight::switch_track(kTaskB);
  opsight::end();  // b_inner
  opsight::switch_track(kTaskA);
  opsight::end();  // a_outer
  opsight::switch_track(kTaskB);
  opsight::end();  // b_outer
  opsight::switch_track(0);
  opsight::end();  // work
}

constexpr std::string_view kTwoTasks =
    "a_outer on asyncio Task-1 (a) (async) depth=0 request=1\n"
    "a_inner on asyncio Task-1 (a) (async) depth=1 in a_outer\n"
    "b_outer on asyncio Task-2 (b) (async) depth=0 request=2\n"
    "b_inner on asyncio Task-2 (b) (async) depth=1 in b_outer\n"
    "work on thread THREAD (thread) depth=0\n";

std::string expected_two_tasks(int64_t tid) {
  std::string text(kTwoTasks);
  text.replace(text.find("THREAD"), 6, std::to_string(tid));
  return text;
}

TEST(AsyncTracks, InterleavedTasksOnOneThreadGetATrackEachAndNestOnIt) {
  std::string bytes = record_bytes(record_two_interleaved_tasks);
  Trace trace = read(bytes);
  ASSERT_EQ(trace.slices.size(), 5u);
  const int64_t tid = trace.tracks[trace.slices.track[0]].tid;
  EXPECT_EQ(describe(trace), expected_two_tasks(tid));

  const auto* task_a = track_named(trace, "asyncio Task-1 (a)");
  const auto* task_b = track_named(trace, "asyncio Task-2 (b)");
  ASSERT_TRUE(task_a && task_b);
  EXPECT_EQ(task_a->async_key, kTaskA);
  EXPECT_EQ(task_b->async_key, kTaskB);
  for (const auto& track : trace.tracks) {  // every track belongs to the recording thread
    EXPECT_EQ(track.tid, tid);
    EXPECT_EQ(track.pid, getpid());
  }
  // The instant sits on task A's track; spans end after they begin, in the right order.
  ASSERT_EQ(trace.instants.size(), 1u);
  EXPECT_EQ(trace.str(trace.tracks[trace.instants.track[0]].name), "asyncio Task-1 (a)");
  for (opsight::trace::RowIndex row = 0; row < trace.slices.size(); ++row) {
    if (trace.slices.parent[row] != kNoRow) {
      EXPECT_LE(trace.slices.end(row), trace.slices.end(trace.slices.parent[row]));
    }
  }
  // The thread's overhead stays on its own track.
  EXPECT_GT(trace.tracks[trace.slices.track[0]].events_recorded, 0u);
  EXPECT_EQ(task_a->events_recorded, 0u);

  // A switch without a name is one slot whose ticks hold the key.
  size_t unnamed_switches = 0;
  uint64_t offset = sizeof(opsight::format::FileHeader);
  std::string problem;
  while (auto chunk = opsight::format::read_chunk(bytes, offset, &problem)) {
    offset = chunk->payload_offset + chunk->payload.size();
    if (chunk->type != opsight::format::ChunkType::kEvents) continue;
    const char* slots = chunk->payload.data() + sizeof(opsight::format::EventsHeader);
    size_t count = (chunk->payload.size() - sizeof(opsight::format::EventsHeader)) / 16;
    for (size_t i = 0; i < count;) {
      opsight::format::Slot slot;
      std::memcpy(&slot, slots + i * 16, sizeof(slot));
      if (slot.kind == static_cast<uint8_t>(opsight::format::SlotKind::kTrack) && slot.id == 0) {
        EXPECT_EQ(slot.extra_slots, 0);
        EXPECT_TRUE(slot.ticks == kTaskA || slot.ticks == kTaskB || slot.ticks == 0);
        ++unnamed_switches;
      }
      i += 1u + slot.extra_slots;
    }
  }
  EXPECT_EQ(unnamed_switches, 5u);
}

TEST(AsyncTracks, RoundTripThroughNativeAndChromeJsonKeepsTheTracks) {
  Trace trace = read(record_bytes(record_two_interleaved_tasks));
  const std::string expected = describe(trace);

  Trace native = read(opsight::io::write_native(trace));
  EXPECT_EQ(describe(native), expected);
  const auto* native_task = track_named(native, "asyncio Task-2 (b)");
  ASSERT_TRUE(native_task);
  EXPECT_EQ(native_task->async_key, kTaskB);

  std::string json = opsight::io::write_chrome_json(trace);
  auto chrome = opsight::io::read_chrome_json(json);
  ASSERT_TRUE(chrome.ok()) << chrome.error->message;
  // The Chrome reader renests by time; the nesting is the same.
  EXPECT_EQ(describe(chrome.trace), expected);
  const auto* chrome_task = track_named(chrome.trace, "asyncio Task-1 (a)");
  ASSERT_TRUE(chrome_task);
  EXPECT_EQ(chrome_task->async_key, kTaskA);
  EXPECT_EQ(chrome_task->tid, trace.tracks[0].tid);
}

TEST(AsyncTracks, AKeyNamedAgainStartsANewTrackAndClosesTheOldOne) {
  Trace trace = read(record_bytes([] {
    opsight::switch_track(kTaskA, "first task");
    opsight::begin(std::string_view("abandoned"));  // its task is gone: never ended
    opsight::begin(std::string_view("done"));
    opsight::end();
    opsight::switch_track(0);
    opsight::switch_track(kTaskA, "second task");  // the address was reused
    opsight::begin(std::string_view("second_1"));
    opsight::end();
    opsight::switch_track(0);
    opsight::switch_track(kTaskA);  // later resumes of the second task
    opsight::begin(std::string_view("second_2"));
    opsight::end();
    opsight::switch_track(0);
  }));
  EXPECT_EQ(describe(trace),
            "abandoned on first task (async) depth=0 unfinished\n"
            "done on first task (async) depth=1 in abandoned\n"
            "second_1 on second task (async) depth=0\n"
            "second_2 on second task (async) depth=0\n");
  size_t async_tracks = 0;
  for (const auto& track : trace.tracks) {
    if (!track.is_async()) continue;
    ++async_tracks;
    EXPECT_EQ(track.async_key, kTaskA);
  }
  EXPECT_EQ(async_tracks, 2u);
  // The write of the model keeps the two tracks of the one key apart.
  EXPECT_EQ(describe(read(opsight::io::write_native(trace))), describe(trace));
}

TEST(AsyncTracks, SwitchesWhilePausedKeepEndsOnTheirTracks) {
  std::string bytes = record_bytes([] {
    opsight::begin(std::string_view("thread_span"));
    opsight::switch_track(kTaskA, "task");
    opsight::begin(std::string_view("task_span"));
    opsight::record::pause_recording();
    opsight::switch_track(0);
    EXPECT_FALSE(opsight::begin(std::string_view("not_recorded")));
    opsight::end();  // thread_span: ends are recorded while paused
    opsight::switch_track(kTaskA);
    opsight::end();  // task_span
    opsight::switch_track(0);
    opsight::record::resume_recording();
    opsight::switch_track(kTaskA);
    opsight::begin(std::string_view("after_resume"));
    opsight::end();
    opsight::switch_track(0);
  });
  Trace trace = read(bytes);
  const int64_t tid = trace.tracks.empty() ? 0 : trace.tracks[0].tid;
  EXPECT_EQ(describe(trace),
            "task_span on task (async) depth=0\n"
            "after_resume on task (async) depth=0\n"
            "thread_span on thread " +
                std::to_string(tid) + " (thread) depth=0\n");
}

TEST(AsyncTracks, SpansOpenOnATaskTrackAtStopAreUnfinished) {
  Trace trace = read(record_bytes([] {
    opsight::switch_track(kTaskA, "task");
    opsight::begin(std::string_view("open_at_stop"));
    opsight::begin(std::string_view("closed"));
    opsight::end();
    opsight::switch_track(0);
    opsight::begin(std::string_view("thread_later"));
    opsight::end();
  }));
  opsight::end();  // after the session: ignored by it
  ASSERT_EQ(trace.slices.size(), 3u);
  const int64_t tid = trace.tracks[trace.slices.track[2]].tid;
  EXPECT_EQ(describe(trace),
            "open_at_stop on task (async) depth=0 unfinished\n"
            "closed on task (async) depth=1 in open_at_stop\n"
            "thread_later on thread " +
                std::to_string(tid) + " (thread) depth=0\n");
  // It ends at the thread's last event: after the thread's own later span.
  EXPECT_EQ(trace.str(trace.slices.name[0]), "open_at_stop");
  EXPECT_EQ(trace.str(trace.slices.name[2]), "thread_later");
  EXPECT_GE(trace.slices.end(0), trace.slices.end(2));
}

TEST(AsyncTracks, WithoutASessionSwitchingDoesNothingAndASessionStartsOnTheThreadTrack) {
  opsight::switch_track(kTaskA, "before any session");  // no session: ignored
  Trace trace = read(record_bytes([] {
    opsight::begin(std::string_view("on_thread"));
    opsight::end();
  }));
  ASSERT_EQ(trace.slices.size(), 1u);
  EXPECT_FALSE(trace.tracks[trace.slices.track[0]].is_async());
  // A session does not inherit the last one's track: each thread starts on its own.
  Trace second = read(record_bytes([] {
    opsight::switch_track(kTaskB, "task");
    opsight::begin(std::string_view("task_span"));
    opsight::end();
  }));
  ASSERT_EQ(second.slices.size(), 1u);
  EXPECT_TRUE(second.tracks[second.slices.track[0]].is_async());
  Trace third = read(record_bytes([] {
    opsight::begin(std::string_view("on_thread_again"));
    opsight::end();
  }));
  ASSERT_EQ(third.slices.size(), 1u);
  EXPECT_FALSE(third.tracks[third.slices.track[0]].is_async());
  opsight::switch_track(0);
}

TEST(AsyncTracks, ThreadsSwitchingConcurrentlyKeepTheirOwnTracks) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 500;
  Trace trace = read(record_bytes([] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([] {
        for (int round = 0; round < kRounds; ++round) {
          opsight::switch_track(kTaskA, round == 0 ? "a" : "");
          opsight::begin(std::string_view("a"));
          opsight::switch_track(kTaskB, round == 0 ? "b" : "");
          opsight::begin(std::string_view("b"));
          opsight::switch_track(kTaskA);
          opsight::end();
          opsight::switch_track(kTaskB);
          opsight::end();
          opsight::switch_track(0);
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }));
  ASSERT_EQ(trace.slices.size(), size_t{2} * kThreads * kRounds);
  std::map<std::pair<int64_t, uint64_t>, size_t> slices_per_lane;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    const auto& track = trace.tracks[trace.slices.track[row]];
    std::string_view name = trace.str(trace.slices.name[row]);
    EXPECT_EQ(trace.str(track.name), name);
    EXPECT_EQ(track.async_key, name == "a" ? kTaskA : kTaskB);
    EXPECT_EQ(trace.slices.depth[row], 0);
    EXPECT_EQ(trace.slices.flags[row], 0);
    ++slices_per_lane[{track.tid, track.async_key}];
  }
  EXPECT_EQ(slices_per_lane.size(), size_t{2} * kThreads);
  for (const auto& [lane, count] : slices_per_lane) EXPECT_EQ(count, size_t{kRounds});
}

TEST(AsyncTracks, EndsAndSwitchesDroppedForLackOfMemoryAreReplayedOnTheirTracks) {
  opsight::record::RecordingOptions options;
  options.buffer_bytes = 1;  // two chunks in flight
  options.flush_interval_ms = 1;
  auto sink = std::make_unique<opsight::record::SlowSinkForTests>();
  ASSERT_FALSE(
      opsight::record::start_recording([&](std::string*) { return std::move(sink); }, options));
  // Chunk boundaries fall anywhere in this pattern; for long enough that the slow writer
  // hands chunks back several times while the thread is still recording.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 1000; ++i) {
      opsight::Span thread_span("t");
      opsight::switch_track(kTaskA, i == 0 ? "task a" : "");
      bool a_began = opsight::begin(std::string_view("a"));
      opsight::switch_track(kTaskB, i == 0 ? "task b" : "");
      bool b_began = opsight::begin(std::string_view("b"));
      opsight::switch_track(kTaskA);
      if (a_began) opsight::end();
      opsight::switch_track(kTaskB);
      if (b_began) opsight::end();
      opsight::switch_track(0);
    }
  }
  auto stopped = opsight::record::stop_recording();
  ASSERT_TRUE(stopped.sink);
  EXPECT_GT(stopped.events_dropped, 0u);
  Trace trace = read(static_cast<opsight::record::MemorySink&>(*stopped.sink).bytes());
  size_t seen[3] = {0, 0, 0};
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    const auto& track = trace.tracks[trace.slices.track[row]];
    std::string_view name = trace.str(trace.slices.name[row]);
    uint64_t expected_key = name == "a" ? kTaskA : name == "b" ? kTaskB : 0;
    ASSERT_EQ(track.async_key, expected_key) << name << " landed on the wrong track";
    ASSERT_EQ(trace.slices.depth[row], 0) << name << " nests inside an older span";
    ++seen[name == "a" ? 0 : name == "b" ? 1 : 2];
  }
  EXPECT_GT(seen[0], 0u);
  EXPECT_GT(seen[1], 0u);
  EXPECT_GT(seen[2], 0u);
}

// ---- Traces of several processes merged into one --------------------------------------

void record_request(const char* name) {
  opsight::Span request(name);
  request.arg("pid", static_cast<int64_t>(getpid()));
  opsight::Span step("step");
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

TEST(MergedTraces, TwoProcessesRecordingsMergeWithTheirNestingAndTotals) {
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_merge_child_" + std::to_string(getpid()) + ".opsight");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    opsight::record::RecordingOptions options;
    options.run_info.emplace_back("command_line", "child");
    bool started = !opsight::record::start_recording(
                        [&](std::string* error) {
                          return opsight::record::open_file_sink(path.string(), error);
                        },
                        options)
                        .has_value();
    record_request("child_request");
    opsight::switch_track(kTaskA, "child task");
    record_request("child_task_request");
    opsight::switch_track(0);
    bool stopped = opsight::record::stop_recording().sink != nullptr;
    // _exit skips the static destructor that joins the stopped writer's thread (the stop
    // does not wait for it); ThreadSanitizer reports a thread never joined.
    opsight::record::join_finished_writer_threads();
    _exit(started && stopped ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  opsight::record::RecordingOptions options;
  options.run_info.emplace_back("command_line", "parent");
  Trace parent = read(record_bytes(
      [] {
        record_request("parent_request");
        record_request("parent_request");
      },
      options));
  auto child_read = opsight::io::read_trace_file(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(child_read.ok());
  const Trace& child_trace = child_read.trace;

  Trace merged = read(opsight::io::write_native(parent));  // a copy of the parent's trace
  opsight::trace::append_trace(merged, child_trace);
  EXPECT_EQ(merged.slices.size(), parent.slices.size() + child_trace.slices.size());
  EXPECT_EQ(merged.processes.size(), 2u);
  EXPECT_EQ(merged.run.command_line, "parent");
  EXPECT_EQ(merged.run.pid, getpid());
  EXPECT_EQ(merged.run.overhead_ns, parent.run.overhead_ns + child_trace.run.overhead_ns);
  EXPECT_TRUE(merged.run.complete);
  // The traced time spans both recordings: the child's came first.
  auto [parent_start, parent_end] = parent.time_bounds();
  auto [child_start, child_end] = child_trace.time_bounds();
  EXPECT_GE(merged.run.traced_ns, parent_end - child_start);
  EXPECT_LT(child_end, parent_start);

  std::map<std::string, int64_t> total_by_name;
  for (size_t row = 0; row < merged.slices.size(); ++row) {
    std::string name(merged.str(merged.slices.name[row]));
    total_by_name[name] += merged.slices.dur[row];
    const auto& track = merged.tracks[merged.slices.track[row]];
    if (name == "step") {
      ASSERT_NE(merged.slices.parent[row], kNoRow);
      EXPECT_EQ(merged.slices.depth[row], 1);
      // A step's parent is a request of the same process and track.
      auto parent_row = merged.slices.parent[row];
      EXPECT_EQ(merged.slices.track[parent_row], merged.slices.track[row]);
      EXPECT_NE(std::string(merged.str(merged.slices.name[parent_row])).find("request"),
                std::string::npos);
    } else {
      EXPECT_EQ(merged.slices.depth[row], 0);
      // Its pid arg says which process recorded it; the track says the same.
      auto arg = merged.slices.args_begin[row];
      ASSERT_LT(arg, merged.slices.args_begin[row + 1]);
      EXPECT_EQ(merged.slice_args.value[arg].int_value, track.pid);
      EXPECT_EQ(track.pid, name.starts_with("child") ? child : getpid());
      EXPECT_EQ(track.is_async(), name == "child_task_request");
    }
  }
  std::map<std::string, int64_t> expected;
  for (const Trace* part : {static_cast<const Trace*>(&parent), &child_trace})
    for (size_t row = 0; row < part->slices.size(); ++row)
      expected[std::string(part->str(part->slices.name[row]))] += part->slices.dur[row];
  EXPECT_EQ(total_by_name, expected);
}

}  // namespace
