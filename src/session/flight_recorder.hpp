// The flight recorder of a session (SessionOptions::ring, docs/production.md): the session
// records into a record::RingSink that keeps only the most recent minutes, and writes
// nothing else until something asks for them. A dump writes what the ring holds as an
// ordinary .opsight file ("<dump_prefix>.dump-N.opsight", the trigger and what the ring
// dropped in its run info). Dumps are triggered by:
//   - dump() (the Python package's opsight.dump(), `opsight ctl PID dump`);
//   - SIGUSR2, when the program left that signal at its default (its handler only sets a
//     flag; the recorder's own thread dumps);
//   - a root span that ends with an exception (the `exception.type` argument the Python
//     package records), and a root span slower than a rule ("handle_request>200ms"): the
//     recorder watches the events go by as the stream writer hands them to the ring
//     (io::NativeTail::feed), on the writer's thread, and dumps right after the round
//     that holds the span;
//   - the session's end (the session's output is then the ring's last snapshot).
// Automatic dumps (exception, slow span) are rate-limited: after one, triggers within the
// ring's age (or 10 s for a ring bounded by size only) are counted, not dumped, and at most
// `max_automatic_dumps` happen per session; each dump says how many triggers it absorbed.
//
// Thread-safety: dump() from any thread; the triggers run on the stream writer's thread
// and the recorder's own; construct and stop() from the session's owner.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "record/ring_sink.hpp"

namespace opsight::session {

// "NAME>DURATION": a root span named NAME that lasts longer than DURATION (ns, us, ms, s).
struct SlowSpanRule {
  std::string name;
  int64_t threshold_ns = 0;
};
// Comma-separated rules; nullopt with *error naming the rule that is wrong.
std::optional<std::vector<SlowSpanRule>> parse_slow_span_rules(std::string_view text,
                                                               std::string* error);

struct FlightRecorderOptions {
  record::RingLimits limits;
  std::string dump_prefix;  // dumps go to "<dump_prefix>.dump-N.opsight"
  std::vector<SlowSpanRule> slow_rules;
  bool dump_on_exception = true;
  bool dump_on_signal = true;  // SIGUSR2
  int max_automatic_dumps = 20;
};

struct DumpResult {
  std::string path;   // the file written
  std::string error;  // why none was (then path is empty)
};

class FlightRecorder {
 public:
  explicit FlightRecorder(FlightRecorderOptions options);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // The sink the session records into (once); the recorder keeps a pointer to it, valid
  // until stop().
  std::unique_ptr<record::RingSink> make_sink();
  // Starts the SIGUSR2 watch (after the session started).
  void start();
  // Flushes what was recorded, then writes the ring to the next dump file.
  DumpResult dump(std::string_view trigger);
  // The SIGUSR2 watch off and its thread joined; later dumps are refused.
  void stop();
  // What the ring holds as a file, for the session's output at its end.
  std::string final_snapshot();

  // Dumps written, and automatic triggers absorbed by the rate limit, so far.
  uint64_t dumps_written() const { return dumps_written_.load(); }
  uint64_t triggers_absorbed() const { return triggers_absorbed_.load(); }

 private:
  struct Watch;  // the triggers that watch the events
  DumpResult write_dump(std::string_view trigger, bool flush);
  void automatic_dump(std::string trigger);
  void signal_loop();

  FlightRecorderOptions options_;
  record::RingSink* ring_ = nullptr;
  std::unique_ptr<Watch> watch_;
  std::mutex dump_mutex_;  // one dump at a time, numbered in order
  int64_t last_automatic_dump_ns_ = 0;
  int automatic_dumps_ = 0;
  std::atomic<uint64_t> dumps_written_{0};
  std::atomic<uint64_t> triggers_absorbed_{0};
  uint64_t absorbed_reported_ = 0;  // under dump_mutex_
  std::atomic<bool> stopped_{false};
  bool signal_installed_ = false;
  std::mutex loop_mutex_;
  std::condition_variable loop_wake_;
  bool loop_stopping_ = false;
  std::thread signal_thread_;
};

}  // namespace opsight::session
