// The recorder's shared state between recording threads (slow path) and the stream
// writer: chunks, per-thread records, the chunk pool, and the name registry. Everything in
// Registry is guarded by Registry::mutex unless a field says otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "opsight/internal/native_layout.hpp"
#include "opsight/internal/recorder_inline.hpp"
#include "record/recorder.hpp"

namespace opsight::record {

struct ThreadRecord;

// A fixed block of slots owned by one thread at a time.
struct Chunk {
  format::Slot slots[kChunkSlots];
  // Slots fully written, set when the owner hands the chunk over (while it is the current
  // chunk, the owner's ThreadWriter::used is the live count).
  uint32_t committed = 0;
  // Slots already streamed; touched only by the stream writer (and by session start,
  // while no writer runs).
  uint32_t flushed = 0;
  ThreadRecord* owner = nullptr;
};

// One recording thread. Lives until its thread has exited and its last chunk is drained.
struct ThreadRecord {
  uint32_t index = 0;  // dense, process-wide
  int64_t tid = 0;
  std::string name;
  bool name_changed = false;  // the writer has not written the current name yet
  bool alive = true;
  bool seen_this_session = false;  // writer: a kThread record was written this session
  Chunk* current = nullptr;
  // The owner's thread-local writer while the thread is alive (read under the lock).
  internal::ThreadWriter* writer = nullptr;
  uint64_t slots_streamed = 0;   // writer only
  uint64_t events_streamed = 0;  // writer only
  std::atomic<uint64_t> events_dropped{0};
  std::atomic<uint64_t> slow_path_ticks{0};
};

struct NameEntry {
  std::string name;
  std::string category;
  std::string file;
  uint32_t line = 0;
};

struct Registry {
  std::mutex mutex;
  // The running session's W3C trace id (run info "trace_id"), set by start_recording.
  std::atomic<uint64_t> trace_id_high{0};
  std::atomic<uint64_t> trace_id_low{0};
  std::vector<std::unique_ptr<ThreadRecord>> threads;
  std::deque<Chunk*> full_chunks;  // handed over by their threads, oldest first
  std::vector<Chunk*> free_chunks;
  std::vector<std::unique_ptr<Chunk>> all_chunks;
  // The memory bound: at most max_chunks chunks in flight (handed over and not yet
  // written, or free), on top of the one chunk each recording thread holds.
  size_t max_chunks = 0;
  size_t threads_holding_chunks = 0;
  // Chunks available without allocating past max_chunks; read without the lock by the
  // slow path to drop cheaply when the pool is exhausted.
  std::atomic<size_t> chunks_available{0};
  std::atomic<bool> session_running{false};
  // Bumped at each session start; ends lost in an earlier session are not replayed.
  std::atomic<uint64_t> session_generation{0};
  // Counts of threads that exited and were forgotten during this session (for the footer).
  std::vector<format::ThreadStats> exited_thread_stats;
  uint64_t exited_events_dropped = 0;
  uint32_t next_thread_index = 0;

  // Names given by tid (internal::name_thread_if_unnamed) to threads not registered yet;
  // taken by register_thread, dropped by forget_unclaimed_thread_name and at session end.
  std::unordered_map<int64_t, std::string> names_of_unregistered_threads;

  std::vector<NameEntry> names;                        // id = index + 1
  std::unordered_map<std::string, uint32_t> name_ids;  // key: category + '\0' + name

  // Takes a chunk from the pool (allocating while fewer than max_chunks are in use);
  // nullptr when max_chunks are in use.
  Chunk* take_chunk();
  void return_chunk(Chunk* chunk);
  void recount_available();
  size_t chunks_in_use() const;
  size_t chunks_in_flight() const;
  // Events dropped this session, by live threads and by those already forgotten.
  uint64_t events_dropped() const;
  // Frees pooled chunks until at most `limit` exist (or none are free).
  void release_free_chunks_above(size_t limit);
};

Registry& registry();

}  // namespace opsight::record
