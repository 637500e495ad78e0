// The native format's time index (docs/native-format.md, "Time index"): written at the end
// of a file, read back, rebuilt by a scan where a file has none (a process killed
// mid-session, a file older than the index) or a damaged one; and a window read equals the
// whole file read and cut to the window, span for span.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "format/chunk_codec.hpp"
#include "format/chunk_index.hpp"
#include "io/io.hpp"
#include "io/native/native_test_files.hpp"

namespace {

using opsight::format::ChunkType;
using opsight::io::ReadResult;
using opsight::io::TimeWindow;
using opsight::trace::ArgValue;
using opsight::trace::kNoRow;
using opsight::trace::RowIndex;
using opsight::trace::Trace;

// Three threads of nested spans (with args, instants and flows between threads), a root
// span over all of one thread's run, spans open across chunk boundaries, counters and
// async spans: several kEvents chunks per thread (the model writer's chunks hold 4096
// slots).
Trace long_trace(int requests = 6000, bool with_root = true) {
  Trace trace;
  trace.run.pid = 5;
  trace.run.trace_id = {0x1111, 0x2222};
  auto main_track = trace.thread_track(5, 5);
  auto worker = trace.thread_track(5, 6);
  auto idle = trace.thread_track(5, 7);
  trace.tracks[main_track].name = trace.intern("main");
  trace.tracks[worker].name = trace.intern("worker");
  trace.tracks[main_track].overhead_ns = 777;
  const int64_t step = 1000;
  // The whole run, on the main thread: every window needs its begin.
  if (with_root) {
    auto root = trace.slices.add(0, requests * step + 10, trace.intern("serve"),
                                 trace.intern("app"), main_track);
    trace.slice_args.add(root, trace.intern("port"), ArgValue::of_int(80));
  }
  auto async_track = trace.process_async_track(5, 0xabc, "requests");
  auto lane = trace.async_track(5, 6, 0x77, "task");  // a lane of the worker thread
  for (int i = 0; i < requests; ++i) {
    int64_t t = 1 + i * step;
    auto request = trace.slices.add(t, 900, trace.intern("request"), 0, main_track);
    trace.slice_args.add(request, trace.intern("i"), ArgValue::of_int(i));
    auto model = trace.slices.add(t + 100, 700, trace.intern("model"), 0, main_track);
    trace.slice_args.add(model, trace.intern("route"),
                         ArgValue::of_string(trace.intern(i % 2 ? "/a" : "/b")));
    if (i % 3 == 0) {
      auto poll = trace.slices.add(t + 200, 300, trace.intern("poll"), 0, worker);
      trace.flows.add(model, poll, 1000 + i, 0, 0);
    }
    if (i % 7 == 0) {
      auto hit = trace.instants.add(t + 150, trace.intern("cache hit"), 0, main_track);
      trace.instant_args.add(hit, trace.intern("key"), ArgValue::of_int(i));
    }
    if (i % 5 == 0) trace.counters.add(t, trace.counter_track(5, "queue"), i % 11);
    // Long spans on the worker, each over 40 requests: often open across a chunk boundary.
    if (i % 40 == 0) trace.slices.add(t + 50, 40 * step, trace.intern("batch"), 0, worker);
    if (i % 50 == 0) trace.slices.add(t, 20 * step, trace.intern("async"), 0, async_track);
    if (i % 60 == 0) trace.slices.add(t + 10, 5 * step, trace.intern("awaiting"), 0, lane);
  }
  trace.slices.add(3 * step, 2 * step, trace.intern("startup"), 0, idle);  // then silent
  trace.finalize();
  return trace;
}

std::string slice_key(const Trace& trace, RowIndex row) {
  if (row == kNoRow || row >= trace.slices.size()) return "-";
  return std::string(trace.str(trace.slices.name[row])) + "@" +
         std::to_string(trace.slices.ts[row]);
}

std::string args_of(const Trace& trace, const opsight::trace::ArgTable& args, RowIndex owner) {
  std::string text;
  for (size_t arg = 0; arg < args.size(); ++arg) {
    if (args.owner[arg] != owner) continue;
    const ArgValue& value = args.value[arg];
    text +=
        " " + std::string(trace.str(args.key[arg])) + "=" +
        (value.type == opsight::trace::ArgType::kString ? std::string(trace.str(value.string_value))
                                                        : std::to_string(value.int_value));
  }
  return text;
}

// Everything a report or a converter takes from a trace, by content (track ids aside: a
// window read creates tracks in another order, and only those it has events for).
std::string describe(const Trace& trace) {
  std::map<std::string, std::string> by_track;
  auto track_name = [&](opsight::trace::TrackId id) {
    const auto& track = trace.tracks[id];
    return std::to_string(static_cast<int>(track.kind)) + ":" + std::to_string(track.pid) + ":" +
           std::to_string(track.tid) + ":" + std::to_string(track.async_key) + ":" +
           std::string(trace.str(track.name));
  };
  for (RowIndex row = 0; row < trace.slices.size(); ++row)
    by_track[track_name(trace.slices.track[row])] +=
        "  " + slice_key(trace, row) + " dur=" + std::to_string(trace.slices.dur[row]) +
        " cat=" + std::string(trace.str(trace.slices.category[row])) +
        " depth=" + std::to_string(trace.slices.depth[row]) +
        " parent=" + slice_key(trace, trace.slices.parent[row]) +
        " id=" + std::to_string(trace.slices.span_id[row]) +
        " flags=" + std::to_string(trace.slices.flags[row]) +
        args_of(trace, trace.slice_args, row) + "\n";
  for (RowIndex row = 0; row < trace.instants.size(); ++row)
    by_track[track_name(trace.instants.track[row])] +=
        "  instant " + std::string(trace.str(trace.instants.name[row])) + "@" +
        std::to_string(trace.instants.ts[row]) + args_of(trace, trace.instant_args, row) + "\n";
  std::string text;
  for (const auto& [name, rows] : by_track) text += name + "\n" + rows;
  for (size_t row = 0; row < trace.counters.size(); ++row)
    text += "counter " +
            std::string(trace.str(trace.counter_tracks[trace.counters.counter_track[row]].name)) +
            "@" + std::to_string(trace.counters.ts[row]) + "=" +
            std::to_string(trace.counters.value[row]) + "\n";
  std::vector<std::string> flows;
  for (size_t row = 0; row < trace.flows.size(); ++row)
    flows.push_back("flow " + slice_key(trace, trace.flows.slice_out[row]) + " -> " +
                    slice_key(trace, trace.flows.slice_in[row]));
  std::sort(flows.begin(), flows.end());
  for (const auto& flow : flows) text += flow + "\n";
  for (const auto& track : trace.tracks)
    if (track.kind == opsight::trace::TrackKind::kThread && track.events_recorded > 0)
      text += "thread " + std::to_string(track.tid) +
              " events=" + std::to_string(track.events_recorded) +
              " overhead=" + std::to_string(track.overhead_ns) + "\n";
  text += "complete=" + std::to_string(trace.run.complete);
  return text;
}

// The whole file read, then cut to the window (ns from its first event).
Trace whole_then_cut(std::string_view bytes, TimeWindow window) {
  ReadResult result = opsight::io::read_native(bytes);
  int64_t start = result.trace.time_bounds().first;
  opsight::trace::keep_time_window(result.trace, start + window.from_ns, start + window.to_ns,
                                   opsight::trace::WindowRule::kOverlaps);
  return std::move(result.trace);
}

std::string run_extra(const Trace& trace, std::string_view key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return {};
}

size_t events_chunks(std::string_view bytes) {
  size_t count = 0;
  uint64_t offset = sizeof(opsight::format::FileHeader);
  std::string problem;
  while (auto chunk = opsight::format::read_chunk(bytes, offset, &problem)) {
    if (chunk->type == ChunkType::kEvents) ++count;
    offset = chunk->payload_offset + chunk->payload.size();
  }
  return count;
}

// The file without its last two chunks (the index and its trailer): what a writer that
// predates the index wrote.
std::string without_index(const std::string& bytes) {
  std::string problem;
  auto index = opsight::format::read_index(bytes, &problem);
  EXPECT_TRUE(index) << problem;
  uint64_t trailer = bytes.size() - 32;
  opsight::format::IndexTrailer pointer;
  std::memcpy(&pointer, bytes.data() + trailer + 16, sizeof(pointer));
  return bytes.substr(0, pointer.index_offset);
}

const std::vector<TimeWindow> kWindows = {
    {0, 1'000'000},          {2'500'000, 2'600'000}, {2'500'000, 2'500'000},
    {1'234'567, 1'834'567},  {5'900'000, 7'000'000}, {-5, 3},
    {9'000'000, 10'000'000}, {0, 100'000'000},
};

TEST(NativeIndex, EveryWriterEndsTheFileWithAnIndexOfEveryChunk) {
  std::string bytes = opsight::io::write_native(long_trace());
  std::string problem;
  auto index = opsight::format::read_index(bytes, &problem);
  ASSERT_TRUE(index) << problem;
  // Every chunk before the index, in order, with its type; kEvents with its thread and
  // event count.
  uint64_t offset = sizeof(opsight::format::FileHeader);
  size_t entry = 0;
  uint64_t events = 0;
  while (auto chunk = opsight::format::read_chunk(bytes, offset, &problem)) {
    if (chunk->type == ChunkType::kIndex) break;
    ASSERT_LT(entry, index->size());
    EXPECT_EQ((*index)[entry].offset, offset);
    EXPECT_EQ((*index)[entry].type, static_cast<uint32_t>(chunk->type));
    if (chunk->type == ChunkType::kEvents) {
      opsight::format::EventsHeader header;
      std::memcpy(&header, chunk->payload.data(), sizeof(header));
      EXPECT_EQ((*index)[entry].thread_index, header.thread_index);
      EXPECT_LE((*index)[entry].min_ticks, (*index)[entry].max_ticks);
      events += (*index)[entry].event_count;
    }
    ++entry;
    offset = chunk->payload_offset + chunk->payload.size();
  }
  EXPECT_EQ(entry, index->size());
  EXPECT_GT(events_chunks(bytes), 6u) << "the trace must span several chunks per thread";
  // The file still reads whole, as before (the index is skipped like any unknown chunk).
  ReadResult whole = opsight::io::read_native(bytes);
  EXPECT_FALSE(whole.damage) << whole.damage->message;
  EXPECT_TRUE(whole.trace.run.complete);
  uint64_t recorded = 0;
  for (const auto& track : whole.trace.tracks) recorded += track.events_recorded;
  // Less the events of the two synthetic threads, which have no track of their own: the
  // counters' (1200 samples) and the async spans' (120 begins and ends).
  EXPECT_EQ(recorded, events - 1200 - 240);
}

TEST(NativeIndex, AWindowReadEqualsTheWholeReadCutToTheWindow) {
  std::string bytes = opsight::io::write_native(long_trace());
  for (const TimeWindow& window : kWindows) {
    SCOPED_TRACE(std::to_string(window.from_ns) + ".." + std::to_string(window.to_ns));
    ReadResult part = opsight::io::read_native(bytes, window);
    ASSERT_TRUE(part.ok());
    EXPECT_FALSE(part.damage);
    EXPECT_EQ(run_extra(part.trace, "native_index"), "read");
    Trace expected = whole_then_cut(bytes, window);
    EXPECT_EQ(describe(part.trace), describe(expected));
  }
  // A narrow window late in the run decodes few chunks: the main thread's from its start
  // (its root span is open all along), the others' only near the window.
  ReadResult narrow = opsight::io::read_native(bytes, {4'000'000, 4'010'000});
  size_t read = std::stoul(run_extra(narrow.trace, "window_chunks_read"));
  EXPECT_LT(read, events_chunks(bytes));
  EXPECT_GT(narrow.trace.slices.size(), 10u);
  // Without the root span, every thread starts near the window: at the last chunk before it
  // where nothing is open at some point (chunk boundaries fall inside spans).
  std::string short_spans = opsight::io::write_native(long_trace(6000, false));
  for (const TimeWindow& window : kWindows) {
    SCOPED_TRACE(std::to_string(window.from_ns) + ".." + std::to_string(window.to_ns));
    ReadResult part = opsight::io::read_native(short_spans, window);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(describe(part.trace), describe(whole_then_cut(short_spans, window)));
  }
  narrow = opsight::io::read_native(short_spans, {4'000'000, 4'010'000});
  EXPECT_LE(std::stoul(run_extra(narrow.trace, "window_chunks_read")), 12u);
  EXPECT_EQ(run_extra(narrow.trace, "unmatched_ends"), "");  // the run's start is no damage
}

TEST(NativeIndex, AFileWithoutAnIndexIsIndexedByAScanAndSaysSo) {
  // An older file (the index came after version 3, as chunks older readers skip) and one
  // cut short (the process was killed: no footer, no index, a chunk cut in two).
  std::string bytes = opsight::io::write_native(long_trace());
  std::string older = without_index(bytes);
  std::vector<std::string> files = {older, older.substr(0, older.size() * 2 / 3 + 5),
                                    older.substr(0, older.size() / 3)};
  for (const std::string& file : files) {
    SCOPED_TRACE(file.size());
    for (const TimeWindow& window : kWindows) {
      SCOPED_TRACE(std::to_string(window.from_ns) + ".." + std::to_string(window.to_ns));
      ReadResult part = opsight::io::read_native(file, window);
      ASSERT_TRUE(part.ok());
      EXPECT_EQ(run_extra(part.trace, "native_index").rfind("rebuilt by a scan", 0), 0u)
          << run_extra(part.trace, "native_index");
      ReadResult whole = opsight::io::read_native(file);
      ASSERT_EQ(part.damage.has_value(), whole.damage.has_value());
      if (whole.damage) {
        EXPECT_EQ(part.damage->byte_offset, whole.damage->byte_offset);
        EXPECT_EQ(part.damage->message, whole.damage->message);
      }
      EXPECT_EQ(describe(part.trace), describe(whole_then_cut(file, window)));
    }
  }
}

TEST(NativeIndex, TheSlotBuiltTestFilesReadThroughAWindow) {
  using namespace opsight::io::native_test_files;
  std::string file = file_with_threads({ThreadEvents{0, 7, 8,
                                                     concat({{slot(10, SlotKind::kBegin, 1)},
                                                             int_arg("n", 3),
                                                             named_begin(20, "inner"),
                                                             {slot(30, SlotKind::kEnd)},
                                                             counter(35, "rss", 2.0),
                                                             {slot(40, SlotKind::kEnd)}})},
                                        ThreadEvents{1, 7, 9,
                                                     concat({track_switch(5, "task"),
                                                             {slot(12, SlotKind::kBegin, 1)},
                                                             {slot(50, SlotKind::kEnd)},
                                                             track_switch(0)})}});
  for (TimeWindow window :
       {TimeWindow{0, 5}, TimeWindow{10, 15}, TimeWindow{25, 26}, TimeWindow{0, 100}}) {
    ReadResult part = opsight::io::read_native(file, window);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(describe(part.trace), describe(whole_then_cut(file, window)));
  }
}

TEST(NativeIndex, ADamagedIndexFallsBackToAScanNeverACrash) {
  std::string bytes = opsight::io::write_native(long_trace(600));
  const TimeWindow window{100'000, 200'000};
  std::string expected = describe(whole_then_cut(bytes, window));
  uint64_t index_offset = without_index(bytes).size();
  // Every byte of the index and its trailer flipped, one at a time: the checksums catch
  // it, the reader scans.
  for (size_t position = index_offset; position < bytes.size(); position += 7) {
    std::string damaged = bytes;
    damaged[position] = static_cast<char>(damaged[position] ^ 0x5a);
    ReadResult part = opsight::io::read_native(damaged, window);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(run_extra(part.trace, "native_index").rfind("rebuilt by a scan", 0), 0u);
    // The damaged chunk is damage to the whole read as well: the same trace, cut.
    EXPECT_EQ(describe(part.trace), describe(whole_then_cut(damaged, window)))
        << "flipped byte " << position;
    EXPECT_EQ(part.trace.slices.size(), whole_then_cut(bytes, window).slices.size());
  }
  // An index whose checksums hold but whose entries point at the wrong chunks (a writer's
  // bug): each chunk it names is checked, and the reader scans.
  std::string problem;
  auto index = opsight::format::read_index(bytes, &problem);
  ASSERT_TRUE(index);
  for (auto& entry : *index)
    if (entry.type == static_cast<uint32_t>(ChunkType::kEvents)) entry.thread_index ^= 1;
  std::string rewritten = bytes.substr(0, index_offset);
  std::string payload;
  opsight::format::append_pod(
      payload, opsight::format::IndexHeader{opsight::format::kIndexVersion,
                                            sizeof(opsight::format::IndexEntry), index->size(), 0});
  payload.append(reinterpret_cast<const char*>(index->data()),
                 index->size() * sizeof(opsight::format::IndexEntry));
  opsight::format::append_chunk(rewritten, ChunkType::kIndex, payload);
  opsight::format::IndexTrailer trailer{index_offset, {}};
  std::memcpy(trailer.magic, opsight::format::kIndexTrailerMagic, 8);
  opsight::format::append_chunk(
      rewritten, ChunkType::kIndexTrailer,
      std::string_view(reinterpret_cast<const char*>(&trailer), sizeof(trailer)));
  ASSERT_EQ(rewritten.size(), bytes.size());
  ReadResult part = opsight::io::read_native(rewritten, window);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(run_extra(part.trace, "native_index"),
            "rebuilt by a scan: the index does not match the file's chunks");
  EXPECT_EQ(describe(part.trace), expected);
}

TEST(NativeIndex, ALongRecordingsIndexComesInPartsAWriterHoldsOneAtATime) {
  // The file rewritten chunk by chunk, as a writer writes it, with an index part whenever
  // three entries have gathered (a writer's part holds 65,536): the parts lie between the
  // chunks, each naming the one before it, and the reader follows them from the trailer.
  std::string bytes = without_index(opsight::io::write_native(long_trace()));
  opsight::format::IndexBuilder builder(3);
  std::string out(bytes.substr(0, sizeof(opsight::format::FileHeader)));
  uint64_t offset = sizeof(opsight::format::FileHeader);
  size_t chunks = 0, parts = 1;
  std::string problem;
  while (auto chunk = opsight::format::read_chunk(bytes, offset, &problem)) {
    uint64_t end = chunk->payload_offset + chunk->payload.size();
    builder.add_chunks(std::string_view(bytes).substr(offset, end - offset), out.size());
    out.append(bytes, offset, end - offset);
    ++chunks;
    if (builder.part_full()) {
      ASSERT_TRUE(builder.append_part(out, out.size()));
      ++parts;
    }
    offset = end;
  }
  ASSERT_TRUE(builder.append_index(out, out.size()));
  EXPECT_GT(parts, 8u);
  auto index = opsight::format::read_index(out, &problem);
  ASSERT_TRUE(index) << problem;
  EXPECT_EQ(index->size(), chunks);
  for (const TimeWindow& window : kWindows) {
    ReadResult part = opsight::io::read_native(out, window);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(run_extra(part.trace, "native_index"), "read");
    EXPECT_EQ(describe(part.trace), describe(whole_then_cut(out, window)));
  }
  // A broken link between parts: the reader scans.
  std::string damaged = out;
  damaged[out.size() / 2] = static_cast<char>(damaged[out.size() / 2] ^ 1);
  ReadResult part = opsight::io::read_native(damaged, {0, 50'000});
  ASSERT_TRUE(part.ok());
}

TEST(NativeIndex, AnyCutOfTheFileReadsThroughAWindowWithoutCrashing) {
  std::string bytes = opsight::io::write_native(long_trace(300));
  for (size_t size = 0; size < bytes.size(); size += 97) {
    std::string cut = bytes.substr(0, size);
    ReadResult part = opsight::io::read_native(cut, {1000, 50'000});
    if (size < 16) {
      EXPECT_FALSE(part.ok());
    }
  }
}

TEST(NativeIndex, ReadTraceFileTakesAWindowForEveryFormat) {
  Trace trace = long_trace(400);
  std::string native = opsight::io::write_native(trace);
  auto directory = std::filesystem::temp_directory_path();
  auto native_path = directory / ("opsight_index_" + std::to_string(getpid()) + ".opsight");
  auto json_path = directory / ("opsight_index_" + std::to_string(getpid()) + ".json");
  ASSERT_FALSE(opsight::io::write_file_bytes(native_path.string(), native));
  ASSERT_FALSE(
      opsight::io::write_file_bytes(json_path.string(), opsight::io::write_chrome_json(trace)));
  const TimeWindow window{100'000, 150'000};
  ReadResult from_native = opsight::io::read_trace_file(native_path.string(), window);
  ReadResult from_json = opsight::io::read_trace_file(json_path.string(), window);
  ASSERT_TRUE(from_native.ok());
  ASSERT_TRUE(from_json.ok());
  EXPECT_EQ(describe(from_native.trace), describe(whole_then_cut(native, window)));
  EXPECT_EQ(from_native.trace.slices.size(), from_json.trace.slices.size());
  std::filesystem::remove(native_path);
  std::filesystem::remove(json_path);
}

// `opsight index FILE` (io::add_native_index): the index a killed file lacks, appended in
// place. A window read of the indexed file equals the original's, decoding the same chunks;
// a file cut mid-chunk is indexed up to the cut; a crash while appending leaves a file that
// still reads by a scan; a second run refuses.
std::string index_file_bytes(const std::filesystem::path& path) {
  std::string error;
  auto bytes = opsight::io::read_file_bytes(path.string(), &error);
  EXPECT_TRUE(bytes) << error;
  return bytes ? *bytes : std::string();
}

TEST(NativeIndex, IndexWritesTheIndexAKilledFileLacksInPlace) {
  std::string original = opsight::io::write_native(long_trace());
  std::string killed = without_index(original);
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_index_cmd_" + std::to_string(getpid()) + ".opsight");
  ASSERT_FALSE(opsight::io::write_file_bytes(path.string(), killed));
  opsight::io::NativeIndexAdded added;
  bool already = false;
  auto error = opsight::io::add_native_index(path.string(), &added, &already);
  ASSERT_FALSE(error) << *error;
  std::string indexed = index_file_bytes(path);
  EXPECT_EQ(indexed.substr(0, killed.size()), killed) << "the old bytes are never touched";
  EXPECT_EQ(indexed.size(), killed.size() + added.bytes_appended);
  EXPECT_EQ(added.bytes_left_out, 0u);
  EXPECT_EQ(added.events_chunks_indexed, events_chunks(killed));
  std::string problem;
  auto index = opsight::format::read_index(indexed, &problem);
  ASSERT_TRUE(index) << problem;
  EXPECT_EQ(index->size(), added.chunks_indexed);
  for (const TimeWindow& window : kWindows) {
    SCOPED_TRACE(std::to_string(window.from_ns) + ".." + std::to_string(window.to_ns));
    ReadResult part = opsight::io::read_native(indexed, window);
    ReadResult expected = opsight::io::read_native(original, window);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(run_extra(part.trace, "native_index"), "read");
    EXPECT_EQ(describe(part.trace), describe(expected.trace));
    EXPECT_EQ(run_extra(part.trace, "window_chunks_read"),
              run_extra(expected.trace, "window_chunks_read"));
  }
  ReadResult narrow = opsight::io::read_native(indexed, {4'000'000, 4'010'000});
  EXPECT_LT(std::stoul(run_extra(narrow.trace, "window_chunks_read")), events_chunks(indexed));
  // A second run refuses, naming the file, and leaves it as it is.
  error = opsight::io::add_native_index(path.string(), &added, &already);
  ASSERT_TRUE(error);
  EXPECT_TRUE(already);
  EXPECT_NE(error->find(path.string()), std::string::npos) << *error;
  EXPECT_NE(error->find("already has a time index"), std::string::npos) << *error;
  EXPECT_EQ(index_file_bytes(path), indexed);

  // The process died mid-write: the last chunk is cut. The whole chunks are indexed, the
  // cut one left out and said so; a window reads through the index what the whole read of
  // the cut file gives, cut to the window.
  std::string cut = killed.substr(0, killed.size() * 2 / 3 + 5);
  ASSERT_FALSE(opsight::io::write_file_bytes(path.string(), cut));
  error = opsight::io::add_native_index(path.string(), &added, &already);
  ASSERT_FALSE(error) << *error;
  EXPECT_GT(added.bytes_left_out, 0u);
  EXPECT_EQ(added.left_out_offset + added.bytes_left_out, cut.size());
  EXPECT_FALSE(added.left_out_why.empty());
  indexed = index_file_bytes(path);
  ASSERT_TRUE(opsight::format::read_index(indexed, &problem)) << problem;
  for (const TimeWindow& window : kWindows) {
    SCOPED_TRACE(std::to_string(window.from_ns) + ".." + std::to_string(window.to_ns));
    ReadResult part = opsight::io::read_native(indexed, window);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(run_extra(part.trace, "native_index"), "read");
    EXPECT_EQ(describe(part.trace), describe(whole_then_cut(cut, window)));
  }
  // A crash while appending: the file ends anywhere in the appended bytes. It reads by a
  // scan as the cut file did, and indexing it again works.
  const TimeWindow window{1'000'000, 1'500'000};
  std::string expected = describe(whole_then_cut(cut, window));
  for (size_t size = cut.size(); size < indexed.size(); size += 4099) {
    SCOPED_TRACE(size);
    std::string crashed = indexed.substr(0, size);
    ReadResult part = opsight::io::read_native(crashed, window);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(run_extra(part.trace, "native_index").rfind("rebuilt by a scan", 0), 0u);
    EXPECT_EQ(describe(part.trace), expected);
    opsight::io::NativeIndexAdded again;
    auto more = opsight::io::build_native_index(crashed, &again, &problem, &already);
    ASSERT_TRUE(more) << problem;
    ReadResult reindexed = opsight::io::read_native(crashed + *more, window);
    EXPECT_EQ(run_extra(reindexed.trace, "native_index"), "read");
    EXPECT_EQ(describe(reindexed.trace), expected);
  }
  // Not a native file: an error naming it, nothing appended.
  ASSERT_FALSE(opsight::io::write_file_bytes(path.string(), "{\"traceEvents\": []}"));
  error = opsight::io::add_native_index(path.string(), &added, &already);
  ASSERT_TRUE(error);
  EXPECT_FALSE(already);
  EXPECT_EQ(index_file_bytes(path), "{\"traceEvents\": []}");
  std::filesystem::remove(path);
}

}  // namespace
