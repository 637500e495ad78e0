#include "record/recorder.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <random>

#include "opsight/opsight.hpp"
#include "record/clock.hpp"
#include "record/registry.hpp"
#include "record/stream_writer.hpp"

#ifndef OPSIGHT_VERSION_STRING
#define OPSIGHT_VERSION_STRING "0.0.0"
#endif

namespace opsight {
namespace internal {
std::atomic<bool> g_recording{false};
thread_local constinit ThreadWriter t_writer __attribute__((tls_model("initial-exec")));
}  // namespace internal

namespace record {

namespace {

// Set once this thread's thread_local destructors have run: it must not register again.
thread_local constinit bool t_thread_exited = false;
thread_local constinit ThreadRecord* t_thread_record = nullptr;

// Hands the thread's last chunk over when the thread exits.
struct ThreadExitHook {
  bool armed = false;
  ~ThreadExitHook();
};
thread_local ThreadExitHook t_exit_hook;

// The session's stream writer (owned: created by start, deleted by stop) and the lock that
// serialises start/stop. Plain pointers, never destroyed by static destructors: a session
// may be stopped from an atexit handler after those have run.
std::mutex& session_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
StreamWriter* g_writer = nullptr;
std::atomic<StreamWriter*> g_writer_for_notify{nullptr};

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

ThreadRecord& register_thread(Registry& reg) {
  auto record = std::make_unique<ThreadRecord>();
  record->index = reg.next_thread_index++;
  record->tid = current_tid();
  record->writer = &internal::t_writer;
  ThreadRecord& result = *record;
  reg.threads.push_back(std::move(record));
  t_thread_record = &result;
  return result;
}

// Constructs the thread's exit hook (its destructor runs at thread exit). Must be called
// before taking the registry lock: registering a TLS destructor takes glibc's loader lock,
// and a library constructor running under that lock may be waiting for ours.
void arm_thread_exit_hook() {
  if (!t_exit_hook.armed) t_exit_hook.armed = true;
}

// This thread's async track (switch_track) in the current session: the key it last asked
// for and the key its written stream is on (they differ only after a dropped switch).
// Belongs to session `generation`; a new session starts every thread on key 0.
struct TrackState {
  uint64_t generation = 0;
  uint64_t requested_key = 0;
  uint64_t written_key = 0;
};
thread_local constinit TrackState t_track;

void sync_track_generation(uint64_t generation) {
  if (t_track.generation != generation) t_track = TrackState{generation, 0, 0};
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

// fork(): the forking thread holds both locks across it, so the child inherits consistent
// registry data and unlocked mutexes it owns.
void before_fork() {
  session_mutex().lock();
  registry().mutex.lock();
}

void after_fork_in_parent() {
  registry().mutex.unlock();
  session_mutex().unlock();
}

void after_fork_in_child() {
  // The stream writer thread does not exist in the child: stop recording there without
  // touching it. (The Python package re-arms recording in children it traces.) The other
  // threads do not exist either: forget them and take their chunks back.
  internal::g_recording.store(false, std::memory_order_relaxed);
  Registry& reg = registry();
  reg.session_running.store(false, std::memory_order_relaxed);
  for (Chunk* chunk : reg.full_chunks) reg.return_chunk(chunk);
  reg.full_chunks.clear();
  std::erase_if(reg.threads, [&](const std::unique_ptr<ThreadRecord>& thread) {
    if (thread.get() == t_thread_record) return false;
    if (thread->current != nullptr) {
      --reg.threads_holding_chunks;
      reg.return_chunk(thread->current);
    }
    return true;
  });
  g_writer = nullptr;  // leaked on purpose: its thread belongs to the parent
  g_writer_for_notify.store(nullptr);
  reg.mutex.unlock();
  session_mutex().unlock();
}

std::once_flag g_fork_handler_once;

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

std::unique_ptr<ByteSink> open_file_sink(const std::string& path, std::string* error) {
  class FileSink : public ByteSink {
   public:
    FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    ~FileSink() override { ::close(fd_); }
    bool write(std::string_view bytes) override {
      while (!bytes.empty()) {
        ssize_t written = ::write(fd_, bytes.data(), bytes.size());
        if (written < 0) {
          if (errno == EINTR) continue;
          error_ = path_ + ": cannot write: " + std::strerror(errno);
          return false;
        }
        bytes.remove_prefix(static_cast<size_t>(written));
      }
      return true;
    }
    // Gathers the pieces with writev, a batch of up to kBatch at a time, resuming after
    // partial writes.
    bool write_pieces(const std::vector<std::string_view>& pieces) override {
      static constexpr size_t kBatch = 512;
      std::vector<iovec> vectors;
      vectors.reserve(std::min(pieces.size(), kBatch));
      for (size_t first = 0; first < pieces.size(); first += kBatch) {
        vectors.clear();
        for (size_t i = first; i < std::min(pieces.size(), first + kBatch); ++i)
          if (!pieces[i].empty())
            vectors.push_back({const_cast<char*>(pieces[i].data()), pieces[i].size()});
        size_t done = 0;
        while (done < vectors.size()) {
          ssize_t written =
              ::writev(fd_, vectors.data() + done, static_cast<int>(vectors.size() - done));
          if (written < 0) {
            if (errno == EINTR) continue;
            error_ = path_ + ": cannot write: " + std::strerror(errno);
            return false;
          }
          auto left = static_cast<size_t>(written);
          while (done < vectors.size() && left >= vectors[done].iov_len)
            left -= vectors[done++].iov_len;
          if (done < vectors.size()) {
            vectors[done].iov_base = static_cast<char*>(vectors[done].iov_base) + left;
            vectors[done].iov_len -= left;
          }
        }
      }
      return true;
    }
    std::string error() const override { return error_; }

   private:
    int fd_;
    std::string path_;
    std::string error_;
  };
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = path + ": cannot open for writing: " + std::strerror(errno);
    return nullptr;
  }
  return std::make_unique<FileSink>(fd, path);
}

std::string process_command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  return raw;
}

namespace {

// The recorder's clock, chosen and measured once per process (at the first session).
double session_ticks_per_second() {
  select_clock();
  static const double ticks_per_second = measure_ticks_per_second(2'000'000);
  return ticks_per_second;
}

// Cost of one recorded event on this machine, by timing the real hot path into a scratch
// chunk. Counts toward the overhead every report shows.
double calibrate_event_cost_ns(double ticks_per_second) {
  static constexpr uint32_t kPairs = 2000;
  auto scratch = std::unique_ptr<Chunk>(new Chunk);
  internal::ThreadWriter& writer = internal::t_writer;
  format::Slot* saved_slots = writer.slots;
  uint32_t saved_capacity = writer.capacity;
  uint32_t saved_used = writer.used.load();
  // The same instructions as begin_span/end_span, gated by a flag of its own so that no
  // other thread starts recording while the session is not yet running.
  std::atomic<bool> calibrating{true};
  std::atomic<uint32_t> site_id{1};
  double best = 1e9;
  for (int round = 0; round < 5; ++round) {
    writer.slots = scratch->slots;
    writer.capacity = kChunkSlots;
    writer.used.store(0);
    uint64_t start = internal::now_ticks();
    for (uint32_t i = 0; i < kPairs; ++i) {
      if (!calibrating.load(std::memory_order_relaxed)) continue;
      uint32_t id = site_id.load(std::memory_order_relaxed);
      if (format::Slot* slot = internal::reserve(1)) {
        internal::write_slot(slot, internal::now_ticks(),
                             internal::slot_word(id, format::SlotKind::kBegin));
        internal::commit(1);
      }
      if (format::Slot* slot = internal::reserve(1)) {
        internal::write_slot(slot, internal::now_ticks(),
                             internal::slot_word(0, format::SlotKind::kEnd));
        internal::commit(1);
      }
    }
    uint64_t stop = internal::now_ticks();
    best = std::min(best, static_cast<double>(stop - start) / (2.0 * kPairs));
  }
  writer.slots = saved_slots;
  writer.capacity = saved_capacity;
  writer.used.store(saved_used);
  return best * 1e9 / ticks_per_second;
}

// A W3C trace id: 128 random bits as 32 hex digits.
std::string random_trace_id_hex() {
  std::random_device random;
  std::string hex;
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int word = 0; word < 4; ++word) {
    uint32_t bits = random();
    for (int shift = 28; shift >= 0; shift -= 4) hex.push_back(kDigits[(bits >> shift) & 0xF]);
  }
  return hex;
}

}  // namespace

std::optional<std::string> start_recording(const SinkFactory& open_sink, RecordingOptions options) {
  std::call_once(g_fork_handler_once,
                 [] { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); });
  std::lock_guard session_lock(session_mutex());
  Registry& reg = registry();
  if (reg.session_running.load()) return std::string("an opsight session is already recording");
  // Opened only now: a refused session must not truncate anything.
  std::string sink_error;
  std::unique_ptr<ByteSink> sink = open_sink(&sink_error);
  if (!sink) return sink_error;

  const double ticks_per_second = session_ticks_per_second();
  {
    std::lock_guard lock(reg.mutex);
    reg.max_chunks = std::max<size_t>(2, options.buffer_bytes / sizeof(Chunk));
    // Forget what live threads recorded before this session.
    for (auto& thread : reg.threads) {
      if (thread->current != nullptr)
        thread->current->flushed = thread->writer->used.load(std::memory_order_acquire);
      thread->seen_this_session = false;
      thread->name_changed = false;
      thread->slots_streamed = 0;
      thread->events_streamed = 0;
      thread->events_dropped.store(0);
      thread->slow_path_ticks.store(0);
    }
    for (Chunk* chunk : reg.full_chunks) reg.return_chunk(chunk);
    reg.full_chunks.clear();
    // A smaller budget than the last session's: give the memory back.
    reg.release_free_chunks_above(reg.max_chunks);
    reg.exited_thread_stats.clear();
    reg.exited_events_dropped = 0;
    reg.session_generation.fetch_add(1);
    reg.recount_available();
  }
  double event_cost_ns = calibrate_event_cost_ns(ticks_per_second);

  options.run_info.emplace_back("opsight_version", OPSIGHT_VERSION_STRING);
  options.run_info.emplace_back("trace_id", random_trace_id_hex());
  options.run_info.emplace_back("pid", std::to_string(getpid()));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  options.run_info.emplace_back("host", host);
  if (std::none_of(options.run_info.begin(), options.run_info.end(),
                   [](const auto& entry) { return entry.first == "command_line"; }))
    options.run_info.emplace_back("command_line", process_command_line());

  g_writer = new StreamWriter(std::move(sink), options, event_cost_ns, ticks_per_second);
  g_writer_for_notify.store(g_writer);
  reg.session_running.store(true);
  internal::g_recording.store(true);
  return std::nullopt;
}

void pause_recording() {
  std::lock_guard session_lock(session_mutex());
  internal::g_recording.store(false);
}

void resume_recording() {
  std::lock_guard session_lock(session_mutex());  // never after a concurrent stop
  if (registry().session_running.load()) internal::g_recording.store(true);
}

bool session_running() { return registry().session_running.load(); }

StopResult stop_recording() {
  std::lock_guard session_lock(session_mutex());
  Registry& reg = registry();
  if (!reg.session_running.load() || g_writer == nullptr) return {};
  internal::g_recording.store(false);
  {
    // Under the lock: a thread that handed a chunk over notifies the writer under it too,
    // so none can still be about to touch the writer once it is deleted below.
    std::lock_guard lock(reg.mutex);
    g_writer_for_notify.store(nullptr);
  }
  StopResult result = g_writer->finish();
  uint64_t dropped = 0;
  {
    std::lock_guard lock(reg.mutex);
    reg.session_running.store(false);
    dropped = reg.events_dropped();
    std::erase_if(reg.threads, [](const auto& thread) { return !thread->alive; });
  }
  delete g_writer;
  g_writer = nullptr;
  result.events_dropped = dropped;
  return result;
}

uint64_t events_dropped_so_far() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.events_dropped();
}

void add_thread_overhead_ticks(uint64_t ticks) {
  if (t_thread_record != nullptr && !t_thread_exited)
    t_thread_record->slow_path_ticks.fetch_add(ticks, std::memory_order_relaxed);
}

}  // namespace record

// ---- The hot path's out-of-line half and the public functions ------------------------

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
      if (auto* writer = record::g_writer_for_notify.load()) writer->notify();
    }
  }
  thread->slow_path_ticks.fetch_add(now_ticks() - start, std::memory_order_relaxed);
  return slots;
}

void note_lost_end() { record::note_lost_end(); }

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

std::string_view clip(std::string_view text) { return text.substr(0, format::kMaxInlineString); }

void write_arg(std::string_view key, format::SlotKind kind, uint8_t type, uint64_t value_bits,
               std::string_view string_value) {
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
  name = internal::clip(name);
  return internal::write_with_bytes(internal::now_ticks(), format::SlotKind::kBeginNamed,
                                    static_cast<uint32_t>(name.size()), 0, name);
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
  if (written) {
    record::t_track.written_key = key;
    if (record::t_lost != nullptr && !name.empty() && record::t_lost->named_key == key)
      record::t_lost->has_name = false;
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

void internal::add_overhead_ns(double nanoseconds) {
  if (!(nanoseconds > 0) || record::t_thread_record == nullptr) return;
  double ticks = nanoseconds * record::session_ticks_per_second() / 1e9;
  record::add_thread_overhead_ticks(static_cast<uint64_t>(std::llround(ticks)));
}

}  // namespace opsight
