// The recording threads' side of the recorder: the chunk pool, each thread's registration
// and exit, the hot path's slow half (reserve_slow: hand a full chunk over, take a fresh
// one) and what a thread lost while the pool was empty, replayed in its next chunk.
#include "record/thread_buffers.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#include "opsight/opsight.hpp"
#include "record/recording_session.hpp"
#include "record/registry.hpp"

namespace opsight {
namespace internal {
std::atomic<bool> g_recording{false};
thread_local constinit ThreadWriter t_writer __attribute__((tls_model("initial-exec")));
}  // namespace internal

namespace record {

thread_local constinit bool t_thread_exited = false;
thread_local constinit ThreadRecord* t_thread_record = nullptr;
thread_local constinit TrackState t_track;

namespace {

// Hands the thread's last chunk over when the thread exits.
struct ThreadExitHook {
  bool armed = false;
  ~ThreadExitHook();
};
thread_local ThreadExitHook t_exit_hook;

int64_t current_tid() { return static_cast<int64_t>(syscall(SYS_gettid)); }

void detach_writer_view() {
  internal::t_writer.slots = nullptr;
  internal::t_writer.capacity = 0;
  internal::t_writer.used.store(0, std::memory_order_release);
}

// Gives the thread's chunk to the stream writer (session running) or back to the pool.
// Caller holds the registry lock.
void retire_current_chunk(Registry& reg, ThreadRecord& thread) {
  Chunk* chunk = thread.current;
  if (chunk == nullptr) return;
  chunk->committed = thread.writer->used.load(std::memory_order_acquire);
  thread.current = nullptr;
  --reg.threads_holding_chunks;
  if (reg.session_running.load(std::memory_order_relaxed)) {
    reg.full_chunks.push_back(chunk);
    reg.recount_available();
  } else {
    reg.return_chunk(chunk);
  }
}

}  // namespace

ThreadRecord& register_thread(Registry& reg) {
  auto record = std::make_unique<ThreadRecord>();
  record->index = reg.next_thread_index++;
  record->tid = current_tid();
  if (auto named = reg.names_of_unregistered_threads.find(record->tid);
      named != reg.names_of_unregistered_threads.end()) {
    record->name = std::move(named->second);
    record->name_changed = true;
    reg.names_of_unregistered_threads.erase(named);
  }
  record->writer = &internal::t_writer;
  ThreadRecord& result = *record;
  reg.threads.push_back(std::move(record));
  t_thread_record = &result;
  return result;
}

void arm_thread_exit_hook() {
  if (!t_exit_hook.armed) t_exit_hook.armed = true;
}

// What a thread could not write for lack of memory and must write as soon as it can, so
// that the spans after it nest correctly: the ends of spans it had recorded (a run per
// track, in order) and a switch of track (with its name, which may start a new track).
// Allocated on the thread's first drop (never on the recording path of a thread that does
// not drop) and freed at its exit; written only by its thread.
struct LostEvents {
  struct EndRun {
    uint64_t key;
    uint32_t count;
  };
  // Beyond this many alternations of track, further lost ends join the last run (and may
  // close spans of the wrong track): a flood of drops across that many tasks is not
  // worth more memory.
  static constexpr uint32_t kMaxRuns = 64;

  uint64_t generation = 0;
  EndRun runs[kMaxRuns] = {};
  uint32_t run_count = 0;
  bool switch_lost = false;
  // The name of a dropped switch, kept until a switch to its key is written. The buffer
  // outlives `has_name` (it is reused) so that a view of it stays valid while a write that
  // replays it is in progress.
  bool has_name = false;
  uint64_t named_key = 0;
  std::unique_ptr<char[]> name;
  uint32_t name_bytes = 0;
  uint32_t name_capacity = 0;

  void reset(uint64_t new_generation) {
    generation = new_generation;
    run_count = 0;
    switch_lost = false;
    has_name = false;
  }
};
thread_local constinit LostEvents* t_lost = nullptr;

namespace {

// The thread's lost-event record for session `generation`, created if needed; nullptr if
// none can be had (thread exiting, no memory). Takes no lock.
LostEvents* lost_events(uint64_t generation) {
  if (t_lost == nullptr) {
    if (t_thread_exited) return nullptr;
    arm_thread_exit_hook();  // frees it at thread exit
    t_lost = new (std::nothrow) LostEvents();
    if (t_lost == nullptr) return nullptr;
    t_lost->generation = generation;
  }
  if (t_lost->generation != generation) t_lost->reset(generation);
  return t_lost;
}

void note_lost_end() {
  Registry& reg = registry();
  if (!reg.session_running.load(std::memory_order_relaxed)) return;
  uint64_t generation = reg.session_generation.load(std::memory_order_relaxed);
  LostEvents* lost = lost_events(generation);
  if (lost == nullptr) return;
  sync_track_generation(generation);
  uint64_t key = t_track.requested_key;
  if (lost->run_count > 0 && lost->runs[lost->run_count - 1].key == key)
    ++lost->runs[lost->run_count - 1].count;
  else if (lost->run_count < LostEvents::kMaxRuns)
    lost->runs[lost->run_count++] = {key, 1};
  else
    ++lost->runs[LostEvents::kMaxRuns - 1].count;
}

}  // namespace

void note_lost_track_switch(uint64_t key, std::string_view name, uint64_t generation) {
  LostEvents* lost = lost_events(generation);
  if (lost == nullptr) return;
  lost->switch_lost = true;
  if (name.empty()) return;
  if (name.size() > lost->name_capacity) {
    std::unique_ptr<char[]> buffer(new (std::nothrow) char[name.size()]);
    if (!buffer) return;
    lost->name = std::move(buffer);
    lost->name_capacity = static_cast<uint32_t>(name.size());
  }
  std::memcpy(lost->name.get(), name.data(), name.size());
  lost->name_bytes = static_cast<uint32_t>(name.size());
  lost->named_key = key;
  lost->has_name = true;
}

// The name of a dropped switch to `key` not yet written, or empty.
std::string_view pending_track_name(uint64_t key, uint64_t generation) {
  const LostEvents* lost = t_lost;
  if (lost == nullptr || lost->generation != generation || !lost->has_name ||
      lost->named_key != key)
    return {};
  return {lost->name.get(), lost->name_bytes};
}

void forget_pending_track_name(uint64_t key) {
  if (t_lost != nullptr && t_lost->named_key == key) t_lost->has_name = false;
}

namespace {

// Writes a kTrack event at `slots` (1 + slots_for_bytes(name) slots).
void write_track_switch(format::Slot* slots, uint64_t key, std::string_view name) {
  uint16_t extra = format::slots_for_bytes(name.size());
  internal::write_slot(
      slots, key,
      internal::slot_word(static_cast<uint32_t>(name.size()), format::SlotKind::kTrack, 0, extra));
  char* payload = reinterpret_cast<char*>(slots + 1);
  if (!name.empty()) std::memcpy(payload, name.data(), name.size());
  std::memset(payload + name.size(), 0, size_t{extra} * sizeof(format::Slot) - name.size());
}

// Writes this thread's lost events at `slots`, at most `room` slots: the lost ends, each
// run on its track and marked late, then a switch back to the track the thread asked for
// last. Returns the slots written. Ends that do not fit wait for the next chunk.
uint32_t replay_lost_events(format::Slot* slots, uint32_t room, uint64_t generation) {
  LostEvents* lost = t_lost;
  if (lost == nullptr) return 0;
  if (lost->generation != generation) {
    lost->reset(generation);
    return 0;
  }
  sync_track_generation(generation);
  std::string_view final_name;
  if (lost->has_name && lost->named_key == t_track.requested_key)
    final_name = std::string_view(lost->name.get(), lost->name_bytes);
  uint32_t final_slots = 1u + format::slots_for_bytes(final_name.size());
  if (room < final_slots) return 0;
  uint32_t budget = room - final_slots;
  uint32_t used = 0;
  uint64_t ticks = internal::now_ticks();
  uint32_t done_runs = 0;
  for (; done_runs < lost->run_count; ++done_runs) {
    LostEvents::EndRun& run = lost->runs[done_runs];
    if (run.key != t_track.written_key) {
      if (used + 1 > budget) break;
      write_track_switch(slots + used++, run.key, {});
      t_track.written_key = run.key;
    }
    uint32_t count = std::min(run.count, budget - used);
    for (uint32_t i = 0; i < count; ++i)
      internal::write_slot(slots + used++, ticks,
                           internal::slot_word(0, format::SlotKind::kEnd, format::kEndIsLate));
    run.count -= count;
    if (run.count > 0) break;
  }
  std::copy(lost->runs + done_runs, lost->runs + lost->run_count, lost->runs);
  lost->run_count -= done_runs;
  if (lost->switch_lost || !final_name.empty() || t_track.written_key != t_track.requested_key) {
    write_track_switch(slots + used, t_track.requested_key, final_name);
    used += final_slots;
    t_track.written_key = t_track.requested_key;
    lost->switch_lost = false;
    if (!final_name.empty()) lost->has_name = false;
  }
  return used;
}

ThreadExitHook::~ThreadExitHook() {
  t_thread_exited = true;
  delete t_lost;
  t_lost = nullptr;
  if (!armed || t_thread_record == nullptr) return;
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  retire_current_chunk(reg, *t_thread_record);
  t_thread_record->alive = false;
  t_thread_record->writer = nullptr;
  if (!reg.session_running.load(std::memory_order_relaxed)) {
    std::erase_if(reg.threads, [](const auto& thread) { return thread.get() == t_thread_record; });
  }  // else the stream writer forgets it after draining it, keeping its counts
  t_thread_record = nullptr;
  detach_writer_view();
}

}  // namespace

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: threads may outlive main
  return *instance;
}

size_t Registry::chunks_in_use() const { return all_chunks.size() - free_chunks.size(); }

size_t Registry::chunks_in_flight() const { return chunks_in_use() - threads_holding_chunks; }

Chunk* Registry::take_chunk() {
  Chunk* chunk = nullptr;
  if (chunks_in_flight() < max_chunks) {
    if (!free_chunks.empty()) {
      chunk = free_chunks.back();
      free_chunks.pop_back();
    } else {
      all_chunks.push_back(
          std::unique_ptr<Chunk>(new Chunk));  // slots left unzeroed: written before read
      chunk = all_chunks.back().get();
    }
    chunk->committed = 0;
    chunk->flushed = 0;
  }
  recount_available();
  return chunk;
}

void Registry::return_chunk(Chunk* chunk) {
  chunk->owner = nullptr;
  free_chunks.push_back(chunk);
  recount_available();
}

uint64_t Registry::events_dropped() const {
  uint64_t dropped = exited_events_dropped;
  for (const auto& thread : threads) dropped += thread->events_dropped.load();
  return dropped;
}

void Registry::recount_available() {
  size_t in_flight = chunks_in_flight();
  chunks_available.store(max_chunks > in_flight ? max_chunks - in_flight : 0,
                         std::memory_order_relaxed);
}

void Registry::release_free_chunks_above(size_t limit) {
  while (all_chunks.size() > limit && !free_chunks.empty()) {
    Chunk* chunk = free_chunks.back();
    free_chunks.pop_back();
    std::erase_if(all_chunks,
                  [&](const std::unique_ptr<Chunk>& owned) { return owned.get() == chunk; });
  }
  recount_available();
}

void add_thread_overhead_ticks(uint64_t ticks) {
  if (t_thread_record != nullptr && !t_thread_exited)
    t_thread_record->slow_path_ticks.fetch_add(ticks, std::memory_order_relaxed);
}

}  // namespace record

// ---- The hot path's out-of-line half ----------------------------------------------------

namespace internal {

format::Slot* reserve_slow(uint32_t slot_count) {
  using record::registry;
  uint64_t start = now_ticks();
  record::Registry& reg = registry();
  if (!reg.session_running.load(std::memory_order_relaxed) || record::t_thread_exited ||
      slot_count > record::kChunkSlots)
    return nullptr;
  if (reg.chunks_available.load(std::memory_order_relaxed) == 0 &&
      record::t_thread_record != nullptr && t_writer.capacity == 0) {
    // Pool exhausted and this thread has already handed its chunk over: drop without
    // taking the lock, so a flood stays cheap. (A thread still holding a full chunk goes
    // on below and hands it over, so the writer can drain it and the pool refill.)
    record::t_thread_record->events_dropped.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  record::arm_thread_exit_hook();
  format::Slot* slots = nullptr;
  record::ThreadRecord* thread = nullptr;
  {
    std::lock_guard lock(reg.mutex);
    thread = record::t_thread_record != nullptr ? record::t_thread_record
                                                : &record::register_thread(reg);
    bool handed_over = thread->current != nullptr;
    record::retire_current_chunk(reg, *thread);
    record::Chunk* chunk = reg.take_chunk();
    if (chunk == nullptr) {
      record::detach_writer_view();
      thread->events_dropped.fetch_add(1, std::memory_order_relaxed);
    } else {
      chunk->owner = thread;
      thread->current = chunk;
      ++reg.threads_holding_chunks;
      reg.recount_available();
      t_writer.slots = chunk->slots;
      t_writer.capacity = record::kChunkSlots;
      // Ends dropped while the pool was empty close their spans first (marked: their end
      // time is when recording could resume), so later spans do not nest inside them.
      uint32_t replayed = record::replay_lost_events(chunk->slots, record::kChunkSlots - slot_count,
                                                     reg.session_generation.load());
      t_writer.used.store(replayed, std::memory_order_release);
      slots = chunk->slots + replayed;
    }
    // Notified under the lock: stop clears the writer pointer under it before deleting.
    if (handed_over) {
      record::notify_stream_writer();
    }
  }
  thread->slow_path_ticks.fetch_add(now_ticks() - start, std::memory_order_relaxed);
  return slots;
}

void note_lost_end() { record::note_lost_end(); }

}  // namespace internal
}  // namespace opsight
