// Streams a session's events to its ByteSink in the native format, from a background
// thread: every flush interval (or when a chunk is handed over) it drains full chunks and
// the committed part of live ones, and appends kNames, kThread, kEvents and kClockSync
// chunks, and kDropsSoFar when events were dropped since the last round. finish() does a
// last round and appends the kStats footer.
//
// Thread-safety: constructed, notified and finished from the session's owner; the drain
// runs on the writer's own thread and takes the registry lock only to snapshot.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  // Drains everything, writes the footer, stops the thread. Call once.
  StopResult finish();

 private:
  void run();
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
  };
  std::vector<EventsPiece> events_pieces_;
  std::vector<std::string_view> pieces_;

  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool wake_requested_ = false;
  bool stop_requested_ = false;
  std::thread thread_;
};

}  // namespace opsight::record
