// The streaming merge of a run's native files against the whole-trace merge it replaces
// (read_trace_files, then write_native): both outputs read back to the same trace, field
// by field (spans, their ids, args, flows, contexts, instants, counters, tracks with their
// overheads, processes, run info), on files of every form the readers know.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "io/io.hpp"
#include "io/native/native_test_files.hpp"

namespace {

using opsight::trace::ArgValue;
using opsight::trace::kNoRow;
using opsight::trace::RowIndex;
using opsight::trace::Trace;

std::string merge_test_track(const Trace& trace, opsight::trace::TrackId id) {
  const auto& track = trace.tracks[id];
  char text[160];
  std::snprintf(text, sizeof(text), "%d:%" PRId64 ":%" PRId64 ":%" PRIu64 ":",
                static_cast<int>(track.kind), track.pid, track.tid, track.async_key);
  return text + std::string(trace.str(track.name));
}

std::string merge_test_args(const Trace& trace, const opsight::trace::ArgTable& args,
                            const opsight::trace::Column<RowIndex>& begin, RowIndex row) {
  std::string text;
  for (RowIndex arg = begin[row]; arg < begin[row + 1]; ++arg) {
    const ArgValue& value = args.value[arg];
    text += " " + std::string(trace.str(args.key[arg])) + "=" +
            std::to_string(static_cast<int>(value.type)) + ":";
    text += value.type == opsight::trace::ArgType::kString
                ? std::string(trace.str(value.string_value))
            : value.type == opsight::trace::ArgType::kDouble ? std::to_string(value.double_value)
                                                             : std::to_string(value.int_value);
  }
  return text;
}

std::string merge_test_slice(const Trace& trace, RowIndex row, bool with_id) {
  if (row == kNoRow || row >= trace.slices.size()) return "-";
  std::string text = merge_test_track(trace, trace.slices.track[row]) + " " +
                     std::string(trace.str(trace.slices.name[row])) + "/" +
                     std::string(trace.str(trace.slices.category[row])) + " " +
                     std::to_string(trace.slices.ts[row]) + "+" +
                     std::to_string(trace.slices.dur[row]);
  if (with_id) {
    const auto& track = trace.tracks[trace.slices.track[row]];
    // An async span's id is derived from the thread it is written on: not compared.
    if (track.kind != opsight::trace::TrackKind::kAsync)
      text += " id=" + std::to_string(trace.slices.span_id[row]);
  }
  return text;
}

// Everything a merged trace holds, in an order that does not depend on the file's layout.
std::string merge_test_dump(const Trace& trace) {
  std::vector<std::string> lines;
  const auto& run = trace.run;
  lines.push_back("run " + run.command_line + "|" + run.host + "|" + run.opsight_version + "|" +
                  run.clock + "|" + std::to_string(run.pid) + "|" + run.trace_id.to_hex() +
                  "|offset=" + std::to_string(run.unix_offset_ns) + "|start=" +
                  std::to_string(run.start_unix_ns) + "|traced=" + std::to_string(run.traced_ns) +
                  "|overhead=" + std::to_string(run.overhead_ns) +
                  "|dropped=" + std::to_string(run.events_dropped) +
                  "|complete=" + std::to_string(run.complete) + "|" + run.source_format);
  std::string extra = "extra";
  for (const auto& entry : run.extra) extra += " " + entry.first + "=" + entry.second;
  lines.push_back(extra);
  std::vector<std::string> rows;
  for (const auto& process : trace.processes) {
    std::string labels;
    for (auto label : process.labels) labels += std::string(trace.str(label)) + ",";
    rows.push_back("process " + std::to_string(process.pid) + " " +
                   std::string(trace.str(process.name)) +
                   " parent=" + std::to_string(process.parent_pid) +
                   " sort=" + std::to_string(process.sort_index) + " labels=" + labels);
  }
  for (opsight::trace::TrackId id = 0; id < trace.tracks.size(); ++id)
    rows.push_back("track " + merge_test_track(trace, id) +
                   " overhead=" + std::to_string(trace.tracks[id].overhead_ns) +
                   " dropped=" + std::to_string(trace.tracks[id].events_dropped) +
                   " sort=" + std::to_string(trace.tracks[id].sort_index));
  for (RowIndex row = 0; row < trace.slices.size(); ++row)
    rows.push_back("slice " + merge_test_slice(trace, row, true) +
                   " depth=" + std::to_string(trace.slices.depth[row]) +
                   " flags=" + std::to_string(trace.slices.flags[row]) +
                   " parent=" + merge_test_slice(trace, trace.slices.parent[row], false) +
                   merge_test_args(trace, trace.slice_args, trace.slices.args_begin, row));
  for (RowIndex row = 0; row < trace.instants.size(); ++row)
    rows.push_back("instant " + merge_test_track(trace, trace.instants.track[row]) + " " +
                   std::string(trace.str(trace.instants.name[row])) + " " +
                   std::to_string(trace.instants.ts[row]) +
                   " scope=" + std::to_string(static_cast<int>(trace.instants.scope[row])) +
                   merge_test_args(trace, trace.instant_args, trace.instants.args_begin, row));
  for (RowIndex row = 0; row < trace.counters.size(); ++row) {
    const auto& counter = trace.counter_tracks[trace.counters.counter_track[row]];
    rows.push_back(
        "counter " + std::to_string(counter.pid) + " " + std::string(trace.str(counter.name)) +
        " " + std::string(trace.str(counter.group)) + " " + std::to_string(trace.counters.ts[row]) +
        " " + std::to_string(trace.counters.value[row]));
  }
  for (size_t row = 0; row < trace.flows.size(); ++row)
    rows.push_back("flow " + merge_test_slice(trace, trace.flows.slice_out[row], true) + " -> " +
                   merge_test_slice(trace, trace.flows.slice_in[row], true));
  for (const auto& end : trace.open_flow_ends)
    rows.push_back("open flow " + merge_test_slice(trace, end.slice, true) + " " +
                   std::to_string(end.id) + " " + std::to_string(end.outgoing) + " " +
                   std::to_string(end.joined));
  for (size_t row = 0; row < trace.span_contexts.size(); ++row)
    rows.push_back("context " + merge_test_slice(trace, trace.span_contexts.slice[row], true) +
                   " " + trace.span_contexts.trace_id[row].to_hex() + " " +
                   std::to_string(trace.span_contexts.parent_span_id[row]) + " " +
                   std::to_string(trace.span_contexts.trace_flags[row]));
  std::sort(rows.begin(), rows.end());
  lines.insert(lines.end(), rows.begin(), rows.end());
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

// A process's trace: nested spans with args, an instant, counters, a lane of its main
// thread, a process-level async track, a remote context, a flow within the process and the
// outgoing (or incoming) end of one to the other process.
Trace merge_test_process(int64_t pid, int64_t base_ns, bool flow_out) {
  Trace trace;
  trace.run.command_line = "python serve.py " + std::to_string(pid);
  trace.run.host = "gpu-7";
  trace.run.pid = pid;
  trace.run.trace_id = {0x0123456789abcdefULL ^ static_cast<uint64_t>(pid), 0xfedcba9876543210ULL};
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  trace.run.extra.emplace_back("gpu", "H200");
  trace.run.extra.emplace_back("unknown_names", "2");
  trace.process(pid).name = trace.intern("worker " + std::to_string(pid));
  trace.process(pid).parent_pid = 1;
  auto main_track = trace.thread_track(pid, pid);
  auto worker = trace.thread_track(pid, pid + 1);
  trace.tracks[main_track].name = trace.intern("main");
  trace.tracks[main_track].overhead_ns = 1234 + pid;
  trace.tracks[main_track].events_dropped = 3;
  auto request = trace.slices.add(base_ns + 1000, 9000, trace.intern("request"),
                                  trace.intern("http"), main_track);
  auto pre = trace.slices.add(base_ns + 2000, 3000, trace.intern("preprocess"), 0, main_track);
  auto model = trace.slices.add(base_ns + 5000, 4000, trace.intern("model"), trace.intern("torch"),
                                main_track);
  auto poll = trace.slices.add(base_ns + 1500, 500, trace.intern("poll"), 0, worker);
  trace.slice_args.add(request, trace.intern("batch"), ArgValue::of_int(8));
  trace.slice_args.add(request, trace.intern("route"),
                       ArgValue::of_string(trace.intern("/v1/predict")));
  trace.slice_args.add(model, trace.intern("flops"), ArgValue::of_double(2.5e9));
  trace.slice_args.add(model, trace.intern("cached"), ArgValue::of_bool(true));
  auto lane = trace.async_track(pid, pid, 77, "task 77");
  trace.slices.add(base_ns + 3000, 700, trace.intern("await"), 0, lane);
  auto stream = trace.process_async_track(pid, 9, "GPU 0 stream 9");
  trace.slices.add(base_ns + 5200, 300, trace.intern("kernel"), trace.intern("cuda"), stream);
  auto instant = trace.instants.add(base_ns + 6000, trace.intern("cache miss"), 0, main_track);
  trace.instant_args.add(instant, trace.intern("key"), ArgValue::of_int(99));
  trace.counters.add(base_ns + 1000, trace.counter_track(pid, "rss_bytes", "bytes"), 1.5e6);
  trace.counters.add(base_ns + 9000, trace.counter_track(pid, "rss_bytes", "bytes"), 2.5e6);
  trace.flows.add(pre, poll, 0xabc0 + static_cast<uint64_t>(pid), 0, 0);
  trace.span_contexts.add(request, {0x1111, 0x2222}, 0x3333, 1);
  opsight::trace::OpenFlowEnd end;
  end.slice = flow_out ? model : request;
  end.id = 0x5151;
  end.outgoing = flow_out;
  trace.open_flow_ends.push_back(end);
  trace.finalize();
  return trace;
}

// A file as the recorder writes it, slot by slot: a clock of 2.5 ticks per ns, syncs
// that drift, packed async events, inline names, a span the program gave an id, a span
// left open, and an event written before the session began (stale).
std::string merge_test_recorder_file(int64_t pid) {
  using namespace opsight::io::native_test_files;
  using opsight::format::SlotKind;
  using namespace opsight::format;
  std::string out;
  append_file_header(out);
  append_run_info_chunk(out, {{"command_line", "python child.py"},
                              {"pid", std::to_string(pid)},
                              {"process_name", "child"},
                              {"ticks_per_second", "2500000000"},
                              {"event_cost_ns", "7.5"},
                              {"trace_id", "00000000000000aa00000000000000bb"}});
  // The session starts at tick 1'000'000 (400 us); three syncs, the middle one off the line.
  ClockSync syncs[3] = {{1'000'000, 1'000'400'000, 1'700'000'001'000'400'000},
                        {3'500'000, 1'001'400'100, 1'700'000'001'001'400'100},
                        {26'000'000, 1'010'400'000, 1'700'000'001'010'400'000}};
  append_chunk(out, ChunkType::kClockSync,
               std::string_view(reinterpret_cast<const char*>(syncs), sizeof(syncs)));
  std::string names;
  append_pod(names, NameRecordHeader{1, 0, 4, 3, 0, 0});
  names += "step";
  names += "app";
  append_pod(names, NameRecordHeader{2, 0, 6, 0, 0, 0});
  names += "kernel";
  append_chunk(out, ChunkType::kNames, names);
  std::string record;
  append_pod(record, ThreadRecordHeader{3, 6, pid, pid + 5});
  record += "loader";
  append_chunk(out, ChunkType::kThread, record);
  std::vector<Slot> slots = concat({
      {slot(900'000, SlotKind::kBegin, 1)},  // stale: before the session
      {slot(950'000, SlotKind::kEnd)},
      {slot(1'100'000, SlotKind::kBegin, 1)},
      int_arg("items", 12),
      named_begin(1'200'013, "inline child"),
      {slot(0xfeedULL, SlotKind::kSpanId)},
      // join_session_trace in the child: binds to the root ("step"), merged either way.
      span_context(0, 0x7777, 0x8888, 1, opsight::format::kSpanContextOnRoot),
      {packed_slot(SlotKind::kAsyncBeginPacked, 2 | (uint64_t{5} << 24), 1'250'000)},
      {slot(1'300'007, SlotKind::kEnd)},
      {packed_slot(SlotKind::kAsyncEndPacked, 5, 1'400'000)},
      counter(1'500'000, "queue", 4.0),
      {slot(2'000'000, SlotKind::kEnd)},
      {slot(2'100'000, SlotKind::kBegin, 1)},  // never ends
      {slot(2'600'000, SlotKind::kInstant, 1)},
  });
  // Two chunks: the decoder's state (packed ticks' reference, begins) carries across.
  size_t half = 16;  // after the counter: chunks hold whole events
  for (int part = 0; part < 2; ++part) {
    size_t from = part == 0 ? 0 : half, to = part == 0 ? half : slots.size();
    std::string events;
    append_pod(events, EventsHeader{3, static_cast<uint32_t>(to - from), from});
    for (size_t i = from; i < to; ++i) append_pod(events, slots[i]);
    append_chunk(out, ChunkType::kEvents, events);
  }
  std::string stats;
  append_pod(stats, SessionStats{26'000'000, 1, 4, 7.5});
  append_pod(stats, ThreadStats{3, 0, 14, 4, 2500});
  append_chunk(out, ChunkType::kStats, stats);
  return out;
}

class MergeNativeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("opsight_merge_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string path(const std::string& name) const { return (directory_ / name).string(); }

  // The whole-trace merge written and read back, and the streaming merge read back.
  void expect_same_merge(const std::vector<std::string>& paths) {
    auto whole = opsight::io::read_trace_files(paths);
    ASSERT_TRUE(whole.ok()) << *whole.error;
    auto whole_read = opsight::io::read_native(opsight::io::write_native(whole.trace));
    ASSERT_TRUE(whole_read.ok());
    opsight::io::StringSink sink;
    auto streamed = opsight::io::merge_native_files(paths, sink);
    ASSERT_FALSE(streamed.error) << *streamed.error;
    EXPECT_EQ(streamed.damage, whole.damage);
    auto streamed_read = opsight::io::read_native(sink.out);
    ASSERT_TRUE(streamed_read.ok()) << streamed_read.error->message;
    EXPECT_FALSE(streamed_read.damage) << streamed_read.damage->message;
    EXPECT_EQ(merge_test_dump(streamed_read.trace), merge_test_dump(whole_read.trace));
    EXPECT_GT(streamed_read.trace.slices.size(), 0u);
  }

  std::filesystem::path directory_;
};

TEST_F(MergeNativeFiles, ReadsBackAsTheWholeMerge) {
  std::string first = path("trace.42.opsight"), second = path("trace.43000.opsight"),
              third = path("trace.51.opsight");
  ASSERT_FALSE(opsight::io::write_trace_file(merge_test_process(42, 1'000'000'000, true), first));
  ASSERT_FALSE(
      opsight::io::write_trace_file(merge_test_process(43000, 1'000'050'000, false), second));
  ASSERT_FALSE(opsight::io::write_file_bytes(third, merge_test_recorder_file(51)));
  expect_same_merge({first, second, third});
  expect_same_merge({third, first});
  expect_same_merge({second});
}

// Pairs given to the merge join its run info, a key already there replaced (what
// `opsight run`'s exports did, noted in a run merged streaming).
TEST_F(MergeNativeFiles, AddsTheRunInfoItIsGivenReplacingAKeyAlreadyThere) {
  std::string first = path("trace.42.opsight");
  opsight::trace::Trace process = merge_test_process(42, 1'000'000'000, true);
  process.run.extra.emplace_back("export:otlp=http://a", "1 1 0");
  ASSERT_FALSE(opsight::io::write_trace_file(process, first));
  opsight::io::StringSink sink;
  auto merged = opsight::io::merge_native_files(
      {first}, sink, {{"export:otlp=http://a", "9 7 2"}, {"export:zipkin=http://b", "9 9 0"}});
  ASSERT_FALSE(merged.error) << *merged.error;
  auto read = opsight::io::read_native(sink.out);
  ASSERT_TRUE(read.ok());
  std::vector<std::pair<std::string, std::string>> exports;
  for (const auto& entry : read.trace.run.extra)
    if (entry.first.starts_with("export:")) exports.push_back(entry);
  EXPECT_EQ(exports, (std::vector<std::pair<std::string, std::string>>{
                         {"export:otlp=http://a", "9 7 2"}, {"export:zipkin=http://b", "9 9 0"}}));
}

TEST_F(MergeNativeFiles, ADamagedFileIsMergedAsFarAsItIsWholeAndNamed) {
  std::string first = path("trace.42.opsight"), cut = path("trace.43.opsight");
  ASSERT_FALSE(opsight::io::write_trace_file(merge_test_process(42, 1'000'000'000, true), first));
  std::string bytes = opsight::io::write_native(merge_test_process(43, 1'000'000'000, false));
  ASSERT_FALSE(opsight::io::write_file_bytes(cut, bytes.substr(0, bytes.size() * 2 / 3)));
  expect_same_merge({first, cut});
  opsight::io::StringSink sink;
  auto result = opsight::io::merge_native_files({first, cut}, sink);
  ASSERT_EQ(result.damage.size(), 1u);
  EXPECT_EQ(result.damage[0].rfind(cut + ": at byte ", 0), 0u) << result.damage[0];
}

TEST_F(MergeNativeFiles, NamesTheFileItCannotUse) {
  std::string first = path("trace.42.opsight"), other = path("notes.opsight");
  ASSERT_FALSE(opsight::io::write_trace_file(merge_test_process(42, 1'000'000'000, true), first));
  ASSERT_FALSE(opsight::io::write_file_bytes(other, "hello, not a trace"));
  opsight::io::StringSink sink;
  auto missing = opsight::io::merge_native_files({first, path("missing.opsight")}, sink);
  ASSERT_TRUE(missing.error);
  EXPECT_NE(missing.error->find("missing.opsight: cannot open"), std::string::npos)
      << *missing.error;
  auto foreign = opsight::io::merge_native_files({first, other}, sink);
  ASSERT_TRUE(foreign.error);
  EXPECT_NE(foreign.error->find("notes.opsight: at byte 0: not an opsight file"), std::string::npos)
      << *foreign.error;
  EXPECT_TRUE(opsight::io::merge_native_files({}, sink).error);
}

}  // namespace
