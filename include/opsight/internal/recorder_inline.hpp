// The recorder's hot path, inlined into the code it traces. Not an API: use the macros and
// functions of <opsight/opsight.hpp>.
//
// Each thread owns a chunk of fixed-size slots (format::Slot). Recording an event is: one
// relaxed load of the global "recording" flag, a bounds check against the thread's chunk,
// one rdtsc, two stores, and a release store of the chunk's committed count (a plain store
// on x86). The background stream writer reads committed slots without stopping the thread.
// When the chunk is full, reserve_slow() hands it over and takes a fresh one from a bounded
// pool; if the pool is exhausted the event is dropped and counted, never waited for.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "opsight/internal/native_layout.hpp"

// Marks what the shared library exports; everything else has hidden visibility.
#define OPSIGHT_API __attribute__((visibility("default")))

namespace opsight {

// A static call site: written once at compile time by the span macros, registered (given
// an id) the first time it records. Thread-safety: id is set once under the name
// registry's lock and read with relaxed loads.
struct CallSite {
  const char* name;
  const char* category;
  const char* file;
  uint32_t line;
  mutable std::atomic<uint32_t> id{0};
};

namespace internal {

// The calling thread's view of its current chunk. Constant-initialised (no TLS guard),
// written only by its own thread. `used` counts the slots fully written; the owner
// release-stores it after each event and the stream writer acquire-loads it (through a
// pointer registered under the registry lock), so an event costs one cache line of slots
// and one of thread-local state, nothing shared.
struct ThreadWriter {
  format::Slot* slots = nullptr;
  uint32_t capacity = 0;
  std::atomic<uint32_t> used{0};
};

OPSIGHT_API extern std::atomic<bool> g_recording;
// Sampling (SessionOptions::sample_rate; src/record/sampling.hpp): whether the running
// session samples, and whether the calling thread's current track is inside a unit
// sampled out (then nothing is recorded on it until the unit ends).
OPSIGHT_API extern std::atomic<bool> g_sampling;
OPSIGHT_API extern thread_local constinit bool t_sampled_out
    __attribute__((tls_model("initial-exec")));
OPSIGHT_API extern bool g_clock_is_tsc;
OPSIGHT_API extern thread_local constinit ThreadWriter t_writer
    __attribute__((tls_model("initial-exec")));

// Out of line: hands over a full chunk and takes a fresh one. Returns nullptr (and counts
// a drop when recording) if no chunk can be had.
OPSIGHT_API format::Slot* reserve_slow(uint32_t slot_count);
// Out of line: remembers that the end of a recorded span could not be written, so that it
// is written (late, and marked so) as soon as the thread has room again.
OPSIGHT_API void note_lost_end();
// Out of line: assigns `site` an id in the name registry.
OPSIGHT_API uint32_t register_call_site(const CallSite& site);

// Out of line, while the session samples: what a begin is (written, not written, or the
// root of a unit sampled out, whose begin is reported recorded but not written) and
// whether an end is written, with the unit bookkeeping of the calling thread's track.
// undo_admit() takes back a begin admitted for writing that could not be written.
enum class Admission : uint8_t { kWrite, kSkip, kSampledOutRoot };
OPSIGHT_API Admission admit_begin(uint32_t name_id);  // 0: a run-time name
OPSIGHT_API void undo_admit();
OPSIGHT_API bool admit_end();
// begin/end of a span while the session samples.
OPSIGHT_API bool begin_sampled(uint32_t name_id);
OPSIGHT_API void end_sampled();

inline int64_t monotonic_ns() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

inline uint64_t now_ticks() {
#if defined(__x86_64__) || defined(__i386__)
  if (g_clock_is_tsc) [[likely]]
    return __builtin_ia32_rdtsc();
#endif
  return static_cast<uint64_t>(monotonic_ns());
}

inline format::Slot* reserve(uint32_t slot_count) {
  ThreadWriter& writer = t_writer;
  uint32_t used = writer.used.load(std::memory_order_relaxed);
  if (used + slot_count <= writer.capacity) [[likely]]
    return writer.slots + used;
  return reserve_slow(slot_count);
}

inline void commit(uint32_t slot_count) {
  ThreadWriter& writer = t_writer;
  writer.used.store(writer.used.load(std::memory_order_relaxed) + slot_count,
                    std::memory_order_release);
}

constexpr uint64_t slot_word(uint32_t id, format::SlotKind kind, uint8_t arg_type = 0,
                             uint16_t extra_slots = 0) {
  return uint64_t{id} | (uint64_t{static_cast<uint8_t>(kind)} << 32) | (uint64_t{arg_type} << 40) |
         (uint64_t{extra_slots} << 48);
}

inline void write_slot(format::Slot* slot, uint64_t ticks, uint64_t word) {
  slot->ticks = ticks;
  std::memcpy(&slot->id, &word, sizeof(word));
}

// Whether the calling thread's current track is inside a unit the running session's
// sampling left out (t_sampled_out alone may be left over from an earlier session).
inline bool thread_sampled_out() {
  return t_sampled_out && g_sampling.load(std::memory_order_relaxed);
}

// A span's begin slot, whatever sampling says; false if no slot could be had.
inline bool write_begin(uint32_t name_id) {
  format::Slot* slot = reserve(1);
  if (slot == nullptr) [[unlikely]]
    return false;
  write_slot(slot, now_ticks(), slot_word(name_id, format::SlotKind::kBegin));
  commit(1);
  return true;
}

inline bool begin_span(const CallSite& site) {
  if (!g_recording.load(std::memory_order_relaxed)) return false;
  uint32_t id = site.id.load(std::memory_order_relaxed);
  if (id == 0) [[unlikely]]
    id = register_call_site(site);
  if (g_sampling.load(std::memory_order_relaxed)) [[unlikely]]
    return begin_sampled(id);
  return write_begin(id);
}

// A span's end slot, whatever sampling says.
inline void write_end() {
  // Recorded even when the session was paused meanwhile: the begin was recorded.
  format::Slot* slot = reserve(1);
  if (slot == nullptr) [[unlikely]] {
    note_lost_end();
    return;
  }
  write_slot(slot, now_ticks(), slot_word(0, format::SlotKind::kEnd));
  commit(1);
}

inline void end_span() {
  if (g_sampling.load(std::memory_order_relaxed)) [[unlikely]] {
    end_sampled();
    return;
  }
  write_end();
}

// An async span's begin or end. One slot (the packed form: the payload in the first 8
// bytes, 56 bits of ticks around the kind), like a span's begin or end; a begin whose name
// id or async id is too large for the packed form takes two slots (event, then the id).
inline bool write_packed_async(format::SlotKind kind, uint64_t payload) {
  format::Slot* slot = reserve(1);
  if (slot == nullptr) [[unlikely]]
    return false;
  write_slot(slot, payload, format::packed_async_word(kind, now_ticks()));
  commit(1);
  return true;
}

inline bool write_async_begin(uint32_t name, uint64_t async_id) {
  if (name < format::kPackedNameIdLimit && async_id < format::kPackedAsyncIdLimit) [[likely]]
    return write_packed_async(format::SlotKind::kAsyncBeginPacked, name | (async_id << 24));
  format::Slot* slot = reserve(2);
  if (slot == nullptr) [[unlikely]]
    return false;
  write_slot(slot, now_ticks(),
             slot_word(name, format::SlotKind::kAsyncBegin, format::kAsyncNameId, 1));
  slot[1] = format::Slot{async_id, 0, 0, 0, 0};
  commit(2);
  return true;
}

// One end of a flow: a single slot whose ticks field holds the flow id.
inline void write_flow(uint64_t flow_id, format::FlowDirection direction) {
  if (!g_recording.load(std::memory_order_relaxed) || thread_sampled_out()) return;
  if (format::Slot* slot = reserve(1)) [[likely]] {
    write_slot(slot, flow_id, slot_word(0, format::SlotKind::kFlow, direction));
    commit(1);
  }
}

}  // namespace internal
}  // namespace opsight
