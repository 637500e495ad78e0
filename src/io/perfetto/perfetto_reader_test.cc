// Tests of the Perfetto protobuf reader: traces written by opsight's writer read back alike
// (round trip), the golden files made with Perfetto's own protos (tests/data/perfetto_sdk/,
// generate.py there), hand-built packets for what the goldens do not cover, and malformed
// input with the exact error each gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/io.hpp"
#include "io/perfetto/perfetto_fields.hpp"
#include "io/perfetto/perfetto_test_support.hpp"
#include "trace/gpu_tracks.hpp"
#include "trace/trace.hpp"
#include "wire/proto_decoder.hpp"
#include "wire/proto_encoder.hpp"

namespace {

namespace fields = opsight::io::perfetto::fields;
using opsight::io::ReadResult;
using opsight::io::perfetto::testing::every_feature_trace;
using opsight::trace::ArgType;
using opsight::trace::ArgValue;
using opsight::trace::InstantScope;
using opsight::trace::RowIndex;
using opsight::trace::Trace;
using opsight::wire::ProtoEncoder;

// ---- the trace as comparable text ------------------------------------------------------

std::string arg_text(const Trace& trace, const ArgValue& value) {
  switch (value.type) {
    case ArgType::kInt:
      return std::to_string(value.int_value);
    case ArgType::kBool:
      return value.int_value != 0 ? "true" : "false";
    case ArgType::kDouble: {
      std::ostringstream text;
      text << value.double_value;
      return text.str();
    }
    case ArgType::kString:
      return "'" + std::string(trace.str(value.string_value)) + "'";
  }
  return "?";
}

std::string args_text(const Trace& trace, const opsight::trace::ArgTable& args, RowIndex begin,
                      RowIndex end) {
  std::vector<std::string> parts;
  for (RowIndex row = begin; row < end; ++row)
    parts.push_back(std::string(trace.str(args.key[row])) + "=" + arg_text(trace, args.value[row]));
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : " ") + part;
  return text;
}

// "track|ts|dur|depth|name|category|args[|unfinished]", one per slice, sorted.
std::vector<std::string> slice_lines(const Trace& trace) {
  std::vector<std::string> lines;
  const auto& slices = trace.slices;
  for (RowIndex row = 0; row < slices.size(); ++row) {
    std::string line =
        trace.track_label(slices.track[row]) + "|" + std::to_string(slices.ts[row]) + "|" +
        std::to_string(slices.dur[row]) + "|" + std::to_string(slices.depth[row]) + "|" +
        std::string(trace.str(slices.name[row])) + "|" +
        std::string(trace.str(slices.category[row])) + "|" +
        args_text(trace, trace.slice_args, slices.args_begin[row], slices.args_begin[row + 1]);
    if (slices.flags[row] & opsight::trace::kSliceUnfinished) line += "|unfinished";
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string slice_name_at(const Trace& trace, RowIndex row) {
  return std::string(trace.str(trace.slices.name[row])) + "@" +
         std::to_string(trace.slices.ts[row]);
}

std::vector<std::string> flow_lines(const Trace& trace) {
  std::vector<std::string> lines;
  for (size_t row = 0; row < trace.flows.size(); ++row)
    lines.push_back(slice_name_at(trace, trace.flows.slice_out[row]) + " -> " +
                    slice_name_at(trace, trace.flows.slice_in[row]));
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Instants: a thread's with its track, a process's with its pid, a global one alone.
std::vector<std::string> instant_lines(const Trace& trace) {
  std::vector<std::string> lines;
  const auto& instants = trace.instants;
  for (RowIndex row = 0; row < instants.size(); ++row) {
    std::string where;
    switch (instants.scope[row]) {
      case InstantScope::kThread:
        where = "thread " + trace.track_label(instants.track[row]);
        break;
      case InstantScope::kProcess:
        where = "process " + std::to_string(trace.tracks[instants.track[row]].pid);
        break;
      case InstantScope::kGlobal:
        where = "global";
        break;
    }
    lines.push_back(std::to_string(instants.ts[row]) + " " +
                    std::string(trace.str(instants.name[row])) + " [" +
                    std::string(trace.str(instants.category[row])) + "] " + where + " " +
                    args_text(trace, trace.instant_args, instants.args_begin[row],
                              instants.args_begin[row + 1]));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> counter_lines(const Trace& trace) {
  std::vector<std::string> lines;
  for (RowIndex row = 0; row < trace.counters.size(); ++row) {
    const auto& track = trace.counter_tracks[trace.counters.counter_track[row]];
    std::ostringstream line;
    line << "pid " << track.pid << " " << trace.str(track.name) << " (" << trace.str(track.unit)
         << ") " << trace.counters.ts[row] << " " << trace.counters.value[row];
    lines.push_back(line.str());
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> process_lines(const Trace& trace) {
  std::vector<std::string> lines;
  for (const auto& process : trace.processes) {
    std::string line = std::to_string(process.pid) + " '" + std::string(trace.str(process.name)) +
                       "' sort " + std::to_string(process.sort_index);
    for (auto label : process.labels) line += " label '" + std::string(trace.str(label)) + "'";
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> thread_lines(const Trace& trace) {
  std::vector<std::string> lines;
  for (const auto& track : trace.tracks)
    if (track.kind == opsight::trace::TrackKind::kThread)
      lines.push_back(std::to_string(track.pid) + "/" + std::to_string(track.tid) + " '" +
                      std::string(trace.str(track.name)) + "' sort " +
                      std::to_string(track.sort_index));
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string extra(const Trace& trace, std::string_view key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return "";
}

ReadResult must_read(std::string_view bytes) {
  ReadResult result = opsight::io::read_perfetto(bytes);
  EXPECT_TRUE(result.ok()) << result.error->to_string("input");
  EXPECT_FALSE(result.damage.has_value()) << result.damage->to_string("input");
  return result;
}

// ---- round trip through the writer -----------------------------------------------------

// every_feature_trace (perfetto_test_support.hpp): the writer's tests use the same model.
TEST(PerfettoReader, RoundTripKeepsEveryFeatureTheWriterWrites) {
  Trace original = every_feature_trace();
  ReadResult read = must_read(opsight::io::write_perfetto(original));
  const Trace& back = read.trace;
  EXPECT_EQ(slice_lines(back), slice_lines(original));
  EXPECT_EQ(flow_lines(back), flow_lines(original));
  EXPECT_EQ(instant_lines(back), instant_lines(original));
  EXPECT_EQ(counter_lines(back), counter_lines(original));
  EXPECT_EQ(process_lines(back), process_lines(original));
  EXPECT_EQ(thread_lines(back), thread_lines(original));
  EXPECT_EQ(back.run.command_line, original.run.command_line);
  EXPECT_EQ(back.run.pid, 10);
  EXPECT_TRUE(back.run.has_unix_offset);
  EXPECT_EQ(back.run.unix_offset_ns, original.run.unix_offset_ns);
  EXPECT_EQ(back.run.clock, "monotonic");
  EXPECT_EQ(back.run.source_format, "perfetto");
  EXPECT_TRUE(back.run.complete);
  EXPECT_TRUE(back.run.extra.empty()) << back.run.extra[0].first;
  // The GPU stream is a GPU stream again (its key and place after the threads).
  bool found_stream = false;
  for (const auto& track : back.tracks)
    if (opsight::trace::is_gpu_stream_track(track)) {
      found_stream = true;
      EXPECT_EQ(opsight::trace::gpu_device_of_key(track.async_key), 1u);
      EXPECT_EQ(opsight::trace::gpu_stream_of_key(track.async_key), 7u);
      EXPECT_EQ(track.sort_index, opsight::trace::kGpuTrackSortBase + 100'007);
    }
  EXPECT_TRUE(found_stream);
  // Process order: the server (sort index 5) keeps its index.
  for (const auto& process : back.processes)
    if (process.pid == 10) {
      EXPECT_EQ(process.sort_index, 5);
    }
  // Written again, the bytes are the same: nothing was lost that the writer writes.
  EXPECT_EQ(opsight::io::write_perfetto(back).size(), opsight::io::write_perfetto(original).size());
}

TEST(PerfettoReader, RoundTripOfNegativeTimesKeepsDurationsAndOrder) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(-500, 100, trace.intern("early"), 0, track);
  trace.slices.add(0, 100, trace.intern("later"), 0, track);
  trace.finalize();
  ReadResult read = must_read(opsight::io::write_perfetto(trace));
  EXPECT_EQ(slice_lines(read.trace),
            (std::vector<std::string>{"thread 1|0|100|0|early||", "thread 1|500|100|0|later||"}));
  EXPECT_FALSE(read.trace.run.has_unix_offset);
}

TEST(PerfettoReader, EmptyTraceFromTheWriterReadsEmpty) {
  Trace trace;
  trace.finalize();
  ReadResult read = must_read(opsight::io::write_perfetto(trace));
  EXPECT_EQ(read.trace.slices.size(), 0u);
  EXPECT_EQ(read.trace.run.clock, "monotonic");
}

// ---- what Perfetto's own protos write (tests/data/perfetto_sdk/generate.py) ------------

std::string golden(const std::string& name) {
  std::ifstream file(std::string(OPSIGHT_SOURCE_DIR) + "/tests/data/perfetto_sdk/" + name,
                     std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

TEST(PerfettoReader, SdkTrackEventsGolden) {
  std::string bytes = golden("sdk_track_events.pftrace");
  ASSERT_FALSE(bytes.empty()) << "run tests/data/perfetto_sdk/generate.py";
  ReadResult read = must_read(bytes);
  const Trace& trace = read.trace;
  constexpr int64_t kBoot = 5'000'000'000;  // the snapshot's BOOTTIME
  auto at = [&](int64_t us) { return std::to_string(kBoot + us * 1000); };
  EXPECT_EQ(slice_lines(trace),
            (std::vector<std::string>{
                "io|" + at(1500) + "|100000|0|read||",
                "io|" + at(2600) + "|0|0|drain|||unfinished",
                "main|" + at(1000) +
                    "|1000000|0|handle|rpc,net|size=-7 user='alice' path='/v1' "
                    "big='18446744073709551615' ratio=0.25 ok=true where='0xbeef' "
                    "legacy='{\"a\":1}' shape='{\"rows\":8,\"cols\":1024}' ids='[\"a\",\"b\"]' "
                    "nested='{\"k\":3}'",
                "main|" + at(1100) + "|50000|1|parse||",
                "requests|" + at(1200) + "|1300000|0|request||",
            }));
  EXPECT_EQ(flow_lines(trace),
            (std::vector<std::string>{"handle@" + at(1000) + " -> request@" + at(1200),
                                      "parse@" + at(1100) + " -> read@" + at(1500)}));
  EXPECT_EQ(instant_lines(trace), (std::vector<std::string>{at(1200) + " mark [] thread main ",
                                                            at(3000) + " retry [] thread main "}));
  EXPECT_EQ(counter_lines(trace), (std::vector<std::string>{
                                      "pid 42 heap (bytes) " + at(1300) + " 2048",
                                      "pid 42 queue depth (count) " + at(1200) + " 3",
                                      "pid 42 queue depth (count) " + at(1300) + " 5",
                                      "pid 42 thread time (ns) " + at(1000) + " 250",
                                      "pid 42 thread time (ns) " + at(2000) + " 900",
                                  }));
  EXPECT_EQ(process_lines(trace), (std::vector<std::string>{"42 'sdk_server' sort 0"}));
  EXPECT_EQ(thread_lines(trace),
            (std::vector<std::string>{"42/43 'main' sort 0", "42/44 'io' sort 0"}));
  EXPECT_EQ(trace.run.command_line, "python serve.py");
  EXPECT_EQ(trace.run.pid, 42);
  EXPECT_EQ(trace.run.clock, "boottime");
  EXPECT_TRUE(trace.run.has_unix_offset);
  EXPECT_EQ(trace.run.unix_offset_ns, 1'700'000'000'000'000'000 - kBoot);
  EXPECT_EQ(extra(trace, "unfinished_slices"), "1");
  EXPECT_EQ(extra(trace, "packets_without_incremental_state"), "1");
  EXPECT_EQ(extra(trace, "unknown_interned_ids"), "");
}

TEST(PerfettoReader, SdkPlainStringsGolden) {
  std::string bytes = golden("sdk_plain_strings.pftrace");
  ASSERT_FALSE(bytes.empty()) << "run tests/data/perfetto_sdk/generate.py";
  ReadResult read = must_read(bytes);
  const Trace& trace = read.trace;
  EXPECT_EQ(slice_lines(trace), (std::vector<std::string>{
                                    "global lane|1500|100|0|lane work|demo|",
                                    "loop|1000|300|0|step|demo|",
                                    "loop|1100|100|1|inner|demo|",
                                }));
  EXPECT_EQ(instant_lines(trace), (std::vector<std::string>{"1400 tick [demo] global "}));
  EXPECT_EQ(counter_lines(trace),
            (std::vector<std::string>{"pid 7 temperature (celsius) 1700 21.5"}));
  EXPECT_EQ(trace.run.clock, "boottime");
  EXPECT_FALSE(trace.run.has_unix_offset);
}

// ---- hand-built packets ----------------------------------------------------------------

// Builds a trace packet by packet with the encoder.
class PacketWriter {
 public:
  PacketWriter() : encoder_(out_) {}
  // A packet; `fill` writes its fields.
  template <typename Fill>
  void packet(Fill&& fill) {
    size_t packet = encoder_.begin_message(fields::kTracePacket);
    fill(encoder_);
    encoder_.end_message(packet);
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
  ProtoEncoder encoder_;
};

void thread_descriptor(ProtoEncoder& e, uint64_t uuid, int64_t pid, int64_t tid,
                       std::string_view name) {
  size_t descriptor = e.begin_message(fields::packet::kTrackDescriptor);
  e.varint_field(fields::track::kUuid, uuid);
  size_t thread = e.begin_message(fields::track::kThread);
  e.int_field(fields::thread::kPid, pid);
  e.int_field(fields::thread::kTid, tid);
  e.bytes_field(fields::thread::kThreadName, name);
  e.end_message(thread);
  e.end_message(descriptor);
}

void named_event(ProtoEncoder& e, uint64_t type, uint64_t track, std::string_view name) {
  size_t event = e.begin_message(fields::packet::kTrackEvent);
  e.varint_field(fields::event::kType, type);
  e.varint_field(fields::event::kTrackUuid, track);
  if (!name.empty()) e.bytes_field(fields::event::kName, name);
  e.end_message(event);
}

TEST(PerfettoReader, EndsOnAnotherSequenceAreSortedByTime) {
  // An async track used by two sequences whose packets are not in time order in the file.
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) {
    size_t descriptor = e.begin_message(fields::packet::kTrackDescriptor);
    e.varint_field(fields::track::kUuid, 5);
    e.bytes_field(fields::track::kName, "jobs");
    e.end_message(descriptor);
  });
  auto at = [&](uint64_t sequence, uint64_t ts, uint64_t type, std::string_view name) {
    writer.packet([&](ProtoEncoder& e) {
      e.varint_field(fields::packet::kTrustedPacketSequenceId, sequence);
      e.varint_field(fields::packet::kTimestamp, ts);
      named_event(e, type, 5, name);
    });
  };
  at(2, 300, fields::event::kTypeSliceEnd, "");  // ends "b" (later in time)
  at(1, 100, fields::event::kTypeSliceBegin, "a");
  at(1, 150, fields::event::kTypeSliceEnd, "");
  at(1, 200, fields::event::kTypeSliceBegin, "b");
  at(1, 400, fields::event::kTypeSliceEnd, "");  // nothing open: counted
  ReadResult read = must_read(writer.bytes());
  EXPECT_EQ(slice_lines(read.trace),
            (std::vector<std::string>{"jobs|100|50|0|a||", "jobs|200|100|0|b||"}));
  EXPECT_EQ(extra(read.trace, "unmatched_slice_ends"), "1");
}

TEST(PerfettoReader, InternedStringsAreScopedToTheirSequenceAndReset) {
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) { thread_descriptor(e, 1, 3, 4, "t"); });
  auto interned_instant = [&](uint64_t sequence, uint64_t ts, uint64_t flags,
                              std::string_view new_name) {
    writer.packet([&](ProtoEncoder& e) {
      e.varint_field(fields::packet::kTrustedPacketSequenceId, sequence);
      e.varint_field(fields::packet::kTimestamp, ts);
      e.varint_field(fields::packet::kSequenceFlags, flags);
      if (!new_name.empty()) {
        size_t interned = e.begin_message(fields::packet::kInternedData);
        size_t entry = e.begin_message(fields::interned::kEventNames);
        e.varint_field(fields::interned::kIid, 1);
        e.bytes_field(fields::interned::kName, new_name);
        e.end_message(entry);
        e.end_message(interned);
      }
      size_t event = e.begin_message(fields::packet::kTrackEvent);
      e.varint_field(fields::event::kType, fields::event::kTypeInstant);
      e.varint_field(fields::event::kTrackUuid, 1);
      e.varint_field(fields::event::kNameIid, 1);
      e.end_message(event);
    });
  };
  constexpr uint64_t kClear = fields::packet::kSeqIncrementalStateCleared;
  constexpr uint64_t kNeeds = fields::packet::kSeqNeedsIncrementalState;
  interned_instant(1, 10, kClear | kNeeds, "one");
  interned_instant(2, 20, kClear | kNeeds, "two");
  interned_instant(1, 30, kNeeds, "");
  interned_instant(2, 40, kNeeds, "");
  interned_instant(1, 50, kClear | kNeeds, "");  // cleared: iid 1 is unknown now
  interned_instant(3, 60, kNeeds, "");           // never cleared: skipped
  ReadResult read = must_read(writer.bytes());
  EXPECT_EQ(instant_lines(read.trace), (std::vector<std::string>{
                                           "10 one [] thread t ",
                                           "20 two [] thread t ",
                                           "30 one [] thread t ",
                                           "40 two [] thread t ",
                                           "50  [] thread t ",
                                       }));
  EXPECT_EQ(extra(read.trace, "unknown_interned_ids"), "1");
  EXPECT_EQ(extra(read.trace, "packets_without_incremental_state"), "1");
}

TEST(PerfettoReader, NewDefaultsReplaceTheOldOnesWhole) {
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) { thread_descriptor(e, 1, 3, 4, "t"); });
  auto defaults = [&](bool with_track) {
    writer.packet([&](ProtoEncoder& e) {
      e.varint_field(fields::packet::kTrustedPacketSequenceId, 2);
      size_t packet_defaults = e.begin_message(fields::packet::kTracePacketDefaults);
      e.varint_field(fields::packet_defaults::kTimestampClockId, fields::kBuiltinClockBoottime);
      if (with_track) {
        size_t event_defaults = e.begin_message(fields::packet_defaults::kTrackEventDefaults);
        e.varint_field(fields::event_defaults::kTrackUuid, 1);
        e.end_message(event_defaults);
      }
      e.end_message(packet_defaults);
    });
  };
  auto instant = [&](uint64_t ts, std::string_view name) {
    writer.packet([&](ProtoEncoder& e) {
      e.varint_field(fields::packet::kTrustedPacketSequenceId, 2);
      e.varint_field(fields::packet::kTimestamp, ts);
      size_t event = e.begin_message(fields::packet::kTrackEvent);
      e.varint_field(fields::event::kType, fields::event::kTypeInstant);
      e.bytes_field(fields::event::kName, name);
      e.end_message(event);
    });
  };
  defaults(true);
  instant(10, "on the default track");
  defaults(false);
  instant(20, "on no track");
  ReadResult read = must_read(writer.bytes());
  EXPECT_EQ(instant_lines(read.trace),
            (std::vector<std::string>{"10 on the default track [] thread t "}));
  EXPECT_EQ(extra(read.trace, "events_without_track"), "1");
}

TEST(PerfettoReader, LegacyThreadDescriptorsEventsAndFlowBindings) {
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) {
    e.varint_field(fields::packet::kTrustedPacketSequenceId, 9);
    size_t thread = e.begin_message(fields::packet::kThreadDescriptor);
    e.int_field(fields::thread::kPid, 5);
    e.int_field(fields::thread::kTid, 6);
    e.bytes_field(fields::thread::kThreadName, "legacy");
    e.int_field(fields::thread::kReferenceTimestampUs, 1000);
    e.end_message(thread);
  });
  auto legacy = [&](int64_t delta_us, char phase, std::string_view name, int64_t duration_us,
                    uint64_t bind_id, uint64_t direction) {
    writer.packet([&](ProtoEncoder& e) {
      e.varint_field(fields::packet::kTrustedPacketSequenceId, 9);
      size_t event = e.begin_message(fields::packet::kTrackEvent);
      e.int_field(fields::event::kTimestampDeltaUs, delta_us);
      if (!name.empty()) e.bytes_field(fields::event::kName, name);
      size_t legacy_event = e.begin_message(fields::event::kLegacyEvent);
      e.int_field(fields::legacy_event::kPhase, phase);
      if (duration_us >= 0) e.int_field(fields::legacy_event::kDurationUs, duration_us);
      if (bind_id != 0) {
        e.varint_field(fields::legacy_event::kBindId, bind_id);
        e.varint_field(fields::legacy_event::kFlowDirection, direction);
      }
      e.end_message(legacy_event);
      e.end_message(event);
    });
  };
  legacy(10, 'X', "whole", 5, 77, fields::legacy_event::kFlowOut);  // 1010 us, 5 us long
  legacy(10, 'B', "open", -1, 77, fields::legacy_event::kFlowIn);   // 1020 us
  legacy(10, 'E', "", -1, 0, 0);                                    // 1030 us
  legacy(0, 'M', "metadata", -1, 0, 0);                             // skipped, counted
  ReadResult read = must_read(writer.bytes());
  EXPECT_EQ(slice_lines(read.trace), (std::vector<std::string>{"legacy|1010000|5000|0|whole||",
                                                               "legacy|1020000|10000|0|open||"}));
  EXPECT_EQ(flow_lines(read.trace), (std::vector<std::string>{"whole@1010000 -> open@1020000"}));
  EXPECT_EQ(extra(read.trace, "skipped_legacy_events"), "1");
}

TEST(PerfettoReader, ClocksWithoutASnapshotToTheTraceClockAreCounted) {
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) { thread_descriptor(e, 1, 3, 4, "t"); });
  writer.packet([](ProtoEncoder& e) {
    e.varint_field(fields::packet::kTimestamp, 77);
    e.varint_field(fields::packet::kTimestampClockId, fields::kBuiltinClockMonotonic);
    named_event(e, fields::event::kTypeInstant, 1, "unconverted");
  });
  ReadResult read = must_read(writer.bytes());
  EXPECT_EQ(instant_lines(read.trace), (std::vector<std::string>{"77 unconverted [] thread t "}));
  EXPECT_EQ(extra(read.trace, "timestamps_not_converted"), "1");
}

TEST(PerfettoReader, PackedRepeatedFieldsAreRead) {
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) { thread_descriptor(e, 1, 3, 4, "t"); });
  auto slice = [&](uint64_t ts, std::string_view name, const std::string& packed_flows,
                   uint32_t field) {
    writer.packet([&](ProtoEncoder& e) {
      e.varint_field(fields::packet::kTimestamp, ts);
      size_t event = e.begin_message(fields::packet::kTrackEvent);
      e.varint_field(fields::event::kType, fields::event::kTypeSliceBegin);
      e.varint_field(fields::event::kTrackUuid, 1);
      e.bytes_field(fields::event::kName, name);
      e.bytes_field(field, packed_flows);
      e.end_message(event);
    });
    writer.packet([&](ProtoEncoder& e) {
      e.varint_field(fields::packet::kTimestamp, ts + 5);
      named_event(e, fields::event::kTypeSliceEnd, 1, "");
    });
  };
  std::string two_ids(16, '\0');
  two_ids[0] = 1;
  two_ids[8] = 2;
  slice(10, "from", two_ids, fields::event::kFlowIds);
  slice(20, "to", std::string("\x01\x02", 2), fields::event::kTerminatingFlowIdsOld);
  ReadResult read = must_read(writer.bytes());
  EXPECT_EQ(flow_lines(read.trace),
            (std::vector<std::string>{"from@10 -> to@20", "from@10 -> to@20"}));
}

// ---- malformed input -------------------------------------------------------------------

std::string error_of(std::string_view bytes) {
  ReadResult read = opsight::io::read_perfetto(bytes);
  if (read.ok()) return "(read)";
  return read.error->to_string("t.pftrace");
}

TEST(PerfettoReader, MalformedInputGivesTheByteAndTheField) {
  using namespace std::string_literals;
  EXPECT_EQ(error_of(""), "t.pftrace: at byte 0: file is empty");
  // A packet of two bytes: field 1 of TracePacket, a varint that never ends.
  EXPECT_EQ(error_of("\x0a\x02\x08\x80"s),
            "t.pftrace: at byte 3: TracePacket field 1: varint cut short by the end of the "
            "message");
  EXPECT_EQ(error_of("\x0a\x10\x08\x01"s),
            "t.pftrace: at byte 0: Trace.packet (field 1): length 16 runs past the end of the "
            "file (2 bytes left)");
  EXPECT_EQ(error_of("\x0a\x02\x0b\x00"s),
            "t.pftrace: at byte 2: TracePacket field 1: wire type 3 (a group: not used by these "
            "messages)");
  EXPECT_EQ(error_of("\x0a\x02\x0f\x00"s),
            "t.pftrace: at byte 2: TracePacket field 1: wire type 7 does not exist");
  // A length of 2^63 - 1: refused before anything is allocated or read.
  EXPECT_EQ(error_of("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f"s),
            "t.pftrace: at byte 0: Trace.packet (field 1): length 9223372036854775807 runs past "
            "the end of the file (0 bytes left)");
  EXPECT_EQ(error_of("\x0a\x0b\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"s),
            "t.pftrace: at byte 3: TracePacket field 1: varint longer than 64 bits");
  EXPECT_EQ(error_of("\x0a\x01\x00"s),
            "t.pftrace: at byte 2: TracePacket: field number 0 (not a valid field)");
  EXPECT_EQ(error_of("\x10\x01"s),
            "t.pftrace: at byte 0: not a Perfetto trace: no TracePacket (field 1 of Trace) in "
            "its 2 bytes");
  EXPECT_EQ(error_of("{\"traceEvents\":[]}"s),
            "t.pftrace: at byte 0: Trace field 15: wire type 3 (a group: not used by these "
            "messages)");
  // A known field with the wire type of another: TrackEvent.name as a varint.
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) {
    size_t event = e.begin_message(fields::packet::kTrackEvent);
    e.varint_field(fields::event::kName, 5);
    e.end_message(event);
  });
  EXPECT_EQ(error_of(writer.bytes()),
            "t.pftrace: at byte 4: TrackEvent.name (field 23): wire type 0, expected 2");
}

TEST(PerfettoReader, DamageKeepsThePacketsBeforeIt) {
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) { thread_descriptor(e, 1, 3, 4, "t"); });
  writer.packet([](ProtoEncoder& e) {
    e.varint_field(fields::packet::kTimestamp, 10);
    named_event(e, fields::event::kTypeSliceBegin, 1, "kept");
  });
  std::string bytes = writer.bytes();
  const size_t cut_at = bytes.size();
  writer.packet([](ProtoEncoder& e) {
    e.varint_field(fields::packet::kTimestamp, 20);
    named_event(e, fields::event::kTypeSliceEnd, 1, "");
  });
  // Cut the last packet short by one byte: the file ends inside it.
  std::string cut = writer.bytes().substr(0, writer.bytes().size() - 1);
  ReadResult read = opsight::io::read_perfetto(cut);
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read.damage.has_value());
  EXPECT_EQ(read.damage->to_string("t.pftrace"),
            "t.pftrace: at byte " + std::to_string(cut_at) + ": Trace.packet (field 1): length " +
                std::to_string(writer.bytes().size() - cut_at - 2) +
                " runs past the end of the file (" +
                std::to_string(writer.bytes().size() - cut_at - 3) +
                " bytes left); read up to the last whole packet before it");
  EXPECT_FALSE(read.trace.run.complete);
  EXPECT_EQ(slice_lines(read.trace), (std::vector<std::string>{"t|10|0|0|kept|||unfinished"}));
  // A damaged nested message (an annotation's length past its event) stops there too.
  PacketWriter nested;
  nested.packet([](ProtoEncoder& e) { thread_descriptor(e, 1, 3, 4, "t"); });
  std::string good = nested.bytes();
  nested.packet([](ProtoEncoder& e) {
    size_t event = e.begin_message(fields::packet::kTrackEvent);
    e.varint_field(fields::event::kType, fields::event::kTypeInstant);
    e.varint_field(fields::event::kTrackUuid, 1);
    e.bytes_field(fields::event::kDebugAnnotations, std::string("\x52\x09", 2));
    e.end_message(event);
  });
  read = opsight::io::read_perfetto(nested.bytes());
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read.damage.has_value());
  EXPECT_EQ(read.damage->message,
            "DebugAnnotation.name (field 10): length 9 runs past the end of the message (0 "
            "bytes left); read up to the last whole packet before it");
  EXPECT_EQ(read.damage->byte_offset, good.size() + 10);
  EXPECT_EQ(read.trace.instants.size(), 0u);
}

// ---- files -------------------------------------------------------------------------------

TEST(PerfettoReader, FilesAreReadByExtensionEvenWhenTheyLookLikeJson) {
  std::string path = ::testing::TempDir() + "perfetto_reader_" + std::to_string(::getpid());
  Trace original = every_feature_trace();
  ASSERT_EQ(opsight::io::write_trace_file(original, path + ".pftrace"), std::nullopt);
  ReadResult read = opsight::io::read_trace_file(path + ".pftrace");
  ASSERT_TRUE(read.ok()) << read.error->to_string(path);
  EXPECT_EQ(slice_lines(read.trace), slice_lines(original));

  // A first packet of 123 bytes starts "\n{": Chrome JSON by its bytes, Perfetto by its name.
  PacketWriter writer;
  writer.packet([](ProtoEncoder& e) { e.bytes_field(99, std::string(120, 'x')); });
  writer.packet([](ProtoEncoder& e) { thread_descriptor(e, 1, 3, 4, "t"); });
  ASSERT_EQ(writer.bytes().substr(0, 2), "\n{");
  ASSERT_EQ(opsight::io::write_file_bytes(path + "-brace.pftrace", writer.bytes()), std::nullopt);
  read = opsight::io::read_trace_file(path + "-brace.pftrace");
  ASSERT_TRUE(read.ok()) << read.error->to_string(path);
  EXPECT_EQ(thread_lines(read.trace), (std::vector<std::string>{"3/4 't' sort 0"}));
  std::remove((path + ".pftrace").c_str());
  std::remove((path + "-brace.pftrace").c_str());
}

}  // namespace
