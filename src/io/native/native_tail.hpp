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
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/native/slot_decoder.hpp"
#include "opsight/internal/native_layout.hpp"
#include "trace/trace.hpp"

namespace opsight::io {

// An argument of a span, its string (for kString) held by the tail until the visitor
// returns.
struct TailArg {
  std::string key;
  trace::ArgValue value;  // kString: string_value unused, see `text`
  std::string text;
};

// A span that just ended, as the whole-file reader would show it: the same span id (the
// reader's derivation, or the program's own), its parent's id, its trace when it joined
// a remote one, its arguments. Times are Unix-epoch ns from the clock syncs read so far
// (the whole-file reader fits a line through all of them, so its times may differ from
// these by the file's clock_max_error_ns).
// (NativeTail::emit reuses one and sets every field: a field added here is set there.)
struct EndedSpan {
  std::string_view name;
  std::string_view category;
  std::string_view thread_name;
  int64_t pid = 0;
  int64_t tid = 0;
  int64_t duration_ns = 0;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  uint64_t span_id = 0;
  uint64_t parent_span_id = 0;       // 0: a root (or a remote parent: see `remote_parent`)
  std::string_view parent_category;  // of the enclosing span on its thread; empty: none
  // The enclosing span on its lane (an async span: the enclosing one of its id), whose row
  // is the whole-file reader's parent of this one: what self times are computed from.
  bool has_local_parent = false;
  std::string_view parent_name;  // its name (empty without one)
  // The kNames ids of `name` and `parent_name` (0: a name given inline, an id the file has
  // not named, or no parent): a consumer may key by them instead of by the text, which is
  // the same for every span of an id.
  uint32_t name_id = 0;
  uint32_t parent_name_id = 0;
  bool unfinished = false;  // still open when the recording ended
  bool async = false;       // an async span (its id is not the file reader's)
  // Its trace: the remote trace it or an ancestor joined, the session's (an ancestor called
  // opsight::join_session_trace), else its root's own (trace::root_trace_id).
  trace::TraceId trace_id;
  uint8_t trace_flags = 1;
  bool remote_parent = false;  // parent_span_id is the caller's span (it joined here)
  const std::vector<TailArg>* args = nullptr;
  // Where on its thread it ran: 0, the thread's own track, or the key of an async lane of
  // the thread (switch_track), named `lane_name` when the recorder named it.
  uint64_t lane = 0;
  std::string_view lane_name;
  uint64_t lane_serial = 0;  // which lane of that key (a key named again is a new lane)
  uint64_t async_id = 0;     // an async span's id (within its process)
};

// A span's begin, as it is read (its arguments come with its end, in EndedSpan): what a
// writer of begin/end pairs needs (a streaming Perfetto writer).
struct BegunSpan {
  std::string_view name;
  std::string_view category;
  uint32_t name_id = 0;  // as EndedSpan::name_id
  std::string_view thread_name;
  int64_t pid = 0;
  int64_t tid = 0;
  int64_t start_unix_ns = 0;
  bool async = false;
  uint64_t async_id = 0;  // async: its id (within its process)
  uint64_t lane = 0;      // not async: as EndedSpan::lane
  std::string_view lane_name;
  uint64_t lane_serial = 0;
};

// An instant with the arguments that followed it (reported once the thread's next event,
// or finish(), shows that no more follow).
struct TailInstant {
  std::string_view name;
  std::string_view category;
  int64_t pid = 0;
  int64_t tid = 0;
  uint64_t lane = 0;  // as EndedSpan::lane
  std::string_view lane_name;
  int64_t unix_ns = 0;
  uint8_t scope = 0;  // trace::InstantScope
  const std::vector<TailArg>* args = nullptr;
};

// A counter sample with its time.
struct TailCounterSample {
  std::string_view name;
  int64_t pid = 0;
  int64_t unix_ns = 0;
  double value = 0;
};

// A thread the file described (kThread), as finish() leaves it.
struct TailThread {
  int64_t pid = 0;
  int64_t tid = 0;
  std::string_view name;
  uint32_t thread_index = 0;  // the file's index of the thread
  uint64_t events = 0;        // events decoded (the whole-file reader's events_recorded)
  // A span or instant began on it (on any lane): the whole-file reader gives it a track,
  // which carries its overhead.
  bool has_track = false;
};

struct TailVisitor {
  std::function<void(const EndedSpan&)> on_span;
  // Optional, for consumers that keep everything (a streaming converter): instants,
  // counter samples with their times, and flow events (not decoded: counted).
  std::function<void(const TailInstant&)> on_instant;
  std::function<void(const TailCounterSample&)> on_counter_sample;
  std::function<void()> on_flow;
  // Optional: every span's begin, in file order (before its end's on_span).
  std::function<void(const BegunSpan&)> on_begin;
};

// The first and last clock syncs of a file, found by walking its chunk headers (payloads of
// other chunks are skipped, not read): what NativeTail::use_clock takes so that a streaming
// pass times events as the whole-file reader does. `found` stays false without a sync.
struct FileClock {
  format::ClockSync first{}, last{};
  bool found = false;
};
// nullopt, or why the file cannot be scanned (cannot be opened, not an opsight file).
std::optional<std::string> scan_file_clock(const std::string& path, FileClock* clock);

class NativeTail {
 public:
  // `window_bytes`: how much of the file poll() holds at a time (a chunk larger than it is
  // read whole: the window grows to hold it).
  explicit NativeTail(std::string path, size_t window_bytes = size_t{8} << 20)
      : path_(std::move(path)), window_bytes_(window_bytes < 4096 ? 4096 : window_bytes) {}

  // Reads what was appended since the last call, a window at a time (memory stays bounded
  // whatever the file's size). Returns false when the file cannot be read or is not an
  // opsight file (error() says why); a file that has not grown is fine.
  bool poll(const TailVisitor& visitor);
  // The same for bytes handed over in memory (a stream's whole chunks, in order, the first
  // beginning with the file header): what a sink sees the recorder write.
  bool feed(std::string_view bytes, const TailVisitor& visitor);

  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }
  uint64_t events_dropped() const { return events_dropped_; }
  uint64_t bytes_read() const { return offset_; }
  trace::TraceId trace_id() const { return trace_id_; }  // the run info's, once read
  bool finished() const { return finished_; }            // the footer was read: the session ended
  // After the footer: reports the spans still open as unfinished, ended at their
  // thread's last event (as the whole-file reader closes them). Once.
  void finish(const TailVisitor& visitor);

  // Times every event on the line through these two syncs (a finished file's first and
  // last, found by a scan of its chunk headers) instead of the syncs read so far: the times
  // of the whole-file reader. The file's own kClockSync chunks are then skipped.
  void use_clock(const format::ClockSync& first, const format::ClockSync& last);
  // The run info's pairs read so far, in file order.
  const std::vector<std::pair<std::string, std::string>>& run_info() const { return run_info_; }
  // Unix ns minus monotonic ns of the first sync (0 before one is read).
  int64_t unix_offset_ns() const {
    return has_sync_ ? first_sync_.realtime_ns - first_sync_.monotonic_ns : 0;
  }
  std::vector<TailThread> threads() const;
  // The names read so far (kNames), by id (0 and ids the file skipped: empty): each name
  // and its category.
  std::vector<std::pair<std::string_view, std::string_view>> names() const;
  // What the whole-file reader's overhead figure is made of: the events decoded, the
  // recorder's calibrated cost of one, and its slow paths' ticks (from the latest stats).
  uint64_t events_decoded() const { return events_decoded_; }
  double event_cost_ns() const { return event_cost_ns_; }
  uint64_t slow_path_ticks() const { return slow_path_ticks_; }
  // Per thread, the latest stats chunk's counts (kStats, else the last kDropsSoFar).
  const std::vector<format::ThreadStats>& thread_stats() const { return thread_stats_; }

  // The innermost span open on lane `lane` (0: the thread's own track) of thread `tid` of
  // process `pid`, with the ids its EndedSpan will carry; nullopt: none. Asked from
  // on_instant, it is the span that was open when the instant was recorded (the thread's
  // events after the instant are not read yet): what live log export gives a record.
  struct OpenSpanIds {
    uint64_t span_id = 0;
    trace::TraceId trace_id;  // as EndedSpan::trace_id
    uint8_t trace_flags = 1;
  };
  std::optional<OpenSpanIds> open_span(int64_t pid, int64_t tid, uint64_t lane) const;

 private:
  struct OpenSpan {
    uint32_t name = 0;        // name id (kNames); 0 with inline_name for a run-time name
    std::string inline_name;  // the name the begin carried (named_inline)
    bool named_inline = false;
    uint64_t begin_ticks = 0;
    uint64_t span_id = 0;
    uint64_t parent_span_id = 0;
    uint32_t parent_name = 0;  // the enclosing span's name id (0: none, or a run-time name)
    trace::TraceId trace_id;
    uint8_t trace_flags = 1;
    bool remote_parent = false;
    bool own_root_trace = false;  // trace_id is the root's own, derived from span_id
    uint64_t lane = 0;            // the lane it began on
    uint64_t async_id = 0;        // an async span's id
    std::vector<TailArg> args;
  };
  // An instant waiting for the args that may follow it.
  struct PendingInstant {
    uint32_t name = 0;
    std::string inline_name;
    bool named_inline = false;
    uint64_t ticks = 0;
    uint64_t lane = 0;
    uint8_t scope = 0;
    std::vector<TailArg> args;
  };
  // One track of a thread (its own, key 0, or an async lane), as the reader keeps it.
  struct Lane {
    std::vector<OpenSpan> open;
    bool after_instant = false;  // args that follow belong to an instant, not a span
    uint64_t last_ticks = 0;     // where spans left open by a reused key end
    std::string name;            // the name the recorder gave the lane, if any
    uint64_t serial = 0;         // NativeTail-wide number of this lane (a key named again: new)
  };
  struct ThreadState {
    int64_t pid = 0;
    int64_t tid = 0;
    std::string name;
    std::unordered_map<uint64_t, Lane> lanes;  // by track key (0: the thread)
    uint64_t lane = 0;
    native::ThreadSlotState slots;  // the one slot decoder's state (ids, packed ticks)
    std::optional<PendingInstant> pending_instant;
    uint64_t events = 0;     // events decoded
    bool has_track = false;  // a span or instant began on it
  };
  struct Name {
    std::string name;
    std::string category;
  };

  // Reads the header (first) and the whole chunks of `data`; the bytes used, or nullopt
  // (error_ set) for a file that is not opsight's.
  std::optional<size_t> consume(std::string_view data, const TailVisitor& visitor);
  void read_chunk_payload(uint32_t type, std::string_view payload, const TailVisitor& visitor);
  void read_events(std::string_view payload, const TailVisitor& visitor);
  // Reports `open.back()` (its parent: the span below it), ended at `end_ticks`.
  void emit(const TailVisitor& visitor, const ThreadState& thread,
            const std::vector<OpenSpan>& open, uint64_t end_ticks, bool unfinished, bool async);
  // A span's name as the whole-file reader names it; `unknown` holds the text of an id the
  // file never named.
  std::string_view name_of(const OpenSpan& span, std::string& unknown) const;
  // A span with no parent: the root of a trace of its own (trace::root_trace_id).
  static void set_own_root_trace(OpenSpan& span) {
    span.trace_id = trace::root_trace_id(span.span_id);
    span.trace_flags = 1;
    span.own_root_trace = true;
  }
  int64_t unix_ns(uint64_t ticks) const;
  void flush_instant(const TailVisitor& visitor, ThreadState& thread);

  std::string path_;
  size_t window_bytes_;
  std::string error_;
  uint64_t offset_ = 0;  // where the next chunk starts
  bool header_read_ = false;
  bool finished_ = false;
  bool finish_reported_ = false;
  double ticks_per_second_ = 1e9;
  uint64_t first_sync_ticks_ = 0;
  bool has_sync_ = false;
  format::ClockSync first_sync_{}, last_sync_{};
  bool clock_fixed_ = false;  // use_clock() was called
  // unix_ns()'s slope (16.48 fixed point), fitted again only when a sync or the tick rate
  // changed: fitting it on every call was 14% of a streamed summary's time (perf).
  mutable int64_t clock_slope_fixed_ = 0;
  mutable bool clock_slope_stale_ = true;
  uint64_t events_decoded_ = 0;
  double event_cost_ns_ = 0;
  uint64_t slow_path_ticks_ = 0;
  std::vector<format::ThreadStats> thread_stats_;
  std::string unknown_name_, unknown_parent_name_;  // emit()'s texts of unnamed ids
  EndedSpan ended_;                                 // emit()'s event, reused
  std::vector<std::pair<std::string, std::string>> run_info_;
  uint64_t span_salt_ = 0;  // from the run's trace id, as the reader salts span ids
  trace::TraceId trace_id_;
  uint64_t events_dropped_ = 0;
  std::vector<Name> names_;
  std::unordered_map<uint32_t, ThreadState> threads_;
  // Open async spans per (pid, async id), with the thread that began them.
  std::unordered_map<int64_t, std::unordered_map<uint64_t, std::vector<OpenSpan>>> async_;
  uint64_t last_async_ticks_ = 0;  // where async spans never ended end
  uint64_t next_lane_serial_ = 1;
  // Reports a begin to visitor.on_begin.
  void report_begin(const TailVisitor& visitor, const ThreadState& thread, const OpenSpan& span,
                    bool async);
};

}  // namespace opsight::io
