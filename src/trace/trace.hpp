// The trace model: the one in-memory form of a trace that every reader fills and every
// analyzer, report and exporter reads.
//
// A Trace is a set of columnar tables (struct of arrays, like Perfetto's trace processor):
// slices (spans with a duration), flows (directed links between slices), instants, counter
// samples, their arguments, plus the tracks they sit on (a thread's own track, a lane of a
// thread for an interleaved task, or a process-wide async track), processes, and the run's
// metadata. All strings are interned once in a StringTable and referenced by StringId, so a
// slice costs 48 bytes, an argument 24 and a flow 24. docs/trace-model.md describes the
// tables for users.
//
// Timestamps are int64 nanoseconds in the trace's own time base (for opsight's own traces:
// CLOCK_MONOTONIC); RunInfo::unix_offset_ns converts them to wall time when it is known.
//
// Invariants after Trace::finalize() (readers call it; analyzers may rely on it):
//   - within one track, slices are ordered by ts (ties: longer first), depth and parent
//     describe the nesting on that track; across tracks the order is unspecified;
//   - every slice's args are the rows [args_begin[i], args_begin[i+1]) of `slice_args`
//     (args_begin has size()+1 entries); likewise for instants;
//   - span ids are unique within the trace;
//   - every flow joins two existing slice rows (rows renumbered by the ordering are
//     followed); flows added by time (add_flow_by_time) are bound to slices or dropped and
//     counted in unbound_flows.
//
// Thread-safety: none; a Trace is built by one thread and then read by any number.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace opsight::trace {

using StringId = uint32_t;
using TrackId = uint32_t;
using RowIndex = uint32_t;
inline constexpr RowIndex kNoRow = std::numeric_limits<RowIndex>::max();

// Interns strings: each distinct string is stored once and named by a dense StringId.
// Id 0 is always the empty string.
class StringTable {
 public:
  StringTable();
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) noexcept = default;
  StringTable& operator=(StringTable&&) noexcept = default;

  StringId intern(std::string_view text);
  std::string_view get(StringId id) const { return strings_[id]; }
  std::optional<StringId> find(std::string_view text) const;
  size_t size() const { return strings_.size(); }

 private:
  // std::string storage is stable under vector growth only through the index below,
  // which keys on views into heap-allocated strings (moved, not copied, on growth).
  std::vector<std::string> strings_;
  std::unordered_map<std::string_view, StringId> index_;
};

// 128-bit W3C trace id.
struct TraceId {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const TraceId&) const = default;
  std::string to_hex() const;  // 32 lowercase hex digits
};

std::string span_id_to_hex(uint64_t span_id);  // 16 lowercase hex digits

// Deterministic 64-bit mixer (splitmix64 finaliser), used to derive span ids.
constexpr uint64_t mix64(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

// The trace of a root span that joined no other: a trace of its own, as the OpenTelemetry
// SDK gives every root span a new trace id. Derived from the root's span id alone (span
// ids are already unique across threads, processes and runs: derived ones are salted with
// the process's random trace id, given ones come from new_flow_id), so that every
// exporter, the live one and a merge of several processes' files included, gives a root
// the same trace without recording it. Both halves are bijections of the span id.
constexpr TraceId root_trace_id(uint64_t root_span_id) {
  return TraceId{mix64(root_span_id ^ 0x6f70736967687421ULL), mix64(root_span_id)};
}

// Allocates the columns of large tables in 2 MiB-aligned blocks that the kernel is asked
// to back with transparent huge pages: a reader fills tens of MB of fresh columns, and
// with 4 KiB pages the page faults alone took about half of the native reader's time.
// Small columns use the ordinary heap.
void* allocate_column_bytes(size_t bytes);
void free_column_bytes(void* pointer, size_t bytes) noexcept;

template <typename T>
struct ColumnAllocator {
  using value_type = T;
  ColumnAllocator() = default;
  template <typename U>
  constexpr ColumnAllocator(const ColumnAllocator<U>&) noexcept {}
  T* allocate(size_t count) { return static_cast<T*>(allocate_column_bytes(count * sizeof(T))); }
  void deallocate(T* pointer, size_t count) noexcept {
    free_column_bytes(pointer, count * sizeof(T));
  }
  template <typename U>
  bool operator==(const ColumnAllocator<U>&) const noexcept {
    return true;
  }
};
template <typename T>
using Column = std::vector<T, ColumnAllocator<T>>;

// A process of the trace, with what viewers need to lay it out: its name, its place in
// the order (lower first; ties by pid), labels ("rank 0", "GPU 1") and its parent's pid
// as the process saw it when it recorded (getppid(): a shell, a launcher or the traced
// program that started it; 0 if unknown). Which call started it is a flow, not this.
struct Process {
  int64_t pid = 0;
  StringId name = 0;
  int64_t sort_index = 0;
  std::vector<StringId> labels;
  int64_t parent_pid = 0;
};

// What a track is a timeline of.
enum class TrackKind : uint8_t {
  // A thread's own track: everything the thread ran outside any task.
  kThread = 0,
  // A lane of one thread for a task interleaved on it (an asyncio task, a coroutine: see
  // opsight::switch_track); tid is the thread that ran it.
  kThreadLane = 1,
  // A process-wide async track: slices grouped by an id (a request waiting in a queue, a
  // CUDA stream's work) that may begin on one thread and end on another; nestable. tid is
  // 0; async_key is the id.
  kAsync = 2,
};

// A track is a timeline on which slices nest: one per thread, one per lane of a thread,
// one per async id of a process.
struct Track {
  int64_t pid = 0;
  int64_t tid = 0;  // of the thread; a lane keeps the tid of the thread that ran it
  StringId name = 0;
  // 0 for a thread's own track; for a lane, the key the recorder was given (not unique: a
  // key reused for a new task gives a new track with the same key); for an async track,
  // its id.
  uint64_t async_key = 0;
  TrackKind kind = TrackKind::kThread;
  // Place among the process's tracks (lower first; ties by tid, then creation order).
  int64_t sort_index = 0;
  // Time the recorder spent on itself while recording this thread, and its event counts
  // (kept on the thread's own track; lanes and async tracks carry none of their own).
  int64_t overhead_ns = 0;
  uint64_t events_recorded = 0;
  uint64_t events_dropped = 0;

  // True for every track that is not a thread's own (lanes and async tracks).
  bool is_async() const { return kind != TrackKind::kThread; }
};

// A counter track: a named series of values over time in one process. A counter with
// several series (Chrome's "C" event with several args, "memory" with "heap" and "stack")
// is one track per series, all with the same `group` ("memory"), each named
// "<group> <series>" ("memory heap"); a counter of one series has group 0.
struct CounterTrack {
  int64_t pid = 0;
  StringId name = 0;
  StringId unit = 0;
  StringId group = 0;
  StringId series = 0;
};

enum class ArgType : uint8_t { kInt = 0, kDouble = 1, kString = 2, kBool = 3 };

// One key/value attribute of a slice or an instant: its type and the one value that type
// reads, in 16 bytes (a trace holds one per argument, and the PyTorch profiler writes seven
// per operator). Read only the member that `type` names.
struct ArgValue {
  ArgType type = ArgType::kInt;
  union {
    int64_t int_value = 0;  // kInt, kBool (0 or 1)
    double double_value;    // kDouble
    StringId string_value;  // kString
  };

  static ArgValue of_int(int64_t value) {
    ArgValue arg;
    arg.int_value = value;
    return arg;
  }
  static ArgValue of_bool(bool value) {
    ArgValue arg;
    arg.type = ArgType::kBool;
    arg.int_value = value ? 1 : 0;
    return arg;
  }
  static ArgValue of_double(double value) {
    ArgValue arg;
    arg.type = ArgType::kDouble;
    arg.double_value = value;
    return arg;
  }
  static ArgValue of_string(StringId value) {
    ArgValue arg;
    arg.type = ArgType::kString;
    arg.string_value = value;
    return arg;
  }
};
static_assert(sizeof(ArgValue) == 16);

// Columnar table of arguments, owned by rows of another table (see ArgOwner).
struct ArgTable {
  Column<RowIndex> owner;  // row of the slice or instant this argument belongs to
  Column<StringId> key;
  Column<ArgValue> value;

  size_t size() const { return owner.size(); }
  void add(RowIndex owner_row, StringId key_id, ArgValue arg_value) {
    owner.push_back(owner_row);
    key.push_back(key_id);
    value.push_back(arg_value);
  }
};

// Spans with a start and a duration.
struct SliceTable {
  Column<int64_t> ts;   // start, ns
  Column<int64_t> dur;  // duration, ns (>= 0)
  Column<StringId> name;
  Column<StringId> category;
  Column<TrackId> track;
  Column<uint16_t> depth;       // 0 for a root on its track
  Column<uint16_t> flags;       // SliceFlags
  Column<RowIndex> parent;      // row of the enclosing slice, kNoRow for a root
  Column<uint64_t> span_id;     // W3C 64-bit span id, unique in the trace
  Column<RowIndex> args_begin;  // size()+1 entries after finalize()

  size_t size() const { return ts.size(); }
  int64_t end(RowIndex row) const { return ts[row] + dur[row]; }
  // Appends a slice; depth, parent and args are filled by Trace::finalize().
  void reserve(size_t rows);
  RowIndex add(int64_t start_ns, int64_t duration_ns, StringId name_id, StringId category_id,
               TrackId track_id, uint16_t slice_flags = 0, uint64_t id = 0) {
    ts.push_back(start_ns);
    dur.push_back(duration_ns < 0 ? 0 : duration_ns);
    name.push_back(name_id);
    category.push_back(category_id);
    track.push_back(track_id);
    depth.push_back(0);
    flags.push_back(slice_flags);
    parent.push_back(kNoRow);
    span_id.push_back(id);
    return static_cast<RowIndex>(ts.size() - 1);
  }
};

enum SliceFlags : uint16_t {
  // The span had no end in the trace (process killed, session stopped inside it); its
  // end is the last timestamp seen on its track.
  kSliceUnfinished = 1 << 0,
  // The span's id was given by the program (opsight::set_span_id: the id a client sent in
  // a traceparent header), not derived by the reader; writers keep it.
  kSliceExplicitSpanId = 1 << 1,
};

// W3C trace context carried by spans that joined a trace begun elsewhere: a server span
// begun for a request whose traceparent header named the caller's trace and span. An
// exporter sends such a span, and every span under it, in that trace, with the remote
// span as the parent of this one. Sparse: a row per span that carries a context.
struct SpanContextTable {
  Column<RowIndex> slice;
  Column<TraceId> trace_id;
  Column<uint64_t> parent_span_id;  // the remote parent; 0: this span starts the trace
  Column<uint8_t> trace_flags;      // W3C trace flags (bit 0: sampled)

  size_t size() const { return slice.size(); }
  void add(RowIndex row, TraceId trace, uint64_t parent, uint8_t flags) {
    slice.push_back(row);
    trace_id.push_back(trace);
    parent_span_id.push_back(parent);
    trace_flags.push_back(flags);
  }
};

// How far an instant reaches: the thread it happened on, its whole process, or every
// process of the trace (Chrome's "s": "t", "p", "g"). Its track is always the thread's.
enum class InstantScope : uint8_t { kThread = 0, kProcess = 1, kGlobal = 2 };

struct InstantTable {
  Column<int64_t> ts;
  Column<StringId> name;
  Column<StringId> category;
  Column<TrackId> track;
  Column<InstantScope> scope;
  Column<RowIndex> args_begin;  // size()+1 entries after finalize()

  size_t size() const { return ts.size(); }
  RowIndex add(int64_t ts_ns, StringId name_id, StringId category_id, TrackId track_id,
               InstantScope instant_scope = InstantScope::kThread) {
    ts.push_back(ts_ns);
    name.push_back(name_id);
    category.push_back(category_id);
    track.push_back(track_id);
    scope.push_back(instant_scope);
    return static_cast<RowIndex>(ts.size() - 1);
  }
};

// Directed links between slices: work handed from one slice (where it was sent off) to
// another (where it was picked up), across threads, tracks and processes: a request
// queued by one thread and served by another, an asyncio task and the span that created
// it, a child process and the call that started it. A chain of hand-offs (Chrome's
// s -> t -> f) is one row per step, all with the same id.
struct FlowTable {
  Column<RowIndex> slice_out;  // the slice the flow leaves
  Column<RowIndex> slice_in;   // the slice it arrives at
  Column<uint64_t> id;         // the id the source gave the flow (0 if none)
  Column<StringId> name;
  Column<StringId> category;

  size_t size() const { return slice_out.size(); }
  void add(RowIndex out_row, RowIndex in_row, uint64_t flow_id, StringId name_id = 0,
           StringId category_id = 0) {
    slice_out.push_back(out_row);
    slice_in.push_back(in_row);
    id.push_back(flow_id);
    name.push_back(name_id);
    category.push_back(category_id);
  }
};

// One end of a flow whose other end is in another trace: the call in a parent process
// that started a child (the child recorded its own file), or the child's root that it
// started. append_trace joins an outgoing end with an incoming end of the same id into a
// flow; ends still open are kept (and counted by reports), never shown as arrows.
struct OpenFlowEnd {
  RowIndex slice = kNoRow;
  uint64_t id = 0;
  bool outgoing = false;
  // An outgoing end already joined to an incoming one stays, for more incoming ends of the
  // same id in traces appended later (one call, several children); it is not "open".
  bool joined = false;
};

// Which slice a flow end known only by its time and track binds to (Chrome JSON's rules):
// the innermost slice open at that time, or the first slice that begins at or after it.
enum class FlowBinding : uint8_t { kEnclosingSlice = 0, kNextSlice = 1 };

// One end of a flow given by time, for add_flow_by_time.
struct FlowEndpoint {
  TrackId track = 0;
  int64_t ts = 0;
  FlowBinding binding = FlowBinding::kEnclosingSlice;
};

struct CounterTable {
  Column<int64_t> ts;
  Column<uint32_t> counter_track;  // index into Trace::counter_tracks
  Column<double> value;

  size_t size() const { return ts.size(); }
  void add(int64_t ts_ns, uint32_t counter_track_index, double sample) {
    ts.push_back(ts_ns);
    counter_track.push_back(counter_track_index);
    value.push_back(sample);
  }
};

// What is known about the run that produced the trace.
struct RunInfo {
  std::string command_line;
  std::string host;
  std::string opsight_version;  // of the recorder that wrote it, empty for foreign traces
  std::string source_format;    // "opsight", "chrome-json", "pytorch-profiler", "onnxruntime"
  std::string clock;            // "tsc", "clock_gettime", or the foreign tool's clock
  int64_t pid = 0;
  int64_t start_unix_ns = 0;   // wall time the recording started, 0 if unknown
  int64_t unix_offset_ns = 0;  // add to a ts to get Unix-epoch ns; 0 if unknown
  bool has_unix_offset = false;
  TraceId trace_id;
  int64_t overhead_ns = 0;      // total time the recorder spent on itself
  int64_t traced_ns = 0;        // wall span of the recording (for the overhead share)
  uint64_t events_dropped = 0;  // events lost to the memory bound
  bool complete = true;         // false if the file ended early (crash, truncation)
  // Anything else a reader found worth keeping (e.g. PyTorch's schemaVersion).
  std::vector<std::pair<std::string, std::string>> extra;
};

// The whole trace. Readers fill the tables through the add/intern helpers and then call
// finalize(); everything else only reads.
class Trace {
 public:
  StringTable strings;
  std::vector<Process> processes;
  std::vector<Track> tracks;
  std::vector<CounterTrack> counter_tracks;
  SliceTable slices;
  ArgTable slice_args;
  InstantTable instants;
  ArgTable instant_args;
  CounterTable counters;
  FlowTable flows;
  std::vector<OpenFlowEnd> open_flow_ends;
  SpanContextTable span_contexts;
  RunInfo run;

  // Open flow ends not joined to any other end (what reports count as unlinked).
  size_t unjoined_flow_ends() const;

  Trace() = default;
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;
  Trace(Trace&&) noexcept = default;
  Trace& operator=(Trace&&) noexcept = default;

  StringId intern(std::string_view text) { return strings.intern(text); }
  std::string_view str(StringId id) const { return strings.get(id); }

  // Returns the thread's own track for (pid, tid), creating it if needed.
  TrackId thread_track(int64_t pid, int64_t tid);
  // Appends a new lane of thread (pid, tid) for `key` (non-zero) named `name`, or
  // "track <key>" when `name` is empty. Every call makes a new track.
  TrackId async_track(int64_t pid, int64_t tid, uint64_t key, std::string_view name = {});
  // Appends a new process-wide async track of pid for id `key`, named `name` (or
  // "async <key>"). Every call makes a new track: readers keep their own index by id.
  TrackId process_async_track(int64_t pid, uint64_t key, std::string_view name = {});
  // A flow whose ends are known only by time and track (Chrome JSON's flow events):
  // finalize() binds each end to a slice by its rule and adds the flow to `flows`; an end
  // with no slice to bind to drops the flow and counts it in unbound_flows.
  void add_flow_by_time(FlowEndpoint out, FlowEndpoint in, uint64_t flow_id, StringId name_id = 0,
                        StringId category_id = 0);

  // What reports call a track: its name, else "thread <tid>" (or "track <key>").
  std::string track_label(TrackId track) const;
  // Returns the process entry for pid, creating it if needed.
  Process& process(int64_t pid);
  uint32_t counter_track(int64_t pid, std::string_view name, std::string_view unit = {});
  // The track of one series of a counter with several ("memory" / "heap"): named
  // "<group> <series>", created if needed.
  uint32_t counter_series(int64_t pid, std::string_view group, std::string_view series,
                          std::string_view unit = {});

  // Sorts slices per track by time, computes depth and parent from nesting, assigns span
  // ids to slices that have none, orders args by owner and fills args_begin. Slices that
  // overlap without nesting (bad input) are clipped to their parent's end and counted.
  void finalize();

  // Set by a reader that already appended slices in (track, ts) order and filled depth and
  // parent itself (the native reader does): finalize() then trusts them and skips the
  // ordering check and the nesting pass.
  bool nesting_filled_by_reader = false;

  // Earliest start and latest end over slices, instants and counters; {0,0} if empty.
  std::pair<int64_t, int64_t> time_bounds() const;

  // Number of slices finalize() had to clip because they overlapped a sibling's parent.
  uint64_t clipped_slices = 0;
  // Flows added by time that finalize() found no slice for (see add_flow_by_time).
  uint64_t unbound_flows = 0;

 private:
  struct FlowByTime {
    FlowEndpoint out;
    FlowEndpoint in;
    uint64_t id;
    StringId name;
    StringId category;
  };
  std::vector<FlowByTime> flows_by_time_;
  TrackId add_keyed_track(TrackKind kind, int64_t pid, int64_t tid, uint64_t key,
                          std::string_view name, std::string_view unnamed_prefix);
  void bind_flows_by_time();
  void drop_flows_without_slices();

  struct PairHash {
    size_t operator()(const std::pair<int64_t, int64_t>& key) const {
      return static_cast<size_t>(
          mix64(static_cast<uint64_t>(key.first) * 31 + static_cast<uint64_t>(key.second)));
    }
  };
  std::unordered_map<std::pair<int64_t, int64_t>, TrackId, PairHash> track_index_;
  std::unordered_map<int64_t, size_t> process_index_;  // pid -> position in processes
  std::unordered_map<std::pair<int64_t, int64_t>, uint32_t, PairHash>
      counter_index_;  // (pid, name)
};

// Finds the slices of a finalized trace by track and time (what binds a flow end given by
// time, and what a viewer asks when a point of a timeline is clicked). Builds one sorted
// row list per track: O(slices) memory, O(log n + depth) per question. The trace must
// outlive it and stay unchanged.
class SliceLookup {
 public:
  explicit SliceLookup(const Trace& trace);
  // The innermost slice of `track` open at `ts`, its end included (begin <= ts <= end), or
  // kNoRow.
  RowIndex enclosing(TrackId track, int64_t ts) const;
  // The first slice of `track` that begins at or after `ts`, or kNoRow.
  RowIndex next(TrackId track, int64_t ts) const;

 private:
  const Trace& trace_;
  std::vector<std::vector<RowIndex>> rows_of_track_;
};

// Appends every row of `from` to `into`, so that one Trace holds the traces of several
// processes (each writes its own file): strings are re-interned; processes, thread tracks
// (by pid and tid) and counter tracks (by pid and name) are shared with those `into`
// already has, lanes and async tracks are always added; slice parents, arg owners and
// flows are shifted with their rows; open flow ends of one trace are joined with the
// other's of the same id (a parent's call to the child it started); span ids that collide
// with one already in `into` are replaced.
// Run info: `into`'s command line, host, trace id and pid stay (taken from `from` when
// `into` is empty); overhead, drops and clipped slices add up; complete only if both are;
// traced_ns becomes the wall span of the union of both recordings. Afterwards `into` is
// finalized again (a thread track both traces have is re-sorted and re-nested when their
// slices interleave in time). `from` is left unchanged.
void append_trace(Trace& into, const Trace& from);

// The run-info extras that count problems (unmatched ends, undecodable slots, ...): a merge
// of several runs adds them up (append_trace, and the streaming merge of native files).
bool is_run_info_count(std::string_view key);
// Such an extra's value: a decimal count, else nullopt.
std::optional<uint64_t> parse_run_info_count(std::string_view text);

// Merges the run info of another recording into `into`: the rule append_trace follows, and
// the streaming merge of native files (one home for both). The command line, host, version,
// source format and clock, the pid, trace id and Unix offset stay, taken from `other` when
// `into` has none; overhead and drops add up, and the extras too where is_run_info_count
// says a key counts (both values decimal; any other key keeps `into`'s value, a new key is
// added at the end); complete only if both are. Each recording's window (in its own time
// base) is [start_unix_ns - unix_offset_ns, + traced_ns] when its run info says when it
// started, else from its events' bounds (`into_events`, `other_events`: first and last ns
// as Trace::time_bounds, nullopt when it has no events) to at least first + traced_ns;
// traced_ns becomes the wall span of the union of both windows and, with a Unix offset,
// start_unix_ns its start. The overhead and the window saturate at the int64 limits.
void merge_run_info(RunInfo& into, std::optional<std::pair<int64_t, int64_t>> into_events,
                    const RunInfo& other, std::optional<std::pair<int64_t, int64_t>> other_events);

// Adds `offset_ns` to every timestamp of `trace` (slices, instants, counter samples): the
// step that brings another tool's trace onto a trace's clock before append_trace (an ONNX
// Runtime profile counts from its own start, on the wall clock). Durations, row order,
// nesting and ids are unchanged. The wall time each event names is kept: when the trace
// knows its Unix offset, unix_offset_ns decreases by offset_ns (start_unix_ns stays).
// Additions saturate at the int64 limits.
void shift_timestamps(Trace& trace, int64_t offset_ns);

// Which slices a time window keeps: those that start inside it (a foreign profile cut to a
// recording), or those that overlap it (begin_ns <= end and ts <= end_ns: what a time
// window of a trace shows; a slice's parents overlap it too, so nesting is kept whole).
enum class WindowRule : uint8_t { kStartsInside, kOverlaps };

// Removes the slices outside the window (by `rule`), and the instants and counter samples
// before begin_ns or after end_ns, with their args, then finalizes again (the nesting of
// what is kept is computed anew). For a foreign profile that covers more than a recording:
// ONNX Runtime profiles a session from its creation, opsight only while a profile runs;
// with kOverlaps, for a time window of a trace (`opsight report --window`). Tracks and
// processes stay.
void keep_time_window(Trace& trace, int64_t begin_ns, int64_t end_ns,
                      WindowRule rule = WindowRule::kStartsInside);

}  // namespace opsight::trace
