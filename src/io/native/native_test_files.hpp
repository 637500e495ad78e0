// Tests' builders of .opsight files slot by slot: what the recorder writes (packed async
// events, inline names, track switches, args), without a recorder, so that a reader's
// handling of each form is tested on exactly the bytes that carry it.
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "format/chunk_codec.hpp"
#include "opsight/internal/native_layout.hpp"

namespace opsight::io::native_test_files {

using format::Slot;
using format::SlotKind;

// One thread of a file: its index, pid and tid, and its events (one kEvents chunk).
struct ThreadEvents {
  uint32_t thread_index = 0;
  int64_t pid = 7;
  int64_t tid = 8;
  std::vector<Slot> slots;
};

// A file: run info (a trace id when given), two clock syncs from `first_sync_ticks` (one
// tick per ns), one name ("span", id `name_id`), then each thread's record and events.
inline std::string file_with_threads(const std::vector<ThreadEvents>& threads, uint32_t name_id = 1,
                                     uint64_t first_sync_ticks = 0,
                                     std::string_view trace_id_hex = {}) {
  using namespace format;
  std::string out;
  append_file_header(out);
  if (!trace_id_hex.empty()) append_run_info_chunk(out, {{"trace_id", std::string(trace_id_hex)}});
  ClockSync syncs[2] = {{first_sync_ticks, 0, 0}, {first_sync_ticks + 1000, 1000, 1000}};
  append_chunk(out, ChunkType::kClockSync,
               std::string_view(reinterpret_cast<const char*>(syncs), sizeof(syncs)));
  std::string names;
  append_pod(names, NameRecordHeader{name_id, 0, 4, 0, 0, 0});
  names += "span";
  append_chunk(out, ChunkType::kNames, names);
  for (const auto& thread : threads) {
    std::string record;
    append_pod(record, ThreadRecordHeader{thread.thread_index, 0, thread.pid, thread.tid});
    append_chunk(out, ChunkType::kThread, record);
    std::string events;
    append_pod(events,
               EventsHeader{thread.thread_index, static_cast<uint32_t>(thread.slots.size()), 0});
    for (const auto& slot : thread.slots) append_pod(events, slot);
    append_chunk(out, ChunkType::kEvents, events);
  }
  return out;
}

// A file with one thread whose events are given as slots.
inline std::string file_with_events(const std::vector<Slot>& slots, uint32_t name_id = 1,
                                    uint32_t thread_index = 0, uint64_t first_sync_ticks = 0) {
  return file_with_threads({ThreadEvents{thread_index, 7, 8, slots}}, name_id, first_sync_ticks);
}

inline Slot slot(uint64_t ticks, SlotKind kind, uint32_t id = 0, uint8_t arg_type = 0) {
  return {ticks, id, static_cast<uint8_t>(kind), arg_type, 0};
}

// A packed async slot: payload in the first 8 bytes, the low 56 bits of ticks around the
// kind (what the recorder writes).
inline Slot packed_slot(SlotKind kind, uint64_t payload, uint64_t ticks) {
  Slot out;
  out.ticks = payload;
  uint64_t word = format::packed_async_word(kind, ticks);
  std::memcpy(&out.id, &word, sizeof(word));
  return out;
}

// An event whose `bytes` ride in the slots after it (zero-padded), with `id` as given.
inline std::vector<Slot> with_bytes(Slot head, std::string_view bytes) {
  auto extra = format::slots_for_bytes(bytes.size());
  std::vector<Slot> slots(1u + extra, Slot{});
  head.extra_slots = extra;
  slots[0] = head;
  if (!bytes.empty()) std::memcpy(slots.data() + 1, bytes.data(), bytes.size());
  return slots;
}

// A kTrack switch: ticks hold the key; a name rides in the slots after it.
inline std::vector<Slot> track_switch(uint64_t key, std::string_view name = {}) {
  return with_bytes(
      {key, static_cast<uint32_t>(name.size()), static_cast<uint8_t>(SlotKind::kTrack), 0, 0},
      name);
}

// A span begun with its name inline (kBeginNamed).
inline std::vector<Slot> named_begin(uint64_t ticks, std::string_view name) {
  return with_bytes(slot(ticks, SlotKind::kBeginNamed, static_cast<uint32_t>(name.size())), name);
}

// An integer argument.
inline std::vector<Slot> int_arg(std::string_view key, int64_t value) {
  return with_bytes(
      slot(static_cast<uint64_t>(value), SlotKind::kArg, static_cast<uint32_t>(key.size()),
           static_cast<uint8_t>(0 /* trace::ArgType::kInt */)),
      key);
}

// A counter sample (a slot holding the value, then the name).
inline std::vector<Slot> counter(uint64_t ticks, std::string_view name, double value) {
  std::string bytes(sizeof(Slot), '\0');
  std::memcpy(bytes.data(), &value, sizeof(value));
  bytes += name;
  return with_bytes(slot(ticks, SlotKind::kCounter, static_cast<uint32_t>(name.size())), bytes);
}

// A kSpanId event: the innermost open span's id is `span_id`.
inline std::vector<Slot> given_span_id(uint64_t span_id) {
  return {slot(span_id, SlotKind::kSpanId)};
}

// A kSpanContext event: the span joins trace (high, low) with `parent_span_id` (0: it begins
// the trace); `binding` format::kSpanContextOnRoot: the lane's root does.
inline std::vector<Slot> span_context(uint64_t parent_span_id, uint64_t trace_high,
                                      uint64_t trace_low, uint8_t trace_flags = 1,
                                      uint32_t binding = 0) {
  Slot head = slot(parent_span_id, SlotKind::kSpanContext, binding, trace_flags);
  head.extra_slots = 1;
  Slot trace{};
  std::memcpy(&trace, &trace_high, 8);
  std::memcpy(reinterpret_cast<char*>(&trace) + 8, &trace_low, 8);
  return {head, trace};
}

inline std::vector<Slot> concat(std::initializer_list<std::vector<Slot>> parts) {
  std::vector<Slot> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace opsight::io::native_test_files
