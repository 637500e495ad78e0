// The recording session: start, pause, resume and stop, under one lock; the stream writer
// a session owns; the clock and the per-event cost measured for the reports; and fork(),
// after which the child records nothing until it starts a session of its own.
#include "record/recording_session.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "opsight/opsight.hpp"
#include "record/clock.hpp"
#include "record/recorder.hpp"
#include "record/registry.hpp"
#include "record/sampling.hpp"
#include "record/stream_writer.hpp"
#include "record/thread_buffers.hpp"

#ifndef OPSIGHT_VERSION_STRING
#define OPSIGHT_VERSION_STRING "0.0.0"
#endif

namespace opsight::record {

namespace {

// The session's stream writer (owned: created by start, deleted by stop) and the lock that
// serialises start/stop. Plain pointers, never destroyed by static destructors: a session
// may be stopped from an atexit handler after those have run.
std::mutex& session_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
StreamWriter* g_writer = nullptr;
std::atomic<StreamWriter*> g_writer_for_notify{nullptr};

// fork(): the forking thread holds both locks across it, so the child inherits consistent
// registry data and unlocked mutexes it owns.
void before_fork() {
  session_mutex().lock();  // no session stops meanwhile: no writer thread is added
  join_finished_writer_threads();
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
  // The forking thread lives on as the child's main thread, under a new tid.
  if (t_thread_record != nullptr) t_thread_record->tid = static_cast<int64_t>(syscall(SYS_gettid));
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

// Cost of one recorded event on this machine, by timing the real hot path into a scratch
// chunk (the fastest of 5 rounds of 2,000 spans). Counts toward the overhead every report
// shows.
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

double session_ticks_per_second() {
  select_clock();
  static const double ticks_per_second = measure_ticks_per_second(2'000'000);
  return ticks_per_second;
}

void notify_stream_writer() {
  if (auto* writer = g_writer_for_notify.load()) writer->notify();
}

std::string process_command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  std::replace(raw.begin(), raw.end(), '\0', ' ');
  return raw;
}

std::string process_name() {
  std::ifstream file("/proc/self/comm");
  std::string name;
  std::getline(file, name);
  return name;
}

// A process started by a traced call in its parent (the Python package's subprocess and
// multiprocessing hooks set OPSIGHT_PARENT_FLOW="<parent pid>:<flow id in hex>"): the
// flow arrives at the first span this process records. Taken by the first session of the
// process only, and only if the parent named is really the parent (a grandchild that
// inherited the variable is not linked to its grandparent's call).
void link_to_parent_call() {
  static pid_t linked_in = 0;
  if (linked_in == getpid()) return;
  linked_in = getpid();
  const char* value = std::getenv("OPSIGHT_PARENT_FLOW");
  if (value == nullptr) return;
  char* end = nullptr;
  long long parent = std::strtoll(value, &end, 10);
  if (end == value || *end != ':' || parent != static_cast<long long>(getppid())) return;
  // The unit the parent's call was part of, when it sampled (OPSIGHT_PARENT_SAMPLED "1" or
  // "0"): this process's first span continues it.
  if (const char* sampled = std::getenv("OPSIGHT_PARENT_SAMPLED"))
    if ((sampled[0] == '0' || sampled[0] == '1') && sampled[1] == '\0')
      decide_next_sampling_unit(sampled[0] == '1');
  const char* hex = end + 1;
  unsigned long long flow = std::strtoull(hex, &end, 16);
  if (end == hex || *end != '\0' || flow == 0) return;
  flow_into_next(flow);
}

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
  // Once per process (about 0.5 ms, most of a session's start): programs that profile
  // short stretches start sessions often.
  static const double event_cost_ns = calibrate_event_cost_ns(ticks_per_second);

  options.run_info.emplace_back("opsight_version", OPSIGHT_VERSION_STRING);
  std::string trace_id = random_trace_id_hex();
  reg.trace_id_high.store(std::stoull(trace_id.substr(0, 16), nullptr, 16));
  reg.trace_id_low.store(std::stoull(trace_id.substr(16), nullptr, 16));
  options.run_info.emplace_back("trace_id", std::move(trace_id));
  options.run_info.emplace_back("pid", std::to_string(getpid()));
  options.run_info.emplace_back("parent_pid", std::to_string(getppid()));
  if (std::string name = process_name(); !name.empty())
    options.run_info.emplace_back("process_name", std::move(name));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  options.run_info.emplace_back("host", host);
  if (std::none_of(options.run_info.begin(), options.run_info.end(),
                   [](const auto& entry) { return entry.first == "command_line"; }))
    options.run_info.emplace_back("command_line", process_command_line());

  sampling::configure(options.sample_rate, options.sample_root, options.sample_operators_only);
  if (internal::g_sampling.load()) {  // the units seen and recorded go in the final run info
    auto session_info = std::move(options.final_run_info);
    options.final_run_info = [session_info = std::move(session_info)] {
      std::vector<std::pair<std::string, std::string>> entries;
      if (session_info) entries = session_info();
      for (auto& entry : sampling::run_info()) entries.push_back(std::move(entry));
      return entries;
    };
  }
  join_finished_writer_threads(/*exited_only=*/true);
  g_writer = new StreamWriter(std::move(sink), options, event_cost_ns, ticks_per_second);
  g_writer_for_notify.store(g_writer);
  reg.session_running.store(true);
  internal::g_recording.store(true);
  link_to_parent_call();
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
    reg.names_of_unregistered_threads.clear();  // handed over again at the next start
  }
  delete g_writer;
  g_writer = nullptr;
  sampling::clear();
  result.events_dropped = dropped;
  return result;
}

void flush_recording() {
  std::lock_guard session_lock(session_mutex());
  if (g_writer != nullptr && registry().session_running.load()) g_writer->flush();
}

uint64_t events_dropped_so_far() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.events_dropped();
}

}  // namespace opsight::record
