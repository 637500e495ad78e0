// The recorder's control side: sessions, the per-thread chunk registry, the name
// registry and the byte sinks the stream writer writes to. The hot path is in
// include/opsight/internal/recorder_inline.hpp.
//
// Memory model: slots live in fixed-size chunks from a bounded pool. A thread owns at
// most one chunk at a time; it hands a full chunk to the registry's queue and takes a
// fresh one (reserve_slow, under the registry lock, once per kChunkSlots slots). The stream
// writer thread drains the queue and the committed part of every live chunk, encodes them
// into the native format and returns drained chunks to the pool. Nothing ever blocks a
// recording thread on I/O: with the pool empty, events are dropped and counted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opsight::record {

inline constexpr uint32_t kChunkSlots = 4096;  // 64 KiB of 16-byte slots

// Where the native byte stream goes. Thread-safety: used by the stream writer thread only.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Appends bytes; false (with error() set) if they could not be written.
  virtual bool write(std::string_view bytes) = 0;
  // Appends several pieces in order (the stream writer points them straight at the
  // recorded chunks, so a sink that can gather, as a file can with writev, copies nothing).
  virtual bool write_pieces(const std::vector<std::string_view>& pieces) {
    for (std::string_view piece : pieces)
      if (!write(piece)) return false;
    return true;
  }
  virtual std::string error() const = 0;
};

// Appends to a file with write(2); the kernel keeps what was written if the process dies.
std::unique_ptr<ByteSink> open_file_sink(const std::string& path, std::string* error);

// Keeps the stream in memory.
class MemorySink : public ByteSink {
 public:
  bool write(std::string_view bytes) override {
    bytes_.append(bytes);
    return true;
  }
  std::string error() const override { return {}; }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

struct RecordingOptions {
  size_t buffer_bytes = size_t{64} << 20;
  uint32_t flush_interval_ms = 100;
  // Sampling by unit (SessionOptions::sample_rate, sample_root; record/sampling.hpp).
  double sample_rate = 1.0;
  std::string sample_root;
  bool sample_operators_only = false;
  // Written into the run-info chunk (e.g. "command_line").
  std::vector<std::pair<std::string, std::string>> run_info;
  // Called once when the session stops, after the last events: what it returns is written
  // as a second run-info chunk (e.g. the measured cost of metrics). May be empty.
  std::function<std::vector<std::pair<std::string, std::string>>()> final_run_info;
};

// Opens the sink a session records into; nullptr (with *error set) if it cannot.
using SinkFactory = std::function<std::unique_ptr<ByteSink>(std::string* error)>;

// Starts recording into the sink `open_sink` returns. Returns an error if a session is
// already running (then the sink is never opened) or the sink cannot be opened.
std::optional<std::string> start_recording(const SinkFactory& open_sink, RecordingOptions options);
void pause_recording();
void resume_recording();
bool session_running();  // started and not stopped (paused or not)

struct StopResult {
  std::unique_ptr<ByteSink> sink;  // nullptr if no session was running
  uint64_t events_dropped = 0;
  std::optional<std::string> error;  // the sink's first write error
};
// Stops recording, writes the last events and the stats footer. Thread-safe against
// concurrent recording threads; must not race with start_recording().
StopResult stop_recording();

uint64_t events_dropped_so_far();

// Streams what was recorded so far to the session's sink now, on the calling thread (the
// flight recorder's dump takes the last events this way). Must not be called from the
// sink itself. Does nothing without a session.
void flush_recording();

// Adds time the calling thread spent on the tracer's behalf outside the recorder (reading
// metrics for a span) to the thread's overhead, which the reports show. Does nothing on a
// thread that has not recorded in this session.
void add_thread_overhead_ticks(uint64_t ticks);

// The calling process's command line, joined by spaces (from /proc/self/cmdline).
std::string process_command_line();
// The calling process's name as the kernel keeps it (/proc/self/comm), or empty.
std::string process_name();

}  // namespace opsight::record
