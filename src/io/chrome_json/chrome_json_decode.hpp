// The first half of turning Chrome JSON events into the trace model: each event of a parsed
// window becomes a compact record (DecodedEvents) whose strings are named by ids local to
// the window. Decoding needs nothing of the trace being built, so both threads of a read
// decode windows side by side (chrome_json_windows.hpp); the second half,
// ChromeTraceBuilder::merge in chrome_json_reader.cc, then applies the records in file
// order on one thread: it maps the local string ids to the trace's, resolves tracks, pairs
// B/E events and keeps the counts of what it skipped.
//
// What an event becomes (the reader's header lists what each phase means in the model):
//   X B E i I C     its fields converted: microseconds to ns (plus the file's time base),
//                   (an X without "dur" is invalid, as Perfetto's importer drops it),
//                   pid and tid to numbers (a non-numeric string is kept as text: the
//                   merge gives it a number; no tid: kNoTid, the merge uses the pid), args
//                   to ArgValues, opsight's own markers (span id, unfinished) to fields,
//                   the instant scope "s" and the v2 flow fields (bind_id, flow_in,
//                   flow_out) to flags and an EventExtra
//   b e n S F T p   async begin / end / instant: the id ("id", or "id2" local or global)
//                   to span_id, a global id flagged kGlobalId
//   s t f           flow start / step / end: the id to span_id, "bp":"e" to kBindEnclosing
//   M               process_name, thread_name, process_sort_index, thread_sort_index,
//                   process_labels; anything else is ignored
//   P O N D ...     kSkipped, named by the phase; malformed events kInvalid, saying why
// Only the first character of "ph" counts ("XXX" is X), as in Perfetto's importer.
// Numbers written as strings ("ts": "12.5", a counter's "7") are read as numbers.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/chrome_json/chrome_json_values.hpp"
#include "trace/trace.hpp"

namespace opsight::io::chrome_json {

// The strings of one window, each stored once and named by a dense id; id 0 is the empty
// string. Reused across windows (clear() keeps the memory).
class LocalStrings {
 public:
  LocalStrings();
  uint32_t intern(std::string_view text);
  std::string_view get(uint32_t id) const {
    return {bytes_.data() + spans_[id].first, spans_[id].second};
  }
  size_t size() const { return spans_.size(); }
  void clear();

 private:
  std::string bytes_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;  // offset and length in bytes_, by id
  StringIdIndex index_;
};

enum class EventKind : uint8_t {
  kSlice,             // X
  kBegin,             // B
  kEnd,               // E
  kInstant,           // i, I (scope in the flags)
  kCounter,           // C: its args are its numeric samples (kDouble)
  kAsyncBegin,        // b, S: span_id is the id
  kAsyncEnd,          // e, F
  kAsyncInstant,      // n, T, p: a zero-length slice on the async track
  kFlowStart,         // s: span_id is the flow's id
  kFlowStep,          // t
  kFlowEnd,           // f
  kProcessName,       // M process_name: name is the process's name
  kThreadName,        // M thread_name: name is the thread's name (see DecodedEvent::span_id)
  kProcessSortIndex,  // M process_sort_index: dur holds the index
  kThreadSortIndex,   // M thread_sort_index: dur holds the index
  kProcessLabels,     // M process_labels: name is the labels, comma-separated
  kAsyncTrackName,    // M opsight_async_track (opsight's files): name, span_id the id the
                      // events use, dur the sort index, the extra the track's own key
  kIgnored,           // M of another kind, or without a name
  kSkipped,           // a phase the model has no table for: name is the phase
  kInvalid,           // malformed: problem says why
};

enum DecodedFlags : uint16_t {
  kUnfinished = 1 << 0,     // opsight's "opsight.unfinished": true
  kPidIsText = 1 << 1,      // pid is the string pid_text (not a number)
  kTidIsText = 1 << 2,      // tid is the string tid_text
  kNoTid = 1 << 3,          // the event has no "tid": it belongs to its process's main thread
  kGlobalId = 1 << 4,       // async: the id is global ("id" or "id2.global"), not per process
  kBindEnclosing = 1 << 5,  // f: "bp":"e", binds to the enclosing slice, not the next one
  kScopeProcess = 1 << 6,   // i/I: "s":"p"
  kScopeGlobal = 1 << 7,    // i/I: "s":"g"
  kHasExtra = 1 << 8,       // the next EventExtra of DecodedEvents::extras is this event's
};

// What few events carry beyond the 64-byte record, kept aside so that the common ones stay
// small: the v2 flow fields of a slice, opsight's flow-end marker, an async track's key.
struct EventExtra {
  uint64_t bind_id = 0;  // v2 flows: "bind_id"
  // In opsight's files: for s/t/f the span id of the slice the end binds to; for b/n the
  // span id of the slice it opens (its DecodedEvent::span_id is its async id).
  uint64_t marked_span = 0;
  uint64_t key = 0;  // kAsyncTrackName: the track's own key
  bool flow_in = false;
  bool flow_out = false;
};

enum class EventProblem : uint8_t {
  kNone,
  kNotAnObject,
  kNoPhase,
  kNoTs,
  kBadTs,
  kBadDur,
  kNoDur,
  kNoId,
};
const char* describe(EventProblem problem);

// One event, in 64 bytes. String fields are ids into DecodedEvents::strings.
struct DecodedEvent {
  int64_t ts = 0;   // ns, the file's time base added
  int64_t dur = 0;  // ns, >= 0 (X only)
  int64_t pid = 0;
  int64_t tid = 0;
  // X, B, b: the span id opsight's writer gave it (0: none). kThreadName: the key of the
  // async lane this names (0: a plain thread); its one arg is then the lane's thread's tid.
  // Async and flow events: their id.
  uint64_t span_id = 0;
  uint32_t name = 0;
  uint32_t category = 0;  // kCounter: the text of its "id" (0: none), which names its tracks
  uint32_t pid_text = 0;  // with kPidIsText
  uint32_t tid_text = 0;  // with kTidIsText
  uint32_t args_end = 0;  // its args are [the previous event's args_end, args_end)
  EventKind kind = EventKind::kIgnored;
  EventProblem problem = EventProblem::kNone;
  uint16_t flags = 0;  // DecodedFlags
};

static_assert(sizeof(DecodedEvent) == 64);

struct DecodedArg {
  uint32_t key = 0;       // local string id
  trace::ArgValue value;  // kString values hold a local string id
};

// The events of one window (or one chunk of a document), in file order.
struct DecodedEvents {
  std::vector<DecodedEvent> events;
  std::vector<DecodedArg> args;
  std::vector<EventExtra> extras;  // one per event flagged kHasExtra, in order
  LocalStrings strings;
  size_t slices = 0;      // X and B events: rows the merge adds to the slice table
  size_t slice_args = 0;  // args of X, B and E events: rows it adds to the slice args
  bool saw_onnxruntime_category = false;  // an X event of cat "Session" or "Node"

  void clear() {
    events.clear();
    args.clear();
    extras.clear();
    strings.clear();
    slices = 0;
    slice_args = 0;
    saw_onnxruntime_category = false;
  }
};

// Decodes events into a DecodedEvents. One per thread: it keeps a buffer for the compact
// JSON of nested argument values.
class EventDecoder {
 public:
  // `written_by_opsight`: the file is opsight's own (its "opsight.*" args are markers);
  // `time_base_ns`: added to every timestamp (opsight's writer stores them relative to it).
  EventDecoder(bool written_by_opsight, int64_t time_base_ns)
      : written_by_opsight_(written_by_opsight), time_base_ns_(time_base_ns) {}
  // A copy decodes the same way, with a buffer of its own (one per thread).
  EventDecoder(const EventDecoder& other)
      : EventDecoder(other.written_by_opsight_, other.time_base_ns_) {}
  EventDecoder& operator=(const EventDecoder&) = delete;

  void decode(element event, DecodedEvents& out);

 private:
  // Fills `event` (already appended to out.events) and appends its args.
  void decode_event(element value, DecodedEvent& event, DecodedEvents& out);
  void decode_args(element args, bool own_markers, uint64_t* span_id, DecodedEvent& event,
                   DecodedEvents& out);
  void decode_counter_args(element args, DecodedEvents& out);
  trace::ArgValue to_arg_value(element value, LocalStrings& strings);

  bool written_by_opsight_;
  int64_t time_base_ns_;
  TextBuffer compact_json_;
};

}  // namespace opsight::io::chrome_json
