// The recorder's public functions (opsight/opsight.hpp) that write events: named spans,
// arguments, instants, counters, async tracks, thread names, call-site and name
// registration. The inlined hot path is in include/opsight/internal/recorder_inline.hpp;
// its slow half and the per-thread buffers in thread_buffers.cc; sessions in
// recording_session.cc.
#include "record/recorder.hpp"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include "opsight/opsight.hpp"
#include "record/recording_session.hpp"
#include "record/registry.hpp"
#include "record/sampling.hpp"
#include "record/thread_buffers.hpp"

#ifndef OPSIGHT_VERSION_STRING
#define OPSIGHT_VERSION_STRING "0.0.0"
#endif

namespace opsight {
namespace internal {

uint32_t register_call_site(const CallSite& site) {
  record::Registry& reg = record::registry();
  std::lock_guard lock(reg.mutex);
  uint32_t id = site.id.load(std::memory_order_relaxed);
  if (id != 0) return id;
  reg.names.push_back({site.name ? site.name : "", site.category ? site.category : "",
                       site.file ? site.file : "", site.line});
  id = static_cast<uint32_t>(reg.names.size());
  site.id.store(id, std::memory_order_relaxed);
  return id;
}

namespace {

// Writes a header slot followed by `parts` as zero-padded bytes. Returns false if dropped.
bool write_with_bytes(uint64_t ticks, format::SlotKind kind, uint32_t id, uint8_t arg_type,
                      std::string_view first, std::string_view second = {},
                      const void* value_slot = nullptr) {
  size_t bytes = first.size() + second.size();
  uint16_t extra = static_cast<uint16_t>(format::slots_for_bytes(bytes) + (value_slot ? 1 : 0));
  format::Slot* slot = reserve(1u + extra);
  if (slot == nullptr) return false;
  write_slot(slot, ticks, slot_word(id, kind, arg_type, extra));
  char* payload = reinterpret_cast<char*>(slot + 1);
  if (value_slot != nullptr) {
    std::memcpy(payload, value_slot, sizeof(format::Slot));
    payload += sizeof(format::Slot);
  }
  // (An empty string_view may hold a null pointer, which memcpy must not be given.)
  if (!first.empty()) std::memcpy(payload, first.data(), first.size());
  if (!second.empty()) std::memcpy(payload + first.size(), second.data(), second.size());
  size_t padded = size_t{format::slots_for_bytes(bytes)} * sizeof(format::Slot);
  std::memset(payload + bytes, 0, padded - bytes);
  commit(1u + extra);
  return true;
}

// splitmix64's finaliser: a bijection of 64-bit values.
uint64_t mix_bits(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

std::string_view clip(std::string_view text) { return text.substr(0, format::kMaxInlineString); }

void write_arg(std::string_view key, format::SlotKind kind, uint8_t type, uint64_t value_bits,
               std::string_view string_value) {
  // The root of a sampled-out unit reports its begin recorded: its front end's arguments
  // must not land on the span around it.
  if (sampled_out()) return;
  key = clip(key);
  string_value = clip(string_value);
  uint32_t id =
      static_cast<uint32_t>(key.size()) | (static_cast<uint32_t>(string_value.size()) << 16);
  write_with_bytes(type == 2 ? string_value.size() : value_bits, kind, id, type, key, string_value);
}

}  // namespace
}  // namespace internal

const char* version() { return OPSIGHT_VERSION_STRING; }

NameId register_name(std::string_view name, std::string_view category) {
  record::Registry& reg = record::registry();
  std::string key;
  key.reserve(name.size() + category.size() + 1);
  key.append(category).push_back('\0');
  key.append(name);
  std::lock_guard lock(reg.mutex);
  if (auto found = reg.name_ids.find(key); found != reg.name_ids.end()) return found->second;
  reg.names.push_back({std::string(name), std::string(category), "", 0});
  auto id = static_cast<NameId>(reg.names.size());
  reg.name_ids.emplace(std::move(key), id);
  return id;
}

bool begin(std::string_view name) {
  if (!recording()) return false;
  if (internal::g_sampling.load(std::memory_order_relaxed)) [[unlikely]] {
    internal::Admission admission = internal::admit_begin(0);
    if (admission != internal::Admission::kWrite)
      return admission == internal::Admission::kSampledOutRoot;
  }
  name = internal::clip(name);
  bool written = internal::write_with_bytes(internal::now_ticks(), format::SlotKind::kBeginNamed,
                                            static_cast<uint32_t>(name.size()), 0, name);
  if (!written && internal::g_sampling.load(std::memory_order_relaxed)) internal::undo_admit();
  return written;
}

void add_arg(std::string_view key, int64_t value) {
  internal::write_arg(key, format::SlotKind::kArg, 0, static_cast<uint64_t>(value), {});
}

void add_arg(std::string_view key, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  internal::write_arg(key, format::SlotKind::kArg, 1, bits, {});
}

void add_arg(std::string_view key, std::string_view value) {
  internal::write_arg(key, format::SlotKind::kArg, 2, 0, value);
}

void add_arg_bool(std::string_view key, bool value) {
  internal::write_arg(key, format::SlotKind::kArg, 3, value ? 1 : 0, {});
}

void instant(std::string_view name) {
  if (!recording()) return;
  name = internal::clip(name);
  internal::write_with_bytes(internal::now_ticks(), format::SlotKind::kInstantNamed,
                             static_cast<uint32_t>(name.size()), 0, name);
}

void counter(std::string_view name, double value) {
  if (!recording()) return;
  name = internal::clip(name);
  format::Slot value_slot{};
  std::memcpy(&value_slot, &value, sizeof(value));
  internal::write_with_bytes(internal::now_ticks(), format::SlotKind::kCounter,
                             static_cast<uint32_t>(name.size()), 0, name, {}, &value_slot);
}

bool begin_async(std::string_view name, uint64_t id) {
  if (!recording()) return false;
  name = internal::clip(name);
  format::Slot id_slot{};
  std::memcpy(&id_slot, &id, sizeof(id));
  return internal::write_with_bytes(internal::now_ticks(), format::SlotKind::kAsyncBegin,
                                    static_cast<uint32_t>(name.size()), format::kAsyncNameBytes,
                                    name, {}, &id_slot);
}

uint64_t new_flow_id() {
  // Unique across threads (one counter), processes (the pid: a forked child keeps the
  // salt and the counter, not the pid) and runs (a random salt); the mix is a bijection,
  // so distinct inputs never collide.
  static const uint64_t salt = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  auto pid = static_cast<uint64_t>(getpid());
  uint64_t input = (salt ^ (pid << 40)) + counter.fetch_add(1, std::memory_order_relaxed);
  uint64_t id = internal::mix_bits(input);
  return id == 0 ? 1 : id;
}

void switch_track(uint64_t key, std::string_view name) {
  record::Registry& reg = record::registry();
  if (!reg.session_running.load(std::memory_order_relaxed)) return;
  uint64_t generation = reg.session_generation.load(std::memory_order_relaxed);
  record::sync_track_generation(generation);
  if (record::t_lost != nullptr && name.empty()) [[unlikely]]
    name = record::pending_track_name(key, generation);
  name = internal::clip(name);
  bool written = false;
  if (name.empty()) {
    if (format::Slot* slot = internal::reserve(1)) [[likely]] {
      internal::write_slot(slot, key, internal::slot_word(0, format::SlotKind::kTrack));
      internal::commit(1);
      written = true;
    }
  } else {
    written = internal::write_with_bytes(key, format::SlotKind::kTrack,
                                         static_cast<uint32_t>(name.size()), 0, name);
  }
  // (A chunk taken by the write above first replayed what this thread had lost, ending on
  // the previously requested track; this switch follows it.)
  record::t_track.requested_key = key;
  record::sampling::on_switch_track(key);
  if (written) {
    record::t_track.written_key = key;
    if (record::t_lost != nullptr && !name.empty()) record::forget_pending_track_name(key);
  } else {
    record::note_lost_track_switch(key, name, generation);
  }
}

void set_thread_name(std::string_view name) {
  record::Registry& reg = record::registry();
  if (record::t_thread_exited) return;
  record::arm_thread_exit_hook();
  std::lock_guard lock(reg.mutex);
  record::ThreadRecord& thread =
      record::t_thread_record != nullptr ? *record::t_thread_record : record::register_thread(reg);
  thread.name = std::string(name);
  thread.name_changed = true;
}

void internal::name_thread_if_unnamed(int64_t tid, std::string_view name) {
  constexpr size_t kMostPendingNames = 4096;
  if (name.empty()) return;
  record::Registry& reg = record::registry();
  std::lock_guard lock(reg.mutex);
  for (auto& thread : reg.threads) {
    if (thread->tid != tid || !thread->alive) continue;
    if (thread->name.empty()) {
      thread->name = std::string(name);
      thread->name_changed = true;
    }
    return;
  }
  if (reg.names_of_unregistered_threads.size() < kMostPendingNames ||
      reg.names_of_unregistered_threads.contains(tid))
    reg.names_of_unregistered_threads[tid] = std::string(name);
}

void internal::forget_unclaimed_thread_name(int64_t tid) {
  record::Registry& reg = record::registry();
  std::lock_guard lock(reg.mutex);
  reg.names_of_unregistered_threads.erase(tid);
}

void internal::add_overhead_ns(double nanoseconds) {
  if (!(nanoseconds > 0) || record::t_thread_record == nullptr) return;
  double ticks = nanoseconds * record::session_ticks_per_second() / 1e9;
  record::add_thread_overhead_ticks(static_cast<uint64_t>(std::llround(ticks)));
}

}  // namespace opsight
