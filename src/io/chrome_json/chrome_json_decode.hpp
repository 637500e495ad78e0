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
//                   pid and tid to numbers (a non-numeric string is kept as text: the
//                   merge gives it a number), args to ArgValues, opsight's own markers
//                   (span id, unfinished) to fields
//   M               process_name / thread_name with the name; anything else is ignored
//   other phases    kSkipped, named by the phase; malformed events kInvalid, saying why
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
  kSlice,        // X
  kBegin,        // B
  kEnd,          // E
  kInstant,      // i, I
  kCounter,      // C: its args are its numeric samples (kDouble)
  kProcessName,  // M process_name: name is the process's name
  kThreadName,   // M thread_name: name is the thread's name (see DecodedEvent::span_id)
  kIgnored,      // M of another kind, or without a name
  kSkipped,      // a phase the model has no table for: name is the phase
  kInvalid,      // malformed: problem says why
};

enum DecodedFlags : uint8_t {
  kUnfinished = 1 << 0,  // opsight's "opsight.unfinished": true
  kPidIsText = 1 << 1,   // pid is the string pid_text (not a number)
  kTidIsText = 1 << 2,   // tid is the string tid_text
};

enum class EventProblem : uint8_t {
  kNone,
  kNotAnObject,
  kNoPhase,
  kNoTs,
  kBadTs,
  kBadDur,
};
const char* describe(EventProblem problem);

// One event, in 64 bytes. String fields are ids into DecodedEvents::strings.
struct DecodedEvent {
  int64_t ts = 0;   // ns, the file's time base added
  int64_t dur = 0;  // ns, >= 0 (X only)
  int64_t pid = 0;
  int64_t tid = 0;
  // X, B: the span id opsight's writer gave it (0: none). kThreadName: the key of the
  // async lane this names (0: a plain thread); its one arg is then the lane's thread's tid.
  uint64_t span_id = 0;
  uint32_t name = 0;
  uint32_t category = 0;
  uint32_t pid_text = 0;  // with kPidIsText
  uint32_t tid_text = 0;  // with kTidIsText
  uint32_t args_end = 0;  // its args are [the previous event's args_end, args_end)
  EventKind kind = EventKind::kIgnored;
  uint8_t flags = 0;
  EventProblem problem = EventProblem::kNone;
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
  LocalStrings strings;
  size_t slices = 0;      // X and B events: rows the merge adds to the slice table
  size_t slice_args = 0;  // args of X, B and E events: rows it adds to the slice args
  bool saw_onnxruntime_category = false;  // an X event of cat "Session" or "Node"

  void clear() {
    events.clear();
    args.clear();
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
  void decode_args(element args, bool own_markers, DecodedEvent& event, DecodedEvents& out);
  void decode_counter_args(element args, DecodedEvents& out);
  trace::ArgValue to_arg_value(element value, LocalStrings& strings);

  bool written_by_opsight_;
  int64_t time_base_ns_;
  TextBuffer compact_json_;
};

}  // namespace opsight::io::chrome_json
