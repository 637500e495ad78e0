// Golden tests of the native format: a small trace written and read back exactly, and a
// file cut or damaged at every byte read as far as it is whole, never crashing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "format/chunk_codec.hpp"
#include "io/io.hpp"
#include "io/native/native_test_files.hpp"

namespace {

using opsight::trace::ArgType;
using opsight::trace::ArgValue;
using opsight::trace::kNoRow;
using opsight::trace::Trace;

Trace sample_trace() {
  Trace trace;
  trace.run.command_line = "python serve.py --port 80";
  trace.run.host = "gpu-7";
  trace.run.pid = 42;
  trace.run.trace_id = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  auto main_track = trace.thread_track(42, 42);
  auto worker = trace.thread_track(42, 43);
  trace.tracks[main_track].name = trace.intern("main");
  trace.tracks[worker].name = trace.intern("worker");
  trace.tracks[main_track].overhead_ns = 1234;
  auto request =
      trace.slices.add(1000, 9000, trace.intern("request"), trace.intern("http"), main_track);
  trace.slices.add(2000, 3000, trace.intern("preprocess"), 0, main_track);
  auto model =
      trace.slices.add(5000, 4000, trace.intern("model"), trace.intern("torch"), main_track);
  trace.slices.add(5500, 0, trace.intern("empty"), 0, main_track);
  trace.slices.add(1500, 500, trace.intern("poll"), 0, worker);
  trace.slice_args.add(request, trace.intern("batch"), ArgValue::of_int(8));
  trace.slice_args.add(request, trace.intern("route"),
                       ArgValue::of_string(trace.intern("/v1/predict")));
  trace.slice_args.add(model, trace.intern("flops"), ArgValue::of_double(2.5e9));
  trace.slice_args.add(model, trace.intern("cached"), ArgValue::of_bool(true));
  auto instant = trace.instants.add(6000, trace.intern("cache miss"), 0, main_track);
  trace.instant_args.add(instant, trace.intern("key"), ArgValue::of_int(99));
  trace.counters.add(1000, trace.counter_track(42, "rss_bytes", "bytes"), 1.5e6);
  trace.counters.add(9000, trace.counter_track(42, "rss_bytes", "bytes"), 2.5e6);
  trace.finalize();
  return trace;
}

std::string describe_slices(const Trace& trace) {
  std::string text;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    const auto& track = trace.tracks[trace.slices.track[row]];
    text += std::string(trace.str(trace.slices.name[row])) + "/" +
            std::string(trace.str(trace.slices.category[row])) +
            " ts=" + std::to_string(trace.slices.ts[row]) +
            " dur=" + std::to_string(trace.slices.dur[row]) +
            " depth=" + std::to_string(trace.slices.depth[row]) +
            " tid=" + std::to_string(track.tid) + " (" + std::string(trace.str(track.name)) + ")";
    for (auto arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1]; ++arg) {
      const ArgValue& value = trace.slice_args.value[arg];
      text += " " + std::string(trace.str(trace.slice_args.key[arg])) + "=";
      switch (value.type) {
        case ArgType::kInt:
          text += std::to_string(value.int_value);
          break;
        case ArgType::kBool:
          text += value.int_value ? "true" : "false";
          break;
        case ArgType::kDouble:
          text += std::to_string(value.double_value);
          break;
        case ArgType::kString:
          text += std::string(trace.str(value.string_value));
          break;
      }
    }
    text += "\n";
  }
  return text;
}

TEST(Native, RoundTripKeepsEverything) {
  Trace original = sample_trace();
  std::string bytes = opsight::io::write_native(original);
  auto result = opsight::io::read_native(bytes);
  ASSERT_TRUE(result.ok()) << result.error->message;
  EXPECT_FALSE(result.damage.has_value()) << result.damage->message;
  const Trace& read = result.trace;
  EXPECT_EQ(
      describe_slices(read),
      "request/http ts=1000 dur=9000 depth=0 tid=42 (main) batch=8 route=/v1/predict\n"
      "preprocess/ ts=2000 dur=3000 depth=1 tid=42 (main)\n"
      "model/torch ts=5000 dur=4000 depth=1 tid=42 (main) flops=2500000000.000000 cached=true\n"
      "empty/ ts=5500 dur=0 depth=2 tid=42 (main)\n"
      "poll/ ts=1500 dur=500 depth=0 tid=43 (worker)\n");
  EXPECT_EQ(describe_slices(read), describe_slices(original));
  ASSERT_EQ(read.instants.size(), 1u);
  EXPECT_EQ(read.instants.ts[0], 6000);
  EXPECT_EQ(read.str(read.instants.name[0]), "cache miss");
  ASSERT_EQ(read.instant_args.size(), 1u);
  EXPECT_EQ(read.instant_args.value[0].int_value, 99);
  ASSERT_EQ(read.counters.size(), 2u);
  EXPECT_EQ(read.counters.ts[1], 9000);
  EXPECT_DOUBLE_EQ(read.counters.value[1], 2.5e6);
  EXPECT_EQ(read.str(read.counter_tracks[0].name), "rss_bytes");
  EXPECT_EQ(read.run.command_line, "python serve.py --port 80");
  EXPECT_EQ(read.run.host, "gpu-7");
  EXPECT_EQ(read.run.pid, 42);
  EXPECT_EQ(read.run.trace_id, original.run.trace_id);
  EXPECT_EQ(read.run.unix_offset_ns, original.run.unix_offset_ns);
  EXPECT_EQ(read.tracks[0].overhead_ns, 1234);
  EXPECT_EQ(read.slices.parent[1], 0u);
  EXPECT_EQ(read.slices.parent[3], 2u);
  EXPECT_EQ(read.slices.parent[4], kNoRow);
  EXPECT_TRUE(read.run.complete);
}

// A Chrome JSON file keeps the tracer's overhead only as a run total (otherData): converted
// to .opsight and read back, the total is the same.
// The ids exporters sent stay the ids of the file: a merged trace (whose ids the reader
// would derive differently) written and read back keeps every slice's span id.
TEST(Native, SpanIdsSurviveTheModelWriterAfterAMerge) {
  Trace merged = sample_trace();
  Trace other = sample_trace();
  other.run.pid = 43;
  opsight::trace::append_trace(merged, other);
  auto again = opsight::io::read_native(opsight::io::write_native(merged));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again.trace.slices.size(), merged.slices.size());
  std::multiset<uint64_t> before(merged.slices.span_id.begin(), merged.slices.span_id.end());
  std::multiset<uint64_t> after(again.trace.slices.span_id.begin(),
                                again.trace.slices.span_id.end());
  EXPECT_EQ(before, after);
  auto twice = opsight::io::read_native(opsight::io::write_native(again.trace));
  ASSERT_TRUE(twice.ok());
  std::multiset<uint64_t> third(twice.trace.slices.span_id.begin(),
                                twice.trace.slices.span_id.end());
  EXPECT_EQ(before, third);
}

TEST(Native, ARunLevelOverheadWithoutTrackOverheadSurvivesConversion) {
  Trace original = sample_trace();
  for (auto& track : original.tracks) track.overhead_ns = 0;
  original.run.overhead_ns = 98765;
  auto result = opsight::io::read_native(opsight::io::write_native(original));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.trace.run.overhead_ns, 98765);
  // Per-track overhead that already accounts for the total is not counted twice.
  original.tracks[0].overhead_ns = 98765;
  result = opsight::io::read_native(opsight::io::write_native(original));
  EXPECT_EQ(result.trace.run.overhead_ns, 98765);
}

TEST(Native, EveryTruncationReadsAPrefixAndNeverCrashes) {
  std::string bytes = opsight::io::write_native(sample_trace());
  // The file ends with the footer, then the time index and its trailer (32 bytes), which a
  // whole read does not need: a cut after the footer loses nothing.
  opsight::format::IndexTrailer trailer;
  std::memcpy(&trailer, bytes.data() + bytes.size() - sizeof(trailer), sizeof(trailer));
  const size_t footer_end = trailer.index_offset;
  size_t previous_slices = 0;
  for (size_t length = 0; length < bytes.size(); ++length) {
    auto result = opsight::io::read_native(std::string_view(bytes).substr(0, length));
    if (length < sizeof(opsight::format::FileHeader)) {
      ASSERT_FALSE(result.ok()) << length;
      continue;
    }
    ASSERT_TRUE(result.ok()) << length;
    if (length >= footer_end) {
      EXPECT_EQ(result.trace.slices.size(), 5u) << length;
      EXPECT_EQ(result.trace.run.complete, !result.damage.has_value()) << length;
      continue;
    }
    ASSERT_TRUE(result.damage.has_value()) << length;
    EXPECT_LE(result.damage->byte_offset, length);
    EXPECT_FALSE(result.trace.run.complete);
    EXPECT_GE(result.trace.slices.size(), previous_slices)
        << "a longer prefix lost slices at " << length;
    previous_slices = result.trace.slices.size();
  }
  EXPECT_EQ(previous_slices, 5u);  // the last cut only loses the footer
}

TEST(Native, EveryFlippedByteIsDetectedOrHarmless) {
  std::string bytes = opsight::io::write_native(sample_trace());
  for (size_t position = 0; position < bytes.size(); ++position) {
    std::string damaged = bytes;
    damaged[position] = static_cast<char>(damaged[position] ^ 0x5A);
    auto result = opsight::io::read_native(damaged);
    if (position < 8) {
      EXPECT_FALSE(result.ok()) << position;  // the magic
    } else if (position >= 16) {
      ASSERT_TRUE(result.damage.has_value()) << "undetected corruption at byte " << position;
      EXPECT_LE(result.damage->byte_offset, position);
    }
  }
}

// The reader checks a kEvents chunk's checksum when it decodes the chunk, after reading the
// chunks after it: a damaged one must still end the read where it is, as if the file
// ended there (the names, clock syncs and footer after it do not count).
TEST(Native, ADamagedEventsChunkEndsTheReadAsACutThereDoes) {
  std::string bytes = opsight::io::write_native(sample_trace());
  opsight::format::FileHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  uint64_t offset = std::max<uint64_t>(header.header_bytes, sizeof(header));
  int events_chunks = 0;
  while (offset < bytes.size()) {
    std::string problem;
    auto chunk = opsight::format::read_chunk(bytes, offset, &problem);
    ASSERT_TRUE(chunk.has_value()) << problem;
    if (chunk->type == opsight::format::ChunkType::kEvents) {
      ++events_chunks;
      std::string damaged = bytes;
      damaged[chunk->payload_offset + chunk->payload.size() / 2] ^= 0x5A;
      auto read = opsight::io::read_native(damaged);
      auto cut = opsight::io::read_native(std::string_view(bytes).substr(0, offset));
      ASSERT_TRUE(read.damage.has_value());
      EXPECT_EQ(read.damage->byte_offset, offset);
      EXPECT_EQ(read.damage->message, "bad chunk payload checksum; the " + std::to_string(offset) +
                                          " bytes before it were read");
      EXPECT_EQ(describe_slices(read.trace), describe_slices(cut.trace)) << offset;
      EXPECT_EQ(read.trace.run.extra, cut.trace.run.extra) << offset;
      EXPECT_EQ(read.trace.run.events_dropped, cut.trace.run.events_dropped) << offset;
      EXPECT_EQ(read.trace.tracks.size(), cut.trace.tracks.size()) << offset;
    }
    offset = chunk->payload_offset + chunk->payload.size();
  }
  EXPECT_GE(events_chunks, 2);
}

TEST(Native, RejectsOtherFilesWithAnOffset) {
  auto empty = opsight::io::read_native("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error->message, "file is empty");
  auto json = opsight::io::read_native("{\"traceEvents\": []}");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.error->to_string("x.opsight"),
            "x.opsight: at byte 0: not an opsight file (bad magic)");
  std::string future = opsight::io::write_native(sample_trace());
  future[8] = 99;  // version
  auto newer = opsight::io::read_native(future);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.error->message.find("newer"), std::string::npos);
}

TEST(Native, FormatDetection) {
  using opsight::io::FileFormat;
  EXPECT_EQ(opsight::io::format_from_path("a/b.opsight"), FileFormat::kNative);
  EXPECT_EQ(opsight::io::format_from_path("trace.json"), FileFormat::kChromeJson);
  EXPECT_FALSE(opsight::io::format_from_path("trace.txt").has_value());
  EXPECT_EQ(opsight::io::format_from_content("  \n[{"), FileFormat::kChromeJson);
  EXPECT_EQ(opsight::io::format_from_content(std::string("OPSIGHT\0xxxx", 12)),
            FileFormat::kNative);
  EXPECT_FALSE(opsight::io::format_from_content("hello").has_value());
}

TEST(Native, ReadTraceFileNamesMissingFiles) {
  auto result = opsight::io::read_trace_file("/nonexistent/run.opsight");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error->to_string("/nonexistent/run.opsight").find("No such file"),
            std::string::npos);
}

}  // namespace

namespace {

using namespace opsight::io::native_test_files;

TEST(Native, PackedAsyncTicksReadNearestTheThreadsPreviousEvent) {
  using opsight::format::unpack_async_ticks;
  constexpr uint64_t kMask = (uint64_t{1} << 56) - 1;
  EXPECT_EQ(unpack_async_ticks(1500, 1000), 1500u);
  EXPECT_EQ(unpack_async_ticks(900, 1000), 900u);  // behind: an earlier clock read
  uint64_t near_carry = (uint64_t{7} << 56) | (kMask - 10);
  EXPECT_EQ(unpack_async_ticks(5, near_carry), (uint64_t{8} << 56) | 5);  // carries into bit 56
  EXPECT_EQ(unpack_async_ticks(kMask - 20, (uint64_t{8} << 56) | 5),
            (uint64_t{7} << 56) | (kMask - 20));                    // and back over it
  EXPECT_EQ(unpack_async_ticks(3, ~uint64_t{0} - 1), uint64_t{3});  // wraps like the ticks
  uint64_t far = uint64_t{1} << 54;
  EXPECT_EQ(unpack_async_ticks((1000 + far) & kMask, 1000), 1000 + far);
}

// The one-slot async forms read like the two-slot ones, their ticks carried across bit 56
// from the thread's previous event; the two forms mix on one id.
TEST(Native, PackedAsyncSpansReadAcrossACarryIntoBit56) {
  using opsight::format::SlotKind;
  const uint64_t base = (uint64_t{3} << 56) - 300;  // ticks at the session's first sync
  opsight::format::Slot id_slot{};
  const uint64_t big_id = uint64_t{1} << 45;
  std::memcpy(&id_slot, &big_id, sizeof(big_id));
  opsight::format::Slot two_slot_begin = slot(base + 100, SlotKind::kAsyncBegin, 1);
  two_slot_begin.extra_slots = 1;
  opsight::format::Slot two_slot_end = slot(base + 900, SlotKind::kAsyncEnd);
  two_slot_end.extra_slots = 1;
  auto result = opsight::io::read_native(file_with_events(
      {packed_slot(SlotKind::kAsyncBeginPacked, 1 | (uint64_t{77} << 24), base + 10),
       two_slot_begin, id_slot,
       packed_slot(SlotKind::kAsyncBeginPacked, 1 | (uint64_t{77} << 24), base + 290),
       packed_slot(SlotKind::kAsyncEndPacked, 77, base + 400),  // past the carry
       two_slot_end, id_slot, packed_slot(SlotKind::kAsyncEndPacked, 77, base + 1000)},
      1, 0, base));
  ASSERT_TRUE(result.ok());
  const auto& slices = result.trace.slices;
  ASSERT_EQ(slices.size(), 3u);
  std::vector<std::string> got;
  for (size_t row = 0; row < slices.size(); ++row) {
    const auto& track = result.trace.tracks[slices.track[row]];
    got.push_back(
        std::string(result.trace.str(slices.name[row])) +
        " key=" + std::to_string(track.async_key) + " ts=" + std::to_string(slices.ts[row]) +
        " dur=" + std::to_string(slices.dur[row]) + " depth=" + std::to_string(slices.depth[row]));
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "span key=35184372088832 ts=100 dur=800 depth=0",
                     "span key=77 ts=10 dur=990 depth=0",
                     "span key=77 ts=290 dur=110 depth=1",
                 }));
}

TEST(Native, AnEndWrittenLateAfterDropsMarksItsSpanUnfinished) {
  using opsight::format::SlotKind;
  auto result = opsight::io::read_native(file_with_events(
      {slot(10, SlotKind::kBegin, 1), slot(20, SlotKind::kBegin, 1),
       slot(500, SlotKind::kEnd, 0, opsight::format::kEndIsLate), slot(600, SlotKind::kEnd),
       slot(700, SlotKind::kBegin, 1), slot(800, SlotKind::kEnd)}));
  ASSERT_TRUE(result.ok());
  const auto& slices = result.trace.slices;
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_TRUE(slices.flags[1] & opsight::trace::kSliceUnfinished);
  EXPECT_FALSE(slices.flags[0] & opsight::trace::kSliceUnfinished);
  EXPECT_EQ(slices.parent[2], opsight::trace::kNoRow);  // nesting recovered after it
}

// A process killed mid-session has no footer; the last kDropsSoFar still gives its drops,
// and a later one supersedes an earlier one (each holds whole counts).
TEST(Native, DropsSoFarReportDropsOfAFileWithoutItsFooter) {
  using namespace opsight::format;
  std::string bytes = file_with_events(
      {slot(10, SlotKind::kBegin, 1), slot(20, SlotKind::kEnd), slot(30, SlotKind::kBegin, 1)});
  auto append_drops = [&](uint64_t dropped) {
    std::string payload;
    append_pod(payload, SessionStats{25, 1, dropped, 0});
    append_pod(payload, ThreadStats{0, 0, 3, dropped, 0});
    append_chunk(bytes, ChunkType::kDropsSoFar, payload);
  };
  append_drops(7);
  append_drops(40);
  auto result = opsight::io::read_native(bytes);
  ASSERT_TRUE(result.damage.has_value());  // still no end
  EXPECT_NE(result.damage->message.find("no end"), std::string::npos);
  EXPECT_FALSE(result.trace.run.complete);
  EXPECT_EQ(result.trace.run.events_dropped, 40u);
  ASSERT_FALSE(result.trace.tracks.empty());
  EXPECT_EQ(result.trace.tracks[0].events_dropped, 40u);
  EXPECT_EQ(result.trace.tracks[0].events_recorded, 3u);
  EXPECT_EQ(result.trace.slices.size(), 2u);  // the open span is kept, unfinished
}

TEST(Native, ImpossibleIdsAreDamageNotCrashes) {
  using opsight::format::SlotKind;
  auto huge_name =
      opsight::io::read_native(file_with_events({slot(10, SlotKind::kBegin, 1)}, 0xFFFFFFFFu));
  ASSERT_TRUE(huge_name.ok());
  ASSERT_TRUE(huge_name.damage.has_value());
  EXPECT_NE(huge_name.damage->message.find("name id"), std::string::npos);
  auto big_thread = opsight::io::read_native(
      file_with_events({slot(10, SlotKind::kBegin, 1), slot(20, SlotKind::kEnd)}, 1, 0x00FFFFFFu));
  ASSERT_TRUE(big_thread.ok());
  EXPECT_EQ(big_thread.trace.slices.size(), 1u);
}

TEST(Native, NegativeTimestampsSurviveARoundTrip) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(-5000, 1000, trace.intern("before zero"), 0, track);
  trace.slices.add(5000, 1000, trace.intern("after zero"), 0, track);
  trace.finalize();
  auto result = opsight::io::read_native(opsight::io::write_native(trace));
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result.trace.slices.size(), 2u);
  EXPECT_EQ(result.trace.slices.ts[0], -5000);
  EXPECT_EQ(result.trace.slices.ts[1], 5000);
  EXPECT_EQ(result.trace.slices.dur[1], 1000);
}

TEST(Native, TrackSwitchesGiveEachKeyANestingLaneOfItsThread) {
  using opsight::format::SlotKind;
  // Ticks 100 on; keys below the first sync point are keys, not stale times.
  auto result = opsight::io::read_native(
      file_with_events(concat({{slot(110, SlotKind::kBegin, 1)},
                               track_switch(5),
                               {slot(120, SlotKind::kBegin, 1)},
                               track_switch(0),
                               {slot(130, SlotKind::kEnd)},
                               track_switch(5),
                               {slot(140, SlotKind::kEnd)},
                               track_switch(6, "named task"),
                               {slot(150, SlotKind::kBegin, 1), slot(151, SlotKind::kInstant, 1)},
                               track_switch(5),
                               {slot(152, SlotKind::kBegin, 1)},
                               track_switch(0),
                               {slot(155, SlotKind::kBegin, 1), slot(160, SlotKind::kEnd)}}),
                       1, 0, 100));
  ASSERT_TRUE(result.ok());  // (damaged only in having no footer)
  const Trace& trace = result.trace;
  ASSERT_EQ(trace.slices.size(), 5u);
  auto describe_row = [&](opsight::trace::RowIndex row) {
    const auto& track = trace.tracks[trace.slices.track[row]];
    return trace.track_label(trace.slices.track[row]) + " key=" + std::to_string(track.async_key) +
           " tid=" + std::to_string(track.tid) + " " + std::to_string(trace.slices.ts[row]) + "+" +
           std::to_string(trace.slices.dur[row]) +
           ((trace.slices.flags[row] & opsight::trace::kSliceUnfinished) ? " unfinished" : "");
  };
  // Rows in begin order; spans still open at the end close at the thread's last event.
  EXPECT_EQ(describe_row(0), "thread 8 key=0 tid=8 10+20");
  EXPECT_EQ(describe_row(1), "track 5 key=5 tid=8 20+20");
  EXPECT_EQ(describe_row(2), "named task key=6 tid=8 50+10 unfinished");
  EXPECT_EQ(describe_row(3), "track 5 key=5 tid=8 52+8 unfinished");
  EXPECT_EQ(describe_row(4), "thread 8 key=0 tid=8 55+5");
  EXPECT_EQ(trace.slices.depth[3], 0);  // its lane had nothing open
  ASSERT_EQ(trace.instants.size(), 1u);
  EXPECT_EQ(trace.track_label(trace.instants.track[0]), "named task");
  EXPECT_EQ(trace.tracks.size(), 3u);
}

TEST(Native, AsyncLanesAndUnfinishedSpansSurviveTheModelWriter) {
  Trace trace;
  auto main_thread = trace.thread_track(3, 30);
  trace.tracks[main_thread].name = trace.intern("main");
  trace.tracks[main_thread].overhead_ns = 500;
  auto task = trace.async_track(3, 30, 0x10, "Task-1");
  auto reused = trace.async_track(3, 30, 0x10, "Task-2");
  auto lone = trace.async_track(3, 31, 0x20, "");  // its thread has no track of its own
  trace.slices.add(0, 100, trace.intern("loop"), 0, main_thread);
  trace.slices.add(10, 50, trace.intern("handle"), 0, task);
  trace.slices.add(20, 40, trace.intern("cut"), 0, task, opsight::trace::kSliceUnfinished);
  trace.slices.add(70, 20, trace.intern("handle"), 0, reused);
  trace.slices.add(5, 5, trace.intern("lone"), 0, lone);
  trace.finalize();
  auto result = opsight::io::read_native(opsight::io::write_native(trace));
  ASSERT_TRUE(result.ok());
  const Trace& copy = result.trace;
  EXPECT_EQ(describe_slices(copy), describe_slices(trace));
  EXPECT_TRUE(copy.slices.flags[2] & opsight::trace::kSliceUnfinished);
  EXPECT_FALSE(copy.slices.flags[1] & opsight::trace::kSliceUnfinished);
  EXPECT_EQ(copy.slices.parent[2], 1u);
  std::vector<std::string> lanes;
  for (const auto& track : copy.tracks)
    if (track.is_async())
      lanes.push_back(std::string(copy.str(track.name)) + " key=" +
                      std::to_string(track.async_key) + " tid=" + std::to_string(track.tid));
  EXPECT_EQ(lanes, (std::vector<std::string>{"Task-1 key=16 tid=30", "Task-2 key=16 tid=30",
                                             "track 32 key=32 tid=31"}));
  EXPECT_EQ(copy.run.overhead_ns, 500);
  // No late ends were invented for the unfinished span.
  for (const auto& [key, value] : copy.run.extra) EXPECT_NE(key, "ends_written_late_after_drops");
}

TEST(Native, ReadTraceFilesMergesInOrderAndNamesTheFileThatFails) {
  auto directory = std::filesystem::temp_directory_path() /
                   ("opsight_native_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  Trace first = sample_trace();
  Trace second;
  auto worker = second.thread_track(43000, 43001);
  second.slices.add(20'000, 100, second.intern("other process"), 0, worker);
  second.run.pid = 43000;
  second.run.command_line = "child";
  second.finalize();
  std::string first_path = (directory / "trace.42.opsight").string();
  std::string second_path = (directory / "trace.43000.json").string();
  ASSERT_FALSE(opsight::io::write_trace_file(first, first_path));
  ASSERT_FALSE(opsight::io::write_trace_file(second, second_path));

  auto merged = opsight::io::read_trace_files({first_path, second_path});
  ASSERT_TRUE(merged.ok()) << *merged.error;
  EXPECT_TRUE(merged.damage.empty());
  EXPECT_EQ(merged.trace.slices.size(), first.slices.size() + 1);
  EXPECT_EQ(merged.trace.run.command_line, first.run.command_line);
  EXPECT_EQ(merged.trace.processes.size(), 2u);

  std::string cut_path = (directory / "cut.opsight").string();
  std::string bytes = opsight::io::write_native(first);
  ASSERT_FALSE(opsight::io::write_file_bytes(cut_path, bytes.substr(0, bytes.size() - 10)));
  auto damaged = opsight::io::read_trace_files({second_path, cut_path});
  ASSERT_TRUE(damaged.ok());
  ASSERT_EQ(damaged.damage.size(), 1u);
  EXPECT_EQ(damaged.damage[0].rfind(cut_path + ": at byte ", 0), 0u) << damaged.damage[0];

  auto missing =
      opsight::io::read_trace_files({first_path, (directory / "missing.opsight").string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error->find("missing.opsight: cannot open"), std::string::npos)
      << *missing.error;
  EXPECT_EQ(missing.trace.slices.size(), 0u);
  EXPECT_FALSE(opsight::io::read_trace_files({}).ok());
  std::filesystem::remove_all(directory);
}

}  // namespace

namespace {

// A name id far beyond the others (up to 2^24 is valid) is read, without a vector of its
// size behind it.
TEST(Native, AFarNameIdIsReadWithoutADenseTable) {
  using opsight::format::SlotKind;
  const uint32_t far = (1u << 24) - 1;
  auto result = opsight::io::read_native(opsight::io::native_test_files::file_with_events(
      {opsight::io::native_test_files::slot(10, SlotKind::kBegin, far),
       opsight::io::native_test_files::slot(20, SlotKind::kEnd)},
      far));
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result.trace.slices.size(), 1u);
  EXPECT_EQ(result.trace.str(result.trace.slices.name[0]), "span");
}

}  // namespace
