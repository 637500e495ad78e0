// Streams a session's events to its ByteSink in the native format, from a background
// thread: every flush interval (or when a chunk is handed over) it drains full chunks and
// the committed part of live ones, and appends kNames, kThread, kEvents and kClockSync
// chunks, and kDropsSoFar when events were dropped since the last round. finish() does a
// last round and appends the kStats footer, then the time index of every chunk it wrote
// (kIndex and its trailer: docs/native-format.md, "Time index"), built as the chunks go
// out on the writer's thread, never on the recording threads.
//
// Thread-safety: constructed, notified and finished from the session's owner; the drain
// runs on the writer's own thread and takes the registry lock only to snapshot. finish()
// does the last round on the stopping thread and does not wait for the writer's thread to
// be scheduled, wake up and exit (on a busy machine that is the scheduler's latency: a 3.3
// ms median, 7 ms p90, on the development VM with both cores taken, which every session
// stop paid): once woken, the thread touches only the state it shares with the writer
// (ThreadShared), which it keeps alive, and it is joined later, by
// join_finished_writer_threads().
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/chunk_index.hpp"
#include "record/recorder.hpp"
#include "record/registry.hpp"

namespace opsight::record {

class StreamWriter {
 public:
  StreamWriter(std::unique_ptr<ByteSink> sink, const RecordingOptions& options,
               double event_cost_ns, double ticks_per_second);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Asks for a drain soon (a thread handed over a chunk).
  void notify();
  // Drains now, on the calling thread (after any drain in progress), unless finishing:
  // what was recorded until the call reaches the sink before it returns.
  void flush();
  // Drains everything, writes the footer, stops the thread. Call once.
  StopResult finish();

 private:
  // What the writer's thread shares with the writer, owned by both.
  struct ThreadShared {
    std::mutex wake_mutex;
    std::condition_variable wake;
    bool wake_requested = false;
    std::atomic<bool> stop_requested{false};
    std::atomic<bool> exited{false};  // the thread is about to return
    // Held by the writer's thread for each drain, which it starts only while no stop is
    // requested; finish() takes it after requesting the stop, so a drain in progress ends
    // before the last one and none begins after.
    std::mutex drain_mutex;
  };
  static void run(StreamWriter* writer, const std::shared_ptr<ThreadShared>& shared,
                  uint32_t flush_interval_ms);
  void drain(bool final_round);
  void write_out(std::string& bytes);

  std::unique_ptr<ByteSink> sink_;
  uint32_t flush_interval_ms_;
  double event_cost_ns_;
  std::function<std::vector<std::pair<std::string, std::string>>()> final_run_info_;
  std::optional<std::string> error_;
  size_t names_written_ = 0;
  uint64_t drops_written_ = 0;  // the drop count of the last kDropsSoFar chunk
  std::string buffer_;          // file header, run info, names, threads: whatever precedes events
  std::string tail_;            // the clock sync and, at the end, the footer
  // One kEvents chunk: its chunk header and EventsHeader, and the slots it covers.
  struct EventsPiece {
    char header[32];
    const char* slots;
    size_t bytes;
    uint32_t thread_index;
  };
  std::vector<EventsPiece> events_pieces_;
  std::vector<std::string_view> pieces_;
  format::IndexBuilder index_;  // every chunk written so far, for the index at the end
  uint64_t bytes_written_ = 0;  // the file offset of the next chunk

  std::shared_ptr<ThreadShared> shared_ = std::make_shared<ThreadShared>();
  std::thread thread_;
  bool finished_ = false;
};

// Joins the threads of finished writers (each exits as soon as it wakes up): all of them
// (before a fork, so that no writer thread is alive across it, and at process exit), or
// only those that have exited already (when a session starts, which must not wait).
void join_finished_writer_threads(bool exited_only = false);

}  // namespace opsight::record
