// Reader of the Chrome Trace Event Format (the JSON that chrome://tracing, Perfetto UI,
// the PyTorch profiler (Kineto), ONNX Runtime and opsight's own writer produce).
//
// The event array is cut into windows of about 1 MiB of whole events (a vectorised scan
// of quotes and brackets, chrome_json_repair.cc), each window is parsed with simdjson's
// DOM parser (validating it entirely; chrome_json_windows.cc) and its events are turned
// into rows of the trace tables here (value conversions in chrome_json_values.cc); on a
// machine with two cores the windows are parsed on a helper thread while the calling
// thread builds the rows of the previous ones:
//   X          -> a slice (ts, dur)               B/E -> a slice, paired per thread on a stack
//   i/I        -> an instant                      C   -> one counter sample per numeric arg
//   M          -> process / thread names          anything else -> counted and skipped
// Timestamps are microseconds (possibly fractional) and become int64 nanoseconds.
//
// Inputs that real tools leave behind are accepted: the object form {"traceEvents": [...]}
// and the bare array form, and an array left open at the end (the format allows it; a
// recorder that was killed leaves it cut in the middle of an event). A cut input is
// repaired by closing it after its last complete value (see find_repair_point) and parsed
// again; a cut event makes ReadResult::damage point at the byte where it started.
// Invalid JSON gives ReadResult::error with the byte offset of the first problem, found by
// a second, strict parse with nlohmann-json's SAX parser (simdjson reports no offsets).
// Events that are malformed (not an object, no "ph", a non-numeric "ts") are skipped,
// counted in run.extra, and the first one is described with its byte offset.
//
// Files of the PyTorch profiler and ONNX Runtime are recognised (run.source_format) once
// every event is read, and their categories are then mapped to the canonical ones of
// trace/categories.hpp (chrome_json_categories.cc), the mapping recorded in
// run.extra["category_map"] (docs/reports.md, "Foreign traces").
//
// Thread-safety: read_chrome_json is reentrant; it shares nothing between calls (each
// calling thread keeps its own parsers, which a read's helper thread borrows).
#include <simdjson.h>
// xxHash compiled into this file (header-only mode): the intern cache hashes a short string
// per name, category and argument key of every event, and a call into the shared library
// cost more than the hash itself.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "io/chrome_json_categories.hpp"
#include "io/chrome_json_repair.hpp"
#include "io/chrome_json_values.hpp"
#include "io/chrome_json_windows.hpp"
#include "io/io.hpp"
#include "trace/categories.hpp"
#include "trace/trace.hpp"

namespace opsight::io {
namespace {

// The reader's own parts: repair, values, windows and categories.
using namespace chrome_json;
// Top-level keys that are not scalars are kept in run.extra as compact JSON up to this size.
constexpr size_t kMaxExtraJsonBytes = 4096;

// Async key of the lanes that hold a PyTorch trace's Python functions ("python" in ASCII).
constexpr uint64_t kPythonLaneKey = 0x707974686f6e;

// Whether two strings are equal, compared 8 bytes at a time with loads that stay inside
// both (the last 8 bytes overlap the previous chunk): most names and keys are short, and
// this is cheaper than a call of memcmp.
inline bool same_text(std::string_view a, std::string_view b) {
  const size_t size = a.size();
  if (size != b.size()) return false;
  auto load64 = [](const char* at) {
    uint64_t word;
    std::memcpy(&word, at, 8);
    return word;
  };
  auto load32 = [](const char* at) {
    uint32_t word;
    std::memcpy(&word, at, 4);
    return word;
  };
  if (size >= 8) {
    for (size_t offset = 0; offset + 8 < size; offset += 8)
      if (load64(a.data() + offset) != load64(b.data() + offset)) return false;
    return load64(a.data() + size - 8) == load64(b.data() + size - 8);
  }
  if (size >= 4)
    return load32(a.data()) == load32(b.data()) &&
           load32(a.data() + size - 4) == load32(b.data() + size - 4);
  for (size_t offset = 0; offset < size; ++offset)
    if (a[offset] != b[offset]) return false;
  return true;
}

// A small open-addressing cache in front of StringTable::intern: the same few names,
// categories and arg keys repeat on every event, and XXH3 on a short string plus one
// probe is cheaper than the general-purpose unordered_map behind the StringTable.
class InternCache {
 public:
  explicit InternCache(trace::Trace& trace) : trace_(trace), slots_(kInitialSlots) {}

  trace::StringId intern(std::string_view text) {
    if (text.empty()) return 0;
    uint64_t hash = XXH3_64bits(text.data(), text.size());
    size_t mask = slots_.size() - 1;
    for (size_t index = hash & mask;; index = (index + 1) & mask) {
      Slot& slot = slots_[index];
      if (slot.id == 0) {
        trace::StringId id = trace_.intern(text);
        slot.hash = hash;
        slot.id = id;
        if (++used_ * 2 > slots_.size()) grow();
        return id;
      }
      if (slot.hash == hash && same_text(trace_.str(slot.id), text)) return slot.id;
    }
  }

 private:
  static constexpr size_t kInitialSlots = 1024;
  struct Slot {
    uint64_t hash = 0;
    trace::StringId id = 0;
  };

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.id == 0) continue;
      size_t index = slot.hash & mask;
      while (slots_[index].id != 0) index = (index + 1) & mask;
      slots_[index] = slot;
    }
  }

  trace::Trace& trace_;
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// The fields of one event, gathered in one pass over its members (their order is free).
struct EventFields {
  std::string_view phase;
  std::string_view name;
  std::string_view category;
  element ts;
  element dur;
  element pid;
  element tid;
  element args;
  bool has_phase = false;
  bool has_ts = false;
  bool has_dur = false;
  bool has_pid = false;
  bool has_tid = false;
  bool has_args = false;
};

class ChromeTraceBuilder {
 public:
  ChromeTraceBuilder(trace::Trace& trace, std::string_view text, size_t offset_base)
      : trace_(trace), text_(text), offset_base_(offset_base), strings_(trace) {}

  // Reads the top-level object's members other than "traceEvents" into run info.
  void read_top_level(simdjson::dom::object root) {
    element other_data;
    std::string_view writer;
    written_by_opsight_ = root["otherData"].get(other_data) == simdjson::SUCCESS &&
                          other_data["writer"].get(writer) == simdjson::SUCCESS &&
                          writer == "opsight";
    for (auto [key, value] : root) {
      if (key == "traceEvents") continue;
      if (written_by_opsight_ && key == "displayTimeUnit") continue;  // the writer's own
      if (key == "otherData" && value.type() == element_type::OBJECT) {
        read_other_data(object_of(value));
        continue;
      }
      if (key == "schemaVersion" || key == "deviceProperties" || key == "traceName" ||
          key == "distributedInfo")
        looks_like_pytorch_ = true;
      if (key == "host_name" && value.type() == element_type::STRING)
        trace_.run.host = std::string(value.get_string().value_unsafe());
      if (key == "trace_id" && value.type() == element_type::STRING)
        set_trace_id(value.get_string().value_unsafe());
      if (is_scalar(value)) {
        trace_.run.extra.emplace_back(std::string(key), scalar_to_string(value));
      } else {
        std::string json = simdjson::minify(value);
        if (json.size() <= kMaxExtraJsonBytes)
          trace_.run.extra.emplace_back(std::string(key), json);
      }
    }
  }

  // Reads `events`, whose first element is event number `first_index` of the file;
  // `expected_events` is what the whole file is estimated to hold (when read a window at
  // a time, more than `events`).
  void read_events(simdjson::dom::array events, size_t first_index = 0,
                   size_t expected_events = 0) {
    // Reserve the columns up front: growing them by doubling costs copies and, for large
    // traces, page faults that take longer than the parse. Slices are bounded by the event
    // count; args are estimated from the first events.
    const size_t event_count = std::max(events.size(), expected_events);
    ensure_slice_room(events.size(), event_count);
    constexpr size_t kSampleEvents = 1024;
    size_t index = 0;
    for (element event : events) {
      read_event(event, first_index + index);
      ++index;
      if (first_index == 0 && index == kSampleEvents && event_count > 2 * kSampleEvents) {
        size_t expected = trace_.slice_args.size() * (event_count / kSampleEvents + 1);
        trace_.slice_args.owner.reserve(expected);
        trace_.slice_args.key.reserve(expected);
        trace_.slice_args.value.reserve(expected);
      }
    }
  }

  // Makes room for `coming` more slices without a doubling: when they would not fit, the
  // columns grow to `expected_total` (at least by an eighth, so a file whose density keeps
  // rising grows them a bounded number of times).
  void ensure_slice_room(size_t coming, size_t expected_total) {
    size_t capacity = trace_.slices.ts.capacity();
    size_t needed = trace_.slices.size() + coming;
    if (needed <= capacity) return;
    trace_.slices.reserve(std::max({needed, expected_total, capacity + capacity / 8}));
  }

  void finish(bool object_form) {
    close_unfinished_slices();
    name_tracks_from_string_ids();
    if (!written_by_opsight_) {
      if (object_form && looks_like_pytorch_) {
        trace_.run.source_format = "pytorch-profiler";
        move_python_functions_to_lanes();
        map_pytorch_categories(trace_);
      } else if (!object_form && saw_onnxruntime_category_) {
        trace_.run.source_format = "onnxruntime";
        map_onnxruntime_categories(trace_);
      } else {
        trace_.run.source_format = "chrome-json";
      }
    }
    auto& extra = trace_.run.extra;
    for (const auto& [phase, count] : skipped_by_phase_)
      extra.emplace_back("skipped_events." + phase, std::to_string(count));
    if (invalid_events_ > 0) {
      extra.emplace_back("invalid_events", std::to_string(invalid_events_));
      extra.emplace_back("first_invalid_event", first_invalid_event_);
    }
    if (unmatched_end_events_ > 0)
      extra.emplace_back("unmatched_end_events", std::to_string(unmatched_end_events_));
    if (unfinished_slices_ > 0)
      extra.emplace_back("unfinished_slices", std::to_string(unfinished_slices_));
  }

 private:
  void set_trace_id(std::string_view hex) {
    if (hex.size() != 32) return;
    auto high = parse_hex64(hex.substr(0, 16));
    auto low = parse_hex64(hex.substr(16));
    if (high && low) trace_.run.trace_id = trace::TraceId{*high, *low};
  }

  // opsight's writer stores the run info under "otherData" with "writer": "opsight".
  void read_other_data(simdjson::dom::object other) {
    if (!written_by_opsight_) {
      for (auto [key, value] : other)
        if (is_scalar(value))
          trace_.run.extra.emplace_back(std::string(key), scalar_to_string(value));
      return;
    }
    auto& run = trace_.run;
    for (auto [key, value] : other) {
      std::string_view text;
      int64_t number = 0;
      bool flag = false;
      bool is_text = value.get(text) == simdjson::SUCCESS;
      bool is_number = value.get(number) == simdjson::SUCCESS;
      bool is_flag = value.get(flag) == simdjson::SUCCESS;
      if (key == "time_base_ns" && is_number) time_base_ns_ = number;
      if (key == "source_format" && is_text)
        run.source_format = std::string(text);
      else if (key == "command_line" && is_text)
        run.command_line = std::string(text);
      else if (key == "host" && is_text)
        run.host = std::string(text);
      else if (key == "opsight_version" && is_text)
        run.opsight_version = std::string(text);
      else if (key == "clock" && is_text)
        run.clock = std::string(text);
      else if (key == "trace_id" && is_text)
        set_trace_id(text);
      else if (key == "pid" && is_number)
        run.pid = number;
      else if (key == "start_unix_ns" && is_number)
        run.start_unix_ns = number;
      else if (key == "unix_offset_ns" && is_number) {
        run.unix_offset_ns = number;
        run.has_unix_offset = true;
      } else if (key == "overhead_ns" && is_number)
        run.overhead_ns = number;
      else if (key == "traced_ns" && is_number)
        run.traced_ns = number;
      else if (key == "events_dropped" && is_number)
        run.events_dropped = static_cast<uint64_t>(number);
      else if (key == "complete" && is_flag)
        run.complete = flag;
      else if (key == "extra" && value.type() == element_type::OBJECT) {
        for (auto [extra_key, extra_value] : object_of(value))
          run.extra.emplace_back(std::string(extra_key), scalar_to_string(extra_value));
      }
    }
  }

  void note_invalid_event(size_t index, std::string_view problem) {
    if (invalid_events_++ > 0) return;
    std::string description = "event " + std::to_string(index);
    if (auto offset = find_event_offset(text_, index))
      description += " at byte " + std::to_string(offset_base_ + *offset);
    description += ": ";
    description += problem;
    first_invalid_event_ = std::move(description);
  }

  // A pid or tid: a number, or a string that names a process/thread. A string of digits
  // is that number; any other string gets a stable number derived from its hash, and
  // becomes the process/thread name unless a metadata event names it.
  int64_t resolve_id(element value, bool present, bool is_process) {
    if (!present) return 0;
    switch (value.type()) {
      case element_type::INT64:
        return value.get_int64().value_unsafe();
      case element_type::UINT64:
        return static_cast<int64_t>(value.get_uint64().value_unsafe());
      case element_type::DOUBLE: {
        double number = value.get_double().value_unsafe();
        if (std::fabs(number) < 9.2e18) return static_cast<int64_t>(number);
        return 0;
      }
      case element_type::STRING:
        return id_from_string(value.get_string().value_unsafe(), is_process);
      default:
        return 0;
    }
  }

  int64_t id_from_string(std::string_view text, bool is_process) {
    auto& known = is_process ? process_ids_by_string_ : thread_ids_by_string_;
    if (auto found = known.find(std::string(text)); found != known.end()) return found->second;
    int64_t id = 0;
    bool all_digits =
        !text.empty() && text.size() <= 18 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (all_digits) {
      for (char c : text) id = id * 10 + (c - '0');
    } else {
      // In [2^30, 2^31): far above real pids (Linux pid_max <= 2^22), so no clash with them.
      auto& taken = is_process ? process_ids_from_names_ : thread_ids_from_names_;
      id = static_cast<int64_t>((XXH3_64bits(text.data(), text.size()) & 0x3FFFFFFF) | 0x40000000);
      while (taken.count(id) != 0) id = id == 0x7FFFFFFF ? 0x40000000 : id + 1;
      taken.emplace(id, std::string(text));
    }
    known.emplace(std::string(text), id);
    return id;
  }

  void name_tracks_from_string_ids() {
    for (const auto& [pid, name] : process_ids_from_names_) {
      for (auto& process : trace_.processes)
        if (process.pid == pid && process.name == 0) process.name = trace_.intern(name);
    }
    for (const auto& [tid, name] : thread_ids_from_names_) {
      for (auto& track : trace_.tracks)
        if (track.tid == tid && track.name == 0) track.name = trace_.intern(name);
    }
  }

  trace::TrackId track_for(int64_t pid, int64_t tid) {
    if (pid == cached_pid_ && tid == cached_tid_ && has_cached_track_) return cached_track_;
    auto async = async_lanes_.empty() ? async_lanes_.end() : async_lanes_.find({pid, tid});
    cached_track_ = async != async_lanes_.end() ? async->second : trace_.thread_track(pid, tid);
    cached_pid_ = pid;
    cached_tid_ = tid;
    has_cached_track_ = true;
    if (cached_track_ >= last_ts_by_track_.size()) {
      last_ts_by_track_.resize(cached_track_ + 1, std::numeric_limits<int64_t>::min());
      open_slices_by_track_.resize(cached_track_ + 1);
    }
    return cached_track_;
  }

  void saw_time(trace::TrackId track, int64_t ns) {
    if (ns > last_ts_by_track_[track]) last_ts_by_track_[track] = ns;
  }

  trace::ArgValue to_arg_value(element value) {
    trace::ArgValue arg;
    switch (value.type()) {
      case element_type::INT64:
        arg.type = trace::ArgType::kInt;
        arg.int_value = value.get_int64().value_unsafe();
        break;
      case element_type::UINT64: {
        uint64_t number = value.get_uint64().value_unsafe();
        if (number <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          arg.type = trace::ArgType::kInt;
          arg.int_value = static_cast<int64_t>(number);
        } else {
          arg.type = trace::ArgType::kDouble;
          arg.double_value = static_cast<double>(number);
        }
        break;
      }
      case element_type::DOUBLE:
        arg.type = trace::ArgType::kDouble;
        arg.double_value = value.get_double().value_unsafe();
        break;
      case element_type::BOOL:
        arg.type = trace::ArgType::kBool;
        arg.int_value = value.get_bool().value_unsafe() ? 1 : 0;
        break;
      case element_type::STRING:
        arg.type = trace::ArgType::kString;
        arg.string_value = strings_.intern(value.get_string().value_unsafe());
        break;
      case element_type::NULL_VALUE:
        arg.type = trace::ArgType::kString;
        arg.string_value = strings_.intern("null");
        break;
      default:  // nested array or object: kept as compact JSON text
        arg.type = trace::ArgType::kString;
        compact_json_.clear();
        arg.string_value = append_compact_json(value, compact_json_)
                               ? strings_.intern(compact_json_.view())
                               : strings_.intern(simdjson::minify(value));
        break;
    }
    return arg;
  }

  // Adds every member of an "args" object as an argument of `row`. For files written by
  // opsight, "opsight.span_id" is the slice's id and "opsight.parent_span_id" is implied by
  // the nesting.
  void add_args(trace::ArgTable& table, trace::RowIndex row, const EventFields& fields,
                uint64_t* span_id) {
    if (!fields.has_args || fields.args.type() != element_type::OBJECT) return;
    const bool own_markers = span_id != nullptr && written_by_opsight_;
    for (auto [key, value] : object_of(fields.args)) {
      if (own_markers && key.size() > 8 && std::memcmp(key.data(), "opsight.", 8) == 0) {
        std::string_view marker = key.substr(8);
        if (equals_literal(marker, "unfinished") && value.type() == element_type::BOOL) {
          if (value.get_bool().value_unsafe()) trace_.slices.flags[row] |= trace::kSliceUnfinished;
          continue;
        }
        bool is_span_id = equals_literal(marker, "span_id");
        if ((is_span_id || equals_literal(marker, "parent_span_id")) &&
            value.type() == element_type::STRING) {
          if (auto id = parse_hex64(value.get_string().value_unsafe())) {
            if (is_span_id) *span_id = *id;
            continue;
          }
        }
      }
      table.add(row, strings_.intern(key), to_arg_value(value));
    }
  }

  void read_event(element event, size_t index) {
    if (event.type() != element_type::OBJECT) {
      note_invalid_event(index, "not a JSON object");
      return;
    }
    EventFields fields;
    for (auto [key, value] : object_of(event)) {
      switch (key.size()) {
        case 2:
          if (equals_literal(key, "ph")) {
            fields.has_phase = value.get(fields.phase) == simdjson::SUCCESS;
          } else if (equals_literal(key, "ts")) {
            fields.ts = value;
            fields.has_ts = true;
          }
          break;
        case 3:
          if (equals_literal(key, "cat")) {
            if (value.get(fields.category) != simdjson::SUCCESS) fields.category = {};
          } else if (equals_literal(key, "dur")) {
            fields.dur = value;
            fields.has_dur = true;
          } else if (equals_literal(key, "pid")) {
            fields.pid = value;
            fields.has_pid = true;
          } else if (equals_literal(key, "tid")) {
            fields.tid = value;
            fields.has_tid = true;
          }
          break;
        case 4:
          if (equals_literal(key, "name")) {
            if (value.get(fields.name) != simdjson::SUCCESS) fields.name = {};
          } else if (equals_literal(key, "args")) {
            fields.args = value;
            fields.has_args = true;
          }
          break;
        default:
          break;
      }
    }
    if (!fields.has_phase || fields.phase.empty()) {
      note_invalid_event(index, "no \"ph\" (phase) string");
      return;
    }
    char phase = fields.phase.size() == 1 ? fields.phase[0] : '\0';
    switch (phase) {
      case 'X':
      case 'B':
      case 'E':
      case 'i':
      case 'I':
      case 'C':
        break;
      case 'M':
        read_metadata_event(fields);
        return;
      default:
        ++skipped_by_phase_[std::string(fields.phase)];
        return;
    }
    int64_t ts = 0;
    if (!fields.has_ts || !microseconds_to_ns(fields.ts, &ts) ||
        __builtin_add_overflow(ts, time_base_ns_, &ts)) {
      note_invalid_event(
          index, fields.has_ts ? "\"ts\" is not a number of microseconds in range" : "no \"ts\"");
      return;
    }
    int64_t pid = resolve_id(fields.pid, fields.has_pid, true);
    if (phase == 'C') {
      read_counter_event(fields, pid, ts);
      return;
    }
    int64_t tid = resolve_id(fields.tid, fields.has_tid, false);
    trace::TrackId track = track_for(pid, tid);
    saw_time(track, ts);
    if (phase == 'X') {
      int64_t dur = 0;
      if (fields.has_dur && !microseconds_to_ns(fields.dur, &dur)) {
        note_invalid_event(index, "\"dur\" is not a number of microseconds in range");
        return;
      }
      if (dur < 0) dur = 0;
      if (ts > std::numeric_limits<int64_t>::max() - dur)
        dur = std::numeric_limits<int64_t>::max() - ts;
      saw_time(track, ts + dur);
      if (equals_literal(fields.category, "Session") || equals_literal(fields.category, "Node"))
        saw_onnxruntime_category_ = true;
      auto row = trace_.slices.add(ts, dur, strings_.intern(fields.name),
                                   strings_.intern(fields.category), track);
      uint64_t span_id = 0;
      add_args(trace_.slice_args, row, fields, &span_id);
      trace_.slices.span_id[row] = span_id;
    } else if (phase == 'B') {
      auto row = trace_.slices.add(ts, 0, strings_.intern(fields.name),
                                   strings_.intern(fields.category), track);
      uint64_t span_id = 0;
      add_args(trace_.slice_args, row, fields, &span_id);
      trace_.slices.span_id[row] = span_id;
      open_slices_by_track_[track].push_back(row);
    } else if (phase == 'E') {
      auto& open = open_slices_by_track_[track];
      if (open.empty()) {
        ++unmatched_end_events_;
        return;
      }
      trace::RowIndex row = open.back();
      open.pop_back();
      trace_.slices.dur[row] = duration_between(trace_.slices.ts[row], ts);
      add_args(trace_.slice_args, row, fields, nullptr);  // "E" args merge into the slice
    } else {                                              // 'i' or 'I'
      auto row = trace_.instants.add(ts, strings_.intern(fields.name),
                                     strings_.intern(fields.category), track);
      add_args(trace_.instant_args, row, fields, nullptr);
    }
  }

  void read_counter_event(const EventFields& fields, int64_t pid, int64_t ts) {
    if (!fields.has_args || fields.args.type() != element_type::OBJECT) return;
    auto args = object_of(fields.args);
    size_t numeric = 0;
    for (auto [key, value] : args) numeric += numeric_value(value).has_value();
    bool several = numeric > 1;  // {"value": 5, "unit": "MB"} is one track, "name"
    for (auto [key, value] : args) {
      std::optional<double> sample = numeric_value(value);
      if (!sample) continue;
      std::string track_name(fields.name);
      if (several) {
        track_name += '.';
        track_name += key;
      }
      trace_.counters.add(ts, trace_.counter_track(pid, track_name), *sample);
    }
  }

  void read_metadata_event(const EventFields& fields) {
    if (fields.name != "process_name" && fields.name != "thread_name") return;
    if (!fields.has_args || fields.args.type() != element_type::OBJECT) return;
    std::string_view name;
    if (fields.args["name"].get(name) != simdjson::SUCCESS) return;
    int64_t pid = resolve_id(fields.pid, fields.has_pid, true);
    if (fields.name == "process_name") {
      trace_.process(pid).name = trace_.intern(name);
    } else {
      int64_t tid = resolve_id(fields.tid, fields.has_tid, false);
      if (written_by_opsight_ && read_async_lane(fields.args, pid, tid, name)) return;
      trace_.tracks[track_for(pid, tid)].name = trace_.intern(name);
    }
  }

  // opsight's writer gives an async lane a synthetic tid and names it with a thread_name
  // event that also carries the lane's key and its thread's real tid. Returns whether
  // `args` described one (before any event used that tid).
  bool read_async_lane(element args, int64_t pid, int64_t written_tid, std::string_view name) {
    std::string_view key_text;
    element thread_tid;
    if (args["opsight.async_key"].get(key_text) != simdjson::SUCCESS ||
        args["opsight.tid"].get(thread_tid) != simdjson::SUCCESS)
      return false;
    auto key = parse_hex64(key_text);
    if (!key || *key == 0 || async_lanes_.count({pid, written_tid}) != 0) return false;
    int64_t tid = resolve_id(thread_tid, true, false);
    async_lanes_.emplace(std::pair{pid, written_tid}, trace_.async_track(pid, tid, *key, name));
    has_cached_track_ = false;
    return true;
  }

  // The PyTorch profiler's Python functions (with_stack=True) and its operators and
  // record_function ranges share a thread but do not nest with each other: a range opens
  // inside record_function.__enter__ and closes inside __exit__. On one track the model
  // would clip one of each such pair, so each thread's Python functions (nn.Module calls
  // among them) move to a lane of their own, where both hierarchies keep exact times.
  void move_python_functions_to_lanes() {
    auto python_function = trace_.strings.find("python_function");
    if (!python_function) return;
    constexpr trace::TrackId kNoLane = std::numeric_limits<trace::TrackId>::max();
    std::vector<trace::TrackId> lane_of_track(trace_.tracks.size(), kNoLane);
    auto& slices = trace_.slices;
    for (size_t row = 0; row < slices.size(); ++row) {
      if (slices.category[row] != *python_function) continue;
      trace::TrackId track = slices.track[row];
      if (track >= lane_of_track.size()) continue;
      if (lane_of_track[track] == kNoLane) {
        const trace::Track thread = trace_.tracks[track];
        lane_of_track[track] = trace_.async_track(thread.pid, thread.tid, kPythonLaneKey,
                                                  trace_.track_label(track) + " / Python");
      }
      slices.track[row] = lane_of_track[track];
    }
  }

  void close_unfinished_slices() {
    for (trace::TrackId track = 0; track < open_slices_by_track_.size(); ++track) {
      for (trace::RowIndex row : open_slices_by_track_[track]) {
        trace_.slices.dur[row] = duration_between(trace_.slices.ts[row], last_ts_by_track_[track]);
        trace_.slices.flags[row] |= trace::kSliceUnfinished;
        ++unfinished_slices_;
      }
    }
  }

  trace::Trace& trace_;
  std::string_view text_;
  size_t offset_base_;
  InternCache strings_;
  TextBuffer compact_json_;  // reused by to_arg_value for nested values

  bool looks_like_pytorch_ = false;
  bool saw_onnxruntime_category_ = false;
  bool written_by_opsight_ = false;
  int64_t time_base_ns_ = 0;  // opsight's writer stores timestamps relative to this

  // Async lanes by the (pid, synthetic tid) opsight's writer gave them.
  std::map<std::pair<int64_t, int64_t>, trace::TrackId> async_lanes_;
  std::vector<int64_t> last_ts_by_track_;
  std::vector<std::vector<trace::RowIndex>> open_slices_by_track_;
  int64_t cached_pid_ = 0;
  int64_t cached_tid_ = 0;
  trace::TrackId cached_track_ = 0;
  bool has_cached_track_ = false;

  std::unordered_map<std::string, int64_t> process_ids_by_string_;
  std::unordered_map<std::string, int64_t> thread_ids_by_string_;
  std::map<int64_t, std::string> process_ids_from_names_;
  std::map<int64_t, std::string> thread_ids_from_names_;

  std::map<std::string, uint64_t> skipped_by_phase_;
  uint64_t invalid_events_ = 0;
  std::string first_invalid_event_;
  uint64_t unmatched_end_events_ = 0;
  uint64_t unfinished_slices_ = 0;
};

// The fast path for a complete, well-formed document: the top level is parsed with the
// event array emptied, then the events a window of about 1 MiB at a time. Returns nullopt
// whenever anything is unusual (cut input, invalid JSON, no traceEvents...), and the whole
// document is then read by the careful path, which knows how to repair and explain.
std::optional<ReadResult> read_in_windows(std::string_view text, size_t offset_base, size_t first,
                                          bool parse_on_helper_thread) {
  bool object_form = text[first] == '{';
  std::optional<size_t> array_start = object_form ? find_event_array(text) : first;
  if (!array_start || *array_start >= text.size() || text[*array_start] != '[') return std::nullopt;
  auto split = split_array_elements(text, *array_start, kWindowBytes);
  if (!split) return std::nullopt;  // left open: the careful path repairs it
  if (!object_form && skip_whitespace(text, split->array_end) != text.size()) return std::nullopt;

  ReadResult result;
  ChromeTraceBuilder builder(result.trace, text, offset_base);
  if (object_form) {
    element top;
    if (window_parsers()[0].parse(text.substr(0, *array_start), "[]", text.substr(split->array_end),
                                  &top) != simdjson::SUCCESS ||
        top.type() != element_type::OBJECT)
      return std::nullopt;
    builder.read_top_level(object_of(top));
  }
  {
    // Each window is wrapped at the depth its events have in the document, so nesting
    // limits apply as they would to a whole-document parse.
    WindowPipeline pipeline(text, split->windows, object_form ? "{\"\":[" : "[",
                            object_form ? "]}" : "]", object_form, parse_on_helper_thread);
    size_t index = 0;
    for (size_t window = 0; window < split->windows.size(); ++window) {
      std::optional<simdjson::dom::array> events = pipeline.next(window);
      if (!events) return std::nullopt;
      // The slice columns are sized from the density of the events read so far: growing
      // them by doubling costs copies and faults and leaves up to half of them unused
      // (96 bytes per 48-byte slice), so they grow only when a window would not fit, to
      // what the rest of the array needs at the density seen (an event is > 16 bytes).
      auto [begin, end] = split->windows[window];
      size_t array_begin = split->windows[0].first;
      double events_per_byte = static_cast<double>(index + events->size()) /
                               static_cast<double>(std::max<size_t>(1, end - array_begin));
      size_t bytes_left = split->array_end > end ? split->array_end - end : 0;
      size_t expected_events =
          index + events->size() +
          std::min(
              static_cast<size_t>(std::ceil(events_per_byte * static_cast<double>(bytes_left))),
              bytes_left / 16);
      builder.read_events(*events, index, expected_events);
      index += events->size();
      pipeline.release(window);
    }
  }
  // Windows hold at most ~1 MiB of text: drop the parsers' memory if one grew it large.
  for (WindowParser& parser : window_parsers())
    if (parser.parser.capacity() > 8 * kWindowBytes)
      parser = WindowParser{simdjson::dom::parser{}, std::string{}};
  builder.finish(object_form);
  result.trace.finalize();
  return result;
}

ReadResult read_chrome_json_unguarded(std::string_view bytes, bool parse_on_helper_thread) {
  ReadResult result;
  size_t offset_base = 0;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") offset_base = 3;  // UTF-8 byte order mark
  std::string_view text = bytes.substr(offset_base);
  // NUL bytes at the end are padding (a file preallocated, or cut by a crash), not JSON.
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ' || text.back() == '\n' ||
                           text.back() == '\r' || text.back() == '\t'))
    text.remove_suffix(1);
  size_t first = skip_whitespace(text, 0);
  if (first == text.size()) {
    result.error = Diagnostic{"empty input: no JSON value", offset_base + first, true};
    return result;
  }
  if (text[first] != '{' && text[first] != '[') {
    result.error = Diagnostic{"not Chrome trace JSON: expected '{' or '[' but found '" +
                                  std::string(1, text[first]) + "'",
                              offset_base + first, true};
    return result;
  }

  if (auto fast = read_in_windows(text, offset_base, first, parse_on_helper_thread))
    return std::move(*fast);
  // Cut short (a killed recorder): close it after its last whole event and read that a
  // window at a time too, rather than parsing the whole file (and a repaired copy) at once.
  if (RepairPoint repair = find_repair_point(text); repair.input_is_cut) {
    std::string repaired(text.substr(0, repair.keep_bytes));
    repaired += repair.closing_brackets;
    if (auto fast = read_in_windows(repaired, offset_base, first, parse_on_helper_thread)) {
      if (repair.cut_value_offset != std::string_view::npos) {
        fast->damage = Diagnostic{
            "input ends in the middle of a value; read up to the last complete event before it",
            offset_base + repair.cut_value_offset, true};
        fast->trace.run.complete = false;
      }
      return std::move(*fast);
    }
  }

  simdjson::dom::parser parser;
  element root;
  size_t length = 0;
  auto buffer = padded_copy(text, {}, &length);
  simdjson::error_code parse_error = parser.parse(buffer.get(), length, false).get(root);
  if (parse_error != simdjson::SUCCESS && parse_error != simdjson::DEPTH_ERROR &&
      parse_error != simdjson::MEMALLOC && parse_error != simdjson::CAPACITY) {
    RepairPoint repair = find_repair_point(text);
    if (repair.input_is_cut) {
      auto repaired =
          padded_copy(text.substr(0, repair.keep_bytes), repair.closing_brackets, &length);
      if (parser.parse(repaired.get(), length, false).get(root) == simdjson::SUCCESS) {
        buffer = std::move(repaired);
        parse_error = simdjson::SUCCESS;
        if (repair.cut_value_offset != std::string_view::npos) {
          result.damage = Diagnostic{
              "input ends in the middle of a value; read up to the last "
              "complete event before it",
              offset_base + repair.cut_value_offset, true};
          result.trace.run.complete = false;
        }
      }
    }
  }
  if (parse_error == simdjson::MEMALLOC || parse_error == simdjson::CAPACITY) {
    result.error =
        Diagnostic{std::string("cannot parse: ") + simdjson::error_message(parse_error), 0, false};
    return result;
  }
  if (parse_error != simdjson::SUCCESS) {
    result.error = describe_invalid_json(text, parse_error, offset_base);
    return result;
  }

  ChromeTraceBuilder builder(result.trace, text, offset_base);
  simdjson::dom::array events;
  bool object_form = root.type() == element_type::OBJECT;
  if (object_form) {
    auto object = object_of(root);
    element trace_events;
    if (object["traceEvents"].get(trace_events) != simdjson::SUCCESS) {
      result.error =
          Diagnostic{"not Chrome trace JSON: the top-level object has no \"traceEvents\"",
                     offset_base + first, true};
      return result;
    }
    if (trace_events.get(events) != simdjson::SUCCESS) {
      Diagnostic diagnostic{"\"traceEvents\" is not an array", 0, false};
      if (auto offset = find_event_array(text)) {
        diagnostic.byte_offset = offset_base + *offset;
        diagnostic.has_offset = true;
      }
      result.error = std::move(diagnostic);
      return result;
    }
    builder.read_top_level(object);
  } else if (root.get(events) != simdjson::SUCCESS) {
    result.error = Diagnostic{"not Chrome trace JSON: expected an object or an array",
                              offset_base + first, true};
    return result;
  }
  builder.read_events(events);
  builder.finish(object_form);
  result.trace.finalize();
  return result;
}

}  // namespace

ReadResult read_chrome_json(std::string_view bytes, int threads) {
  try {
    return read_chrome_json_unguarded(bytes, threads >= 2);
  } catch (const std::exception& failure) {
    ReadResult result;
    result.error = Diagnostic{std::string("cannot read Chrome JSON: ") + failure.what(), 0, false};
    return result;
  } catch (...) {
    ReadResult result;
    result.error = Diagnostic{"cannot read Chrome JSON: unknown failure", 0, false};
    return result;
  }
}

ReadResult read_chrome_json(std::string_view bytes) {
  static const int threads = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  return read_chrome_json(bytes, threads);
}

}  // namespace opsight::io
