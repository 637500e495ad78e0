// Follows a .opsight file while its recorder is still writing it, and reports each span as
// it ends: what a live metrics endpoint needs, in constant memory (per thread, the stack of
// open spans; per process, the open async spans), where read_native builds the whole trace.
//
// poll() reads the whole chunks appended since the last call (a chunk still being written
// is read next time). Durations come from ticks and the recording's ticks_per_second, so
// no clock fit is needed; the file's later clock syncs refine times, not durations.
// Counters report their latest sample; drops come from the newest kDropsSoFar or kStats.
//
// Thread-safety: none; one owner calls poll().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace opsight::io {

struct EndedSpan {
  std::string_view name;
  std::string_view category;
  int64_t pid = 0;
  int64_t duration_ns = 0;
};

struct TailVisitor {
  std::function<void(const EndedSpan&)> on_span;
  std::function<void(std::string_view counter, int64_t pid, double value)> on_counter;
};

class NativeTail {
 public:
  explicit NativeTail(std::string path) : path_(std::move(path)) {}

  // Reads what was appended since the last call. Returns false when the file cannot be
  // read or is not an opsight file (error() says why); a file that has not grown is fine.
  bool poll(const TailVisitor& visitor);

  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }
  uint64_t events_dropped() const { return events_dropped_; }
  uint64_t bytes_read() const { return offset_; }
  bool finished() const { return finished_; }  // the footer was read: the session ended

 private:
  struct OpenSpan {
    uint32_t name = 0;        // name id (kNames); 0 with inline_name for a run-time name
    std::string inline_name;  // empty unless the begin carried its name
    uint64_t begin_ticks = 0;
  };
  struct ThreadState {
    int64_t pid = 0;
    std::unordered_map<uint64_t, std::vector<OpenSpan>> lanes;  // by track key (0: the thread)
    uint64_t lane = 0;
    uint64_t last_ticks = 0;  // the packed async events' reference
    bool has_last_ticks = false;
  };
  struct Name {
    std::string name;
    std::string category;
  };

  void read_chunk_payload(uint32_t type, std::string_view payload, const TailVisitor& visitor);
  void read_events(std::string_view payload, const TailVisitor& visitor);
  void emit(const TailVisitor& visitor, int64_t pid, const OpenSpan& span, uint64_t end_ticks);

  std::string path_;
  std::string error_;
  uint64_t offset_ = 0;  // where the next chunk starts
  bool header_read_ = false;
  bool finished_ = false;
  double ticks_per_second_ = 1e9;
  uint64_t first_sync_ticks_ = 0;
  bool has_sync_ = false;
  uint64_t events_dropped_ = 0;
  std::vector<Name> names_;
  std::unordered_map<uint32_t, ThreadState> threads_;
  // Open async spans per (pid, async id).
  std::unordered_map<int64_t, std::unordered_map<uint64_t, std::vector<OpenSpan>>> async_;
};

}  // namespace opsight::io
