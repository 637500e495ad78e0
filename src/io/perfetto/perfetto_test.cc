// Tests of the Perfetto protobuf writer: the encoder's bytes against hand-worked wire
// encodings, then whole traces written and decoded back with the test-only field walker
// (proto_decoder_for_tests.hpp) into descriptors and events, checked field by field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "io/io.hpp"
#include "io/perfetto/perfetto_fields.hpp"
#include "io/perfetto/perfetto_test_support.hpp"
#include "trace/gpu_tracks.hpp"
#include "trace/trace.hpp"
#include "wire/proto_decoder_for_tests.hpp"
#include "wire/proto_encoder.hpp"

namespace {

namespace fields = opsight::io::perfetto::fields;
using opsight::io::perfetto::testing::every_feature_trace;
using opsight::trace::ArgValue;
using opsight::trace::Trace;
using opsight::wire::ProtoEncoder;
using opsight::wire::testing::decode_message;
using opsight::wire::testing::find_field;
using opsight::wire::testing::find_fields;
using opsight::wire::testing::ProtoField;

std::string hex(const std::string& bytes) {
  std::string text;
  char digits[4];
  for (unsigned char c : bytes) {
    std::snprintf(digits, sizeof digits, "%02x", c);
    text += digits;
  }
  return text;
}

TEST(ProtoEncoder, WritesTheWireFormat) {
  std::string out;
  ProtoEncoder encoder(out);
  encoder.varint_field(1, 150);  // the protobuf documentation's example: 08 96 01
  encoder.bytes_field(2, "testing");
  encoder.int_field(3, -1);  // ten bytes of two's complement
  encoder.fixed64_field(4, 0x0102030405060708ULL);
  encoder.double_field(5, 1.0);
  EXPECT_EQ(hex(out),
            "089601"
            "120774657374696e67"
            "18ffffffffffffffffff01"
            "210807060504030201"
            "29000000000000f03f");
}

TEST(ProtoEncoder, NestedMessagesGetTheShortestLength) {
  std::string out;
  ProtoEncoder encoder(out);
  size_t small = encoder.begin_message(1);
  encoder.varint_field(1, 1);
  encoder.end_message(small);
  EXPECT_EQ(hex(out), "0a020801");

  out.clear();
  size_t outer = encoder.begin_message(1);
  size_t inner = encoder.begin_message(2);
  encoder.bytes_field(3, std::string(200, 'x'));  // 203 bytes: a two-byte length
  encoder.end_message(inner);
  encoder.varint_field(4, 7);
  encoder.end_message(outer);
  auto top = decode_message(out);
  ASSERT_TRUE(top.has_value());
  ASSERT_EQ(top->size(), 1u);
  auto outer_fields = decode_message((*top)[0].bytes);
  ASSERT_TRUE(outer_fields.has_value());
  ASSERT_EQ(outer_fields->size(), 2u);
  EXPECT_EQ((*outer_fields)[1].number, 4u);
  EXPECT_EQ((*outer_fields)[1].value, 7u);
  auto inner_fields = decode_message((*outer_fields)[0].bytes);
  ASSERT_TRUE(inner_fields.has_value());
  EXPECT_EQ((*inner_fields)[0].bytes, std::string(200, 'x'));
  // Outer, inner and string: a key and a two-byte length each; then field 4: no padding.
  EXPECT_EQ(out.size(), 3u + 3u + 3u + 200u + 2u);
}

// ---- a written trace, decoded ----------------------------------------------------------

struct Descriptor {
  uint64_t uuid = 0;
  uint64_t parent = 0;
  bool has_parent = false;
  std::string name;
  int64_t rank = -1;
  bool is_process = false, is_thread = false, is_counter = false;
  int64_t pid = 0, tid = 0, legacy_sort_index = 0;
  std::string process_name, thread_name, unit_name;
  std::vector<std::string> labels, cmdline;
  uint64_t unit = 0, child_ordering = 0, process_ordering = 0;
};

struct Annotation {
  std::string name;
  char type = '?';  // i, d, s, b
  int64_t int_value = 0;
  double double_value = 0;
  std::string string_value;
};

struct Event {
  uint64_t ts = 0;
  uint64_t type = 0;
  uint64_t track = 0;
  std::string name, category;
  std::vector<uint64_t> flows, terminating_flows;
  double counter_value = 0;
  std::vector<Annotation> annotations;
};

struct Decoded {
  std::vector<std::vector<ProtoField>> packets;
  std::map<uint64_t, Descriptor> descriptors;
  std::vector<Event> events;
  // How many times each interned string was sent, by kind ("name", "category", ...).
  std::map<std::string, int> interned_count;
  uint64_t clock_id = 0;
  std::vector<std::pair<uint64_t, uint64_t>> clock_snapshot;  // (clock id, timestamp)
  uint64_t primary_clock = 0;
};

std::vector<ProtoField> must_decode(std::string_view bytes) {
  std::string error;
  auto decoded = decode_message(bytes, &error);
  EXPECT_TRUE(decoded.has_value()) << error;
  return decoded.value_or(std::vector<ProtoField>{});
}

std::string_view field_bytes(const std::vector<ProtoField>& message, uint32_t number) {
  const ProtoField* field = find_field(message, number);
  return field ? field->bytes : std::string_view();
}

Descriptor decode_descriptor(std::string_view bytes) {
  Descriptor descriptor;
  for (const ProtoField& field : must_decode(bytes)) {
    switch (field.number) {
      case fields::track::kUuid:
        descriptor.uuid = field.value;
        break;
      case fields::track::kParentUuid:
        descriptor.parent = field.value;
        descriptor.has_parent = true;
        break;
      case fields::track::kName:
        descriptor.name = field.bytes;
        break;
      case fields::track::kSiblingOrderRank:
        descriptor.rank = field.as_int();
        break;
      case fields::track::kChildOrdering:
        descriptor.child_ordering = field.value;
        break;
      case fields::track::kProcessOrdering:
        descriptor.process_ordering = field.value;
        break;
      case fields::track::kProcess:
        descriptor.is_process = true;
        for (const ProtoField& inner : must_decode(field.bytes)) {
          if (inner.number == fields::process::kPid) descriptor.pid = inner.as_int();
          if (inner.number == fields::process::kProcessName) descriptor.process_name = inner.bytes;
          if (inner.number == fields::process::kProcessLabels)
            descriptor.labels.emplace_back(inner.bytes);
          if (inner.number == fields::process::kCmdline)
            descriptor.cmdline.emplace_back(inner.bytes);
          if (inner.number == fields::process::kLegacySortIndex)
            descriptor.legacy_sort_index = inner.as_int();
        }
        break;
      case fields::track::kThread:
        descriptor.is_thread = true;
        for (const ProtoField& inner : must_decode(field.bytes)) {
          if (inner.number == fields::thread::kPid) descriptor.pid = inner.as_int();
          if (inner.number == fields::thread::kTid) descriptor.tid = inner.as_int();
          if (inner.number == fields::thread::kThreadName) descriptor.thread_name = inner.bytes;
        }
        break;
      case fields::track::kCounter:
        descriptor.is_counter = true;
        for (const ProtoField& inner : must_decode(field.bytes)) {
          if (inner.number == fields::counter::kUnit) descriptor.unit = inner.value;
          if (inner.number == fields::counter::kUnitName) descriptor.unit_name = inner.bytes;
        }
        break;
      default:
        break;
    }
  }
  return descriptor;
}

Decoded decode_trace(const std::string& bytes) {
  Decoded decoded;
  std::map<uint64_t, std::string> names, categories, annotation_names, strings;
  auto intern = [&](std::string_view interned_bytes, uint32_t kind,
                    std::map<uint64_t, std::string>& table, const std::string& label) {
    // (Kept in a variable: a range-for over a call on a temporary would dangle.)
    const auto interned_fields = must_decode(interned_bytes);
    for (const ProtoField* entry : find_fields(interned_fields, kind)) {
      auto entry_fields = must_decode(entry->bytes);
      const ProtoField* iid = find_field(entry_fields, fields::interned::kIid);
      EXPECT_NE(iid, nullptr);
      if (iid == nullptr) continue;
      EXPECT_EQ(table.count(iid->value), 0u) << label << " iid " << iid->value << " sent twice";
      std::string text(field_bytes(entry_fields, fields::interned::kName));
      table[iid->value] = text;
      ++decoded.interned_count[label + ":" + text];
    }
  };
  for (const ProtoField& packet_field : must_decode(bytes)) {
    EXPECT_EQ(packet_field.number, fields::kTracePacket);
    auto packet = must_decode(packet_field.bytes);
    decoded.packets.push_back(packet);
    const ProtoField* sequence = find_field(packet, fields::packet::kTrustedPacketSequenceId);
    EXPECT_TRUE(sequence != nullptr && sequence->value == 1);
    if (auto* defaults = find_field(packet, fields::packet::kTracePacketDefaults)) {
      auto clock = must_decode(defaults->bytes);
      if (auto* id = find_field(clock, fields::packet_defaults::kTimestampClockId))
        decoded.clock_id = id->value;
    }
    if (auto* snapshot = find_field(packet, fields::packet::kClockSnapshot)) {
      auto snapshot_fields = must_decode(snapshot->bytes);
      for (const ProtoField* clock :
           find_fields(snapshot_fields, fields::clock_snapshot::kClocks)) {
        auto clock_fields = must_decode(clock->bytes);
        decoded.clock_snapshot.emplace_back(
            find_field(clock_fields, fields::clock_snapshot::kClockId)->value,
            find_field(clock_fields, fields::clock_snapshot::kTimestamp)->value);
      }
      decoded.primary_clock =
          find_field(snapshot_fields, fields::clock_snapshot::kPrimaryTraceClock)->value;
    }
    if (auto* descriptor = find_field(packet, fields::packet::kTrackDescriptor)) {
      Descriptor track = decode_descriptor(descriptor->bytes);
      EXPECT_EQ(decoded.descriptors.count(track.uuid), 0u) << "uuid " << track.uuid;
      decoded.descriptors[track.uuid] = track;
    }
    if (auto* interned = find_field(packet, fields::packet::kInternedData)) {
      intern(interned->bytes, fields::interned::kEventNames, names, "name");
      intern(interned->bytes, fields::interned::kEventCategories, categories, "category");
      intern(interned->bytes, fields::interned::kDebugAnnotationNames, annotation_names, "arg");
      intern(interned->bytes, fields::interned::kDebugAnnotationStringValues, strings, "string");
    }
    auto* track_event = find_field(packet, fields::packet::kTrackEvent);
    if (track_event == nullptr) continue;
    auto* flags = find_field(packet, fields::packet::kSequenceFlags);
    EXPECT_TRUE(flags != nullptr && flags->value == fields::packet::kSeqNeedsIncrementalState);
    Event event;
    event.ts = find_field(packet, fields::packet::kTimestamp)->value;
    for (const ProtoField& field : must_decode(track_event->bytes)) {
      switch (field.number) {
        case fields::event::kType:
          event.type = field.value;
          break;
        case fields::event::kTrackUuid:
          event.track = field.value;
          break;
        case fields::event::kNameIid:
          EXPECT_EQ(names.count(field.value), 1u) << "name iid used before it was sent";
          event.name = names[field.value];
          break;
        case fields::event::kCategoryIids:
          event.category = categories.at(field.value);
          break;
        case fields::event::kFlowIds:
          event.flows.push_back(field.value);
          break;
        case fields::event::kTerminatingFlowIds:
          event.terminating_flows.push_back(field.value);
          break;
        case fields::event::kDoubleCounterValue:
          event.counter_value = field.as_double();
          break;
        case fields::event::kDebugAnnotations: {
          Annotation annotation;
          for (const ProtoField& inner : must_decode(field.bytes)) {
            if (inner.number == fields::annotation::kNameIid)
              annotation.name = annotation_names.at(inner.value);
            if (inner.number == fields::annotation::kIntValue) {
              annotation.type = 'i';
              annotation.int_value = inner.as_int();
            }
            if (inner.number == fields::annotation::kDoubleValue) {
              annotation.type = 'd';
              annotation.double_value = inner.as_double();
            }
            if (inner.number == fields::annotation::kBoolValue) {
              annotation.type = 'b';
              annotation.int_value = static_cast<int64_t>(inner.value);
            }
            if (inner.number == fields::annotation::kStringValueIid) {
              annotation.type = 's';
              annotation.string_value = strings.at(inner.value);
            }
          }
          event.annotations.push_back(annotation);
          break;
        }
        default:
          break;
      }
    }
    decoded.events.push_back(event);
  }
  return decoded;
}

const Descriptor* find_descriptor(const Decoded& decoded, auto predicate) {
  for (const auto& [uuid, descriptor] : decoded.descriptors)
    if (predicate(descriptor)) return &descriptor;
  return nullptr;
}

std::vector<std::string> track_events(const Decoded& decoded, uint64_t track) {
  std::vector<std::string> seen;
  for (const Event& event : decoded.events) {
    if (event.track != track) continue;
    std::string text = event.type == fields::event::kTypeSliceBegin ? "B "
                       : event.type == fields::event::kTypeSliceEnd ? "E "
                       : event.type == fields::event::kTypeInstant  ? "I "
                       : event.type == fields::event::kTypeCounter  ? "C "
                                                                    : "? ";
    seen.push_back(text + std::to_string(event.ts) + (event.name.empty() ? "" : " " + event.name));
  }
  return seen;
}

TEST(PerfettoWriter, SequenceStartsClearedWithTheMonotonicClock) {
  Trace trace = every_feature_trace();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  ASSERT_FALSE(decoded.packets.empty());
  const auto& first = decoded.packets[0];
  auto* flags = find_field(first, fields::packet::kSequenceFlags);
  ASSERT_NE(flags, nullptr);
  EXPECT_EQ(flags->value, fields::packet::kSeqIncrementalStateCleared);
  EXPECT_EQ(decoded.clock_id, fields::kBuiltinClockMonotonic);
  EXPECT_EQ(decoded.primary_clock, fields::kBuiltinClockMonotonic);
  ASSERT_EQ(decoded.clock_snapshot.size(), 2u);
  EXPECT_EQ(decoded.clock_snapshot[0], std::make_pair(fields::kBuiltinClockMonotonic, 1000ul));
  EXPECT_EQ(decoded.clock_snapshot[1],
            std::make_pair(fields::kBuiltinClockRealtime, 1'700'000'000'000'001'000ul));
}

TEST(PerfettoWriter, DescribesProcessesThreadsLanesAndCounters) {
  Trace trace = every_feature_trace();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  const Descriptor* root =
      find_descriptor(decoded, [](const Descriptor& d) { return d.uuid == 0; });
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->process_ordering, fields::track::kProcessOrderingExplicit);

  const Descriptor* server =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_process && d.pid == 10; });
  const Descriptor* worker =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_process && d.pid == 20; });
  ASSERT_TRUE(server && worker);
  EXPECT_EQ(server->process_name, "server");
  EXPECT_EQ(server->labels, (std::vector<std::string>{"rank 0", "GPU 1"}));
  EXPECT_EQ(server->cmdline, std::vector<std::string>{"python serve.py --port 8000"});
  EXPECT_EQ(server->legacy_sort_index, 5);
  EXPECT_EQ(worker->process_name, "worker");
  EXPECT_TRUE(worker->cmdline.empty());
  EXPECT_EQ(worker->rank, 0);  // sort_index 0 before 5
  EXPECT_EQ(server->rank, 1);
  EXPECT_EQ(server->child_ordering, fields::track::kChildOrderingExplicit);

  const Descriptor* main_thread =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_thread && d.tid == 11; });
  ASSERT_NE(main_thread, nullptr);
  EXPECT_EQ(main_thread->pid, 10);
  EXPECT_EQ(main_thread->thread_name, "main");
  EXPECT_TRUE(main_thread->has_parent);
  EXPECT_EQ(main_thread->parent, server->uuid);
  const Descriptor* worker_thread =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_thread && d.tid == 21; });
  ASSERT_NE(worker_thread, nullptr);
  EXPECT_EQ(worker_thread->parent, worker->uuid);

  for (const char* name : {"task 7", "queue"}) {
    const Descriptor* track = find_descriptor(decoded, [&](const Descriptor& d) {
      return d.name == name && !d.is_thread && !d.is_counter;
    });
    ASSERT_NE(track, nullptr) << name;
    EXPECT_EQ(track->parent, server->uuid) << name;
  }
  // Ranks within the server: the helper thread (sort_index -3) first, then its async track,
  // its main thread, its lane (creation order, all sort_index 0, the async track's tid 0
  // first) and its GPU's group, then the counters.
  const Descriptor* helper =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_thread && d.tid == 12; });
  ASSERT_NE(helper, nullptr);
  EXPECT_EQ(helper->rank, 0);
  const Descriptor* queue =
      find_descriptor(decoded, [](const Descriptor& d) { return d.name == "queue"; });
  EXPECT_LT(queue->rank, main_thread->rank);

  const Descriptor* heap = find_descriptor(
      decoded, [](const Descriptor& d) { return d.is_counter && d.name == "memory heap"; });
  ASSERT_NE(heap, nullptr);
  EXPECT_EQ(heap->unit, fields::counter::kUnitSizeBytes);
  EXPECT_EQ(heap->parent, server->uuid);
  EXPECT_EQ(heap->rank, 5);  // after the server's 5 tracks
  const Descriptor* cpu =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_counter && d.name == "cpu"; });
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->unit, 0u);
  EXPECT_EQ(cpu->unit_name, "percent");
  EXPECT_EQ(cpu->parent, worker->uuid);
}

// A GPU stream's track (docs/gpu.md) sits under a track of its GPU, under its process.
TEST(PerfettoWriter, GpuStreamsAreGroupedUnderTheirGpu) {
  Trace model;
  opsight::trace::TrackId thread = model.thread_track(10, 11);
  model.slices.add(0, 100, model.intern("aten::mm"), model.intern("operator"), thread);
  for (uint32_t stream : {7u, 13u}) {
    opsight::trace::TrackId track =
        model.process_async_track(10, opsight::trace::gpu_stream_track_key(0, stream),
                                  opsight::trace::gpu_stream_track_name(0, stream));
    model.tracks[track].sort_index = opsight::trace::kGpuTrackSortBase + stream;
    model.slices.add(10, 50, model.intern("gemm"), model.intern("gpu_kernel"), track);
  }
  model.finalize();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(model));
  const Descriptor* process =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_process && d.pid == 10; });
  const Descriptor* gpu =
      find_descriptor(decoded, [](const Descriptor& d) { return d.name == "GPU 0"; });
  ASSERT_TRUE(process && gpu);
  EXPECT_EQ(gpu->parent, process->uuid);
  const Descriptor* thread_track =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_thread && d.tid == 11; });
  ASSERT_NE(thread_track, nullptr);
  EXPECT_LT(thread_track->rank, gpu->rank);  // threads first
  for (int stream : {7, 13}) {
    std::string name = "GPU 0 stream " + std::to_string(stream);
    const Descriptor* track =
        find_descriptor(decoded, [&](const Descriptor& d) { return d.name == name; });
    ASSERT_NE(track, nullptr) << name;
    EXPECT_EQ(track->parent, gpu->uuid) << name;
    EXPECT_EQ(track->rank, stream == 7 ? 0 : 1) << name;
  }
}

TEST(PerfettoWriter, SlicesNestAsBeginEndPairsWithInternedNames) {
  Trace trace = every_feature_trace();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  const Descriptor* main_thread =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_thread && d.tid == 11; });
  ASSERT_NE(main_thread, nullptr);
  std::vector<std::string> expected = {
      "B 1000 request", "B 1100 parse", "B 1120 token", "E 1150",         "E 1200", "B 1200 parse",
      "E 1200",         "I 1150 mark",  "E 2000",       "B 3000 request", "E 3500"};
  // Slices in nesting order, then the thread's instants (Perfetto sorts by time).
  std::vector<std::string> seen = track_events(decoded, main_thread->uuid);
  std::vector<std::string> slices_only, expected_slices;
  for (auto& text : seen)
    if (text[0] != 'I') slices_only.push_back(text);
  for (auto& text : expected)
    if (text[0] != 'I') expected_slices.push_back(text);
  EXPECT_EQ(slices_only, expected_slices);

  // Interned once each, though used twice.
  EXPECT_EQ(decoded.interned_count["name:request"], 1);
  EXPECT_EQ(decoded.interned_count["name:parse"], 1);
  EXPECT_EQ(decoded.interned_count["category:http"], 1);
  EXPECT_EQ(decoded.interned_count["arg:method"], 1);
  for (const Event& event : decoded.events) {
    if (event.name == "request") {
      EXPECT_EQ(event.category, "http");
    }
  }
}

TEST(PerfettoWriter, ArgumentsBecomeTypedDebugAnnotations) {
  Trace trace = every_feature_trace();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  const Event* request = nullptr;
  const Event* parse = nullptr;
  for (const Event& event : decoded.events) {
    if (event.name == "request" && event.ts == 1000) request = &event;
    if (event.name == "parse" && event.ts == 1100) parse = &event;
  }
  ASSERT_TRUE(request && parse);
  ASSERT_EQ(request->annotations.size(), 4u);
  std::map<std::string, Annotation> by_name;
  for (const auto& annotation : request->annotations) by_name[annotation.name] = annotation;
  EXPECT_EQ(by_name["batch"].type, 'i');
  EXPECT_EQ(by_name["batch"].int_value, -42);
  EXPECT_EQ(by_name["ratio"].type, 'd');
  EXPECT_EQ(by_name["ratio"].double_value, 2.5);
  EXPECT_EQ(by_name["method"].type, 's');
  EXPECT_EQ(by_name["method"].string_value, std::string(300, 'G'));
  EXPECT_EQ(by_name["cached"].type, 'b');
  EXPECT_EQ(by_name["cached"].int_value, 1);
  ASSERT_EQ(parse->annotations.size(), 1u);
  EXPECT_EQ(parse->annotations[0].string_value, "GET");
}

TEST(PerfettoWriter, FlowsJoinTheBeginsOfTheirSlices) {
  Trace trace = every_feature_trace();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  const Event *request = nullptr, *serve = nullptr, *parse = nullptr;
  for (const Event& event : decoded.events) {
    if (event.type != fields::event::kTypeSliceBegin) continue;
    if (event.name == "request" && event.ts == 1000) request = &event;
    if (event.name == "serve") serve = &event;
    if (event.name == "parse" && event.ts == 1100) parse = &event;
  }
  ASSERT_TRUE(request && serve && parse);
  // request -> serve -> parse: two steps of one source id, two Perfetto flows (request
  // also starts a flow to a lane's step, source id 6).
  ASSERT_EQ(request->flows.size(), 2u);
  EXPECT_TRUE(request->terminating_flows.empty());
  auto started_by_request = [&](uint64_t id) {
    return std::find(request->flows.begin(), request->flows.end(), id) != request->flows.end();
  };
  ASSERT_EQ(serve->terminating_flows.size(), 1u);
  EXPECT_TRUE(started_by_request(serve->terminating_flows[0]));
  ASSERT_EQ(serve->flows.size(), 1u);
  EXPECT_FALSE(started_by_request(serve->flows[0]));
  ASSERT_EQ(parse->terminating_flows.size(), 1u);
  EXPECT_EQ(parse->terminating_flows[0], serve->flows[0]);
}

TEST(PerfettoWriter, InstantsByScopeAndCounterSamples) {
  Trace trace = every_feature_trace();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  const Descriptor* server =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_process && d.pid == 10; });
  const Descriptor* main_thread =
      find_descriptor(decoded, [](const Descriptor& d) { return d.is_thread && d.tid == 11; });
  const Descriptor* global =
      find_descriptor(decoded, [](const Descriptor& d) { return d.name == "global instants"; });
  ASSERT_TRUE(server && main_thread && global);
  EXPECT_FALSE(global->has_parent);
  std::map<std::string, uint64_t> instant_track;
  for (const Event& event : decoded.events)
    if (event.type == fields::event::kTypeInstant) instant_track[event.name] = event.track;
  EXPECT_EQ(instant_track["mark"], main_thread->uuid);
  EXPECT_EQ(instant_track["fork"], server->uuid);
  EXPECT_EQ(instant_track["epoch"], global->uuid);

  const Descriptor* heap =
      find_descriptor(decoded, [](const Descriptor& d) { return d.name == "memory heap"; });
  ASSERT_NE(heap, nullptr);
  std::vector<std::pair<uint64_t, double>> samples;
  for (const Event& event : decoded.events)
    if (event.type == fields::event::kTypeCounter && event.track == heap->uuid)
      samples.emplace_back(event.ts, event.counter_value);
  EXPECT_EQ(samples, (std::vector<std::pair<uint64_t, double>>{{1000, 4096}, {2000, 8192.5}}));
}

TEST(PerfettoWriter, NegativeTimestampsAreShiftedToZero) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(-500, 100, trace.intern("early"), 0, track);
  trace.slices.add(0, 100, trace.intern("later"), 0, track);
  trace.finalize();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  std::vector<std::string> seen = track_events(
      decoded, find_descriptor(decoded, [](const Descriptor& d) { return d.is_thread; })->uuid);
  EXPECT_EQ(seen, (std::vector<std::string>{"B 0 early", "E 100", "B 500 later", "E 600"}));
  // No Unix offset known: the snapshot names the monotonic clock only.
  EXPECT_EQ(decoded.clock_snapshot.size(), 1u);
}

TEST(PerfettoWriter, EmptyTraceIsAValidSequence) {
  Trace trace;
  trace.finalize();
  Decoded decoded = decode_trace(opsight::io::write_perfetto(trace));
  EXPECT_EQ(decoded.events.size(), 0u);
  EXPECT_EQ(decoded.descriptors.size(), 1u);  // the root
  EXPECT_EQ(decoded.clock_id, fields::kBuiltinClockMonotonic);
}

TEST(PerfettoFiles, ExtensionPicksTheWriterAndTheReader) {
  using opsight::io::FileFormat;
  EXPECT_EQ(opsight::io::format_from_path("run.pftrace"), FileFormat::kPerfetto);
  EXPECT_EQ(opsight::io::format_from_path("run.perfetto-trace"), FileFormat::kPerfetto);
  Trace trace = every_feature_trace();
  std::string path =
      ::testing::TempDir() + "perfetto_test_" + std::to_string(::getpid()) + ".pftrace";
  ASSERT_EQ(opsight::io::write_trace_file(trace, path), std::nullopt);
  std::string error;
  auto bytes = opsight::io::read_file_bytes(path, &error);
  ASSERT_TRUE(bytes.has_value()) << error;
  EXPECT_EQ(*bytes, opsight::io::write_perfetto(trace));
  auto read = opsight::io::read_trace_file(path);
  ASSERT_TRUE(read.ok()) << read.error->to_string(path);
  EXPECT_EQ(read.trace.slices.size(), trace.slices.size());  // perfetto_reader_test.cc: more
  std::remove(path.c_str());
}

}  // namespace
