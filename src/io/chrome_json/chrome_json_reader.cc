// Reader of the Chrome Trace Event Format (the JSON that chrome://tracing, Perfetto UI,
// the PyTorch profiler (Kineto), ONNX Runtime and opsight's own writer produce).
//
// The event array is cut into windows of about 1 MiB of whole events (a vectorised scan
// of quotes and brackets, chrome_json_repair.cc). Each window is parsed with simdjson's
// DOM parser (validating it entirely) and its events decoded into compact records with
// strings local to the window (chrome_json_decode.cc); on a machine with two cores both
// threads parse and decode windows (chrome_json_windows.cc). The calling thread merges the
// records into the trace tables here, in file order (docs/reports.md, "What the Chrome JSON
// reader maps", has the whole table; chrome_json_conformance_test.cc a case per row):
//   X          -> a slice (ts, dur)          B/E   -> a slice, paired per track by time and
//                                                     name once every event is read
//   i/I/R      -> an instant, with its scope C     -> a counter sample per numeric arg, a
//                                                     series "<name> <arg>" each (a lone
//                                                     "value": a counter named <name>)
//   b/e/n, S/T/F -> slices on a process-wide async track per (pid or global, cat, id)
//   s/t/f      -> flows bound by time at finalize; bind_id/flow_in/flow_out (v2) -> flows
//                 between the slices that carry them, chained at the end in time order
//   M          -> process / thread names, sort indices, process labels
//   anything else (P samples, O/N/D objects) -> counted by phase and skipped
// Timestamps are microseconds (possibly fractional, possibly written as strings) and
// become int64 nanoseconds; displayTimeUnit changes nothing. An event without tid belongs
// to its process's main thread (tid = pid).
//
// Inputs that real tools leave behind are accepted: the object form {"traceEvents": [...]}
// and the bare array form, and an array left open at the end (the format allows it; a
// recorder that was killed leaves it cut in the middle of an event). A cut input is
// repaired by closing it after its last complete value (see find_repair_point) and parsed
// again; a cut event makes ReadResult::damage point at the byte where it started. Trailing
// commas and raw control characters in strings are mended in a copy (mend_sloppy_json).
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
// read_trace_file maps the file and, through read_chrome_json_dropping_input, hears where
// each merged window ends: the pages before it leave the process's memory (io.cc).
//
// Thread-safety: read_chrome_json is reentrant; it shares nothing between calls (each
// calling thread keeps its own parsers, which a read's helper thread borrows).
#include <simdjson.h>
// xxHash compiled into this file (header-only mode): the intern cache hashes every distinct
// string of every window (most are short, and a call into the shared library cost more
// than the hash itself).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "io/chrome_json/chrome_json_categories.hpp"
#include "io/chrome_json/chrome_json_decode.hpp"
#include "io/chrome_json/chrome_json_reader.hpp"
#include "io/chrome_json/chrome_json_repair.hpp"
#include "io/chrome_json/chrome_json_values.hpp"
#include "io/chrome_json/chrome_json_windows.hpp"
#include "io/debug_timing.hpp"
#include "io/io.hpp"
#include "io/open_slices.hpp"
#include "trace/categories.hpp"
#include "trace/trace.hpp"

namespace opsight::io {
namespace {

// The reader's own parts: repair, values, windows and categories.
using namespace chrome_json;
// Top-level keys that are not scalars are kept in run.extra as compact JSON up to this size.
constexpr size_t kMaxExtraJsonBytes = 4096;

// A small open-addressing cache in front of StringTable::intern: the same names,
// categories and arg keys recur in every window, and XXH3 on a short string plus one
// probe is cheaper than the general-purpose unordered_map behind the StringTable.
class InternCache {
 public:
  explicit InternCache(trace::Trace& trace) : trace_(trace), index_(kInitialSlots) {}

  trace::StringId intern(std::string_view text) {
    if (text.empty()) return 0;
    return index_.find_or_add(
        text, XXH3_64bits(text.data(), text.size()),
        [this](trace::StringId id) { return trace_.str(id); }, [&] { return trace_.intern(text); });
  }

 private:
  static constexpr size_t kInitialSlots = 1024;

  trace::Trace& trace_;
  StringIdIndex index_;
};

// A B/E or b/e event waiting to be paired: a begin (row: its slice) or an end (row kNoRow;
// its name and category, and its args as [args_begin, args_end) of the builder's end_args_).
struct BeginOrEnd {
  int64_t ts;
  trace::RowIndex row;
  trace::StringId name;
  trace::StringId category;
  uint32_t args_begin;
  uint32_t args_end;
};

struct AsyncKey {
  int64_t pid;  // 0 for a global id
  trace::StringId category;
  uint64_t id;
  bool global;
  bool operator==(const AsyncKey&) const = default;
};
struct AsyncKeyHash {
  size_t operator()(const AsyncKey& key) const {
    return static_cast<size_t>(trace::mix64(static_cast<uint64_t>(key.pid) * 31 + key.id) ^
                               (uint64_t{key.category} << 1) ^ uint64_t{key.global});
  }
};

struct FlowKey {
  uint64_t id;
  trace::StringId category;
  trace::StringId name;
  bool operator==(const FlowKey&) const = default;
};
struct FlowKeyHash {
  size_t operator()(const FlowKey& key) const {
    return static_cast<size_t>(
        trace::mix64(key.id ^ (uint64_t{key.category} << 32) ^ uint64_t{key.name}));
  }
};

// Where a flow chain stands: its last end, by time, or by span id in opsight's files.
struct OpenFlow {
  trace::FlowEndpoint end;
  uint64_t span;
};

// One s / t / f event, kept until the whole file is read: chains are followed in time order.
struct V1FlowEvent {
  FlowKey key;
  EventKind kind;
  OpenFlow here;
  size_t order;  // file order, for events at one time
};

struct FlowBySpan {
  uint64_t out_span;
  uint64_t in_span;
  uint64_t id;
  trace::StringId category;
  trace::StringId name;
};

struct V2FlowEnd {
  int64_t ts;
  trace::RowIndex row;
  uint64_t bind_id;
  bool flow_in;
  bool flow_out;
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

  // What the events need to be decoded: known once the top level is read.
  EventDecoder decoder() const { return EventDecoder(written_by_opsight_, time_base_ns_); }

  // Reads every event of `events` (a whole document's array: the careful path), decoding
  // it a chunk at a time.
  void read_events(simdjson::dom::array events) {
    constexpr size_t kChunkEvents = 4096;
    EventDecoder event_decoder = decoder();
    DecodedEvents chunk;
    size_t index = 0;
    for (element event : events) {
      event_decoder.decode(event, chunk);
      if (chunk.events.size() == kChunkEvents) {
        merge(chunk, index, events.size());
        index += chunk.events.size();
        chunk.clear();
      }
    }
    merge(chunk, index, events.size());
  }

  // Applies the records of `window`, whose first event is event number `first_index` of
  // the file, in order; `expected_events` is what the whole file is estimated to hold.
  void merge(const DecodedEvents& window, size_t first_index, size_t expected_events) {
    global_ids_.resize(window.strings.size());
    for (uint32_t local = 0; local < window.strings.size(); ++local)
      global_ids_[local] = strings_.intern(window.strings.get(local));
    saw_onnxruntime_category_ |= window.saw_onnxruntime_category;
    reserve_rows(window, first_index, expected_events);
    uint32_t arg = 0;
    size_t extra = 0;
    for (size_t position = 0; position < window.events.size(); ++position) {
      const DecodedEvent& event = window.events[position];
      std::span<const DecodedArg> args(window.args.data() + arg, event.args_end - arg);
      arg = event.args_end;
      const EventExtra* event_extra = nullptr;
      if ((event.flags & kHasExtra) != 0 && extra < window.extras.size())
        event_extra = &window.extras[extra++];
      merge_event(event, args, event_extra, window.strings, first_index + position);
    }
  }
  void finish(bool object_form) {
    pair_begin_and_end_events();
    chain_v1_flows();
    add_flows_by_span_id();
    chain_v2_flows();
    name_tracks_from_string_ids();
    if (!written_by_opsight_) {
      if (object_form && looks_like_pytorch_) {
        trace_.run.source_format = "pytorch-profiler";
        nest_python_functions();
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
    auto count = [&](const char* key, uint64_t value) {
      if (value > 0) extra.emplace_back(key, std::to_string(value));
    };
    count("unmatched_end_events", unmatched_end_events_);
    count("slices_closed_by_an_outer_end", closed_by_outer_end_);
    count("unfinished_slices", unfinished_slices_);
    count("unmatched_flow_events", unmatched_flow_events_);
    count("python_functions_clipped", python_functions_clipped_);
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
    ensure_track_state(cached_track_);
    return cached_track_;
  }

  void ensure_track_state(trace::TrackId track) {
    if (track >= last_ts_by_track_.size()) {
      last_ts_by_track_.resize(track + 1, std::numeric_limits<int64_t>::min());
      begin_end_by_track_.resize(track + 1);
      begin_end_unordered_.resize(track + 1, false);
    }
  }

  // The process-wide async track of an async event: keyed by (pid, cat, id) for an id of
  // its process ("id2.local"), by (cat, id) for a global one ("id", "id2.global": its track
  // belongs to the process of the first event that names it). In opsight's files the
  // category is no part of the key (the writer gives each track an id of its own).
  trace::TrackId async_track_for(const DecodedEvent& event, int64_t pid) {
    AsyncKey key{(event.flags & kGlobalId) != 0 ? 0 : pid,
                 written_by_opsight_ ? 0 : global_ids_[event.category], event.span_id,
                 (event.flags & kGlobalId) != 0};
    auto found = async_tracks_.find(key);
    if (found != async_tracks_.end()) return found->second;
    trace::TrackId track =
        trace_.process_async_track(pid, event.span_id, trace_.str(global_ids_[event.name]));
    async_tracks_.emplace(key, track);
    ensure_track_state(track);
    return track;
  }

  void saw_time(trace::TrackId track, int64_t ns) {
    if (ns > last_ts_by_track_[track]) last_ts_by_track_[track] = ns;
  }

  // Sizes the slice and slice-arg columns before `window` is merged: growing them by doubling
  // costs copies and faults and leaves up to half of them unused (96 bytes per 48-byte
  // slice), so they grow only when a window would not fit, to what the rest of the file
  // needs at the density seen so far (rows per event, events as estimated), plus 1/64: an
  // estimate short by a few rows at the end cost a copy of every column into fresh pages
  // (150 MB on a 200 MB file), and capacity never written takes address space, not memory.
  void reserve_rows(const DecodedEvents& window, size_t first_index, size_t expected_events) {
    slices_seen_ += window.slices;
    size_t events_seen = std::max<size_t>(1, first_index + window.events.size());
    size_t expected_total = std::max(expected_events, events_seen);
    auto expected_rows = [&](size_t rows_seen) {
      return static_cast<size_t>(
          std::ceil(static_cast<double>(rows_seen) / static_cast<double>(events_seen) *
                    static_cast<double>(expected_total) * (65.0 / 64.0)));
    };
    ensure_slice_room(window.slices, expected_rows(slices_seen_));
    auto& args = trace_.slice_args;
    size_t needed = args.size() + window.slice_args;
    if (needed > args.owner.capacity()) {
      size_t total = std::max({needed, expected_rows(needed), args.owner.capacity() * 9 / 8});
      args.owner.reserve(total);
      args.key.reserve(total);
      args.value.reserve(total);
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

  // A pid or tid as decoded: its number, or the number given to its text.
  int64_t id_of(int64_t number, uint32_t text, bool is_text, const LocalStrings& strings,
                bool is_process) {
    return is_text ? id_from_string(strings.get(text), is_process) : number;
  }

  trace::ArgValue global_arg(trace::ArgValue value) const {
    if (value.type == trace::ArgType::kString) value.string_value = global_ids_[value.string_value];
    return value;
  }

  void add_args(trace::ArgTable& table, trace::RowIndex row, std::span<const DecodedArg> args) {
    for (const DecodedArg& arg : args) table.add(row, global_ids_[arg.key], global_arg(arg.value));
  }

  void merge_event(const DecodedEvent& event, std::span<const DecodedArg> args,
                   const EventExtra* extra, const LocalStrings& strings, size_t index) {
    switch (event.kind) {
      case EventKind::kInvalid:
        note_invalid_event(index, describe(event.problem));
        return;
      case EventKind::kSkipped:
        ++skipped_by_phase_[std::string(strings.get(event.name))];
        return;
      case EventKind::kIgnored:
        return;
      case EventKind::kProcessName:
        trace_.process(pid_of(event, strings)).name = global_ids_[event.name];
        return;
      case EventKind::kProcessSortIndex:
        trace_.process(pid_of(event, strings)).sort_index = event.dur;
        return;
      case EventKind::kThreadSortIndex:
        trace_.tracks[thread_track_of(event, strings)].sort_index = event.dur;
        return;
      case EventKind::kProcessLabels:
        set_process_labels(pid_of(event, strings), strings.get(event.name));
        return;
      case EventKind::kAsyncTrackName:
        merge_async_track_name(event, extra, strings);
        return;
      case EventKind::kThreadName:
        merge_thread_name(event, args, strings);
        return;
      case EventKind::kCounter:
        merge_counter(event, args, strings);
        return;
      default:
        break;
    }
    const bool is_async = event.kind == EventKind::kAsyncBegin ||
                          event.kind == EventKind::kAsyncEnd ||
                          event.kind == EventKind::kAsyncInstant;
    const bool is_flow = event.kind == EventKind::kFlowStart ||
                         event.kind == EventKind::kFlowStep || event.kind == EventKind::kFlowEnd;
    if (is_flow && extra != nullptr && extra->marked_span != 0) {
      merge_flow_event(event, 0, extra);  // bound by span id: no track of its own
      return;
    }
    trace::TrackId track = 0;
    if (is_async) {
      track = async_track_for(event, pid_of(event, strings));
    } else {
      track = thread_track_of(event, strings);
    }
    saw_time(track, event.ts);
    auto& slices = trace_.slices;
    const uint16_t slice_flags = (event.flags & kUnfinished) != 0 ? trace::kSliceUnfinished : 0;
    switch (event.kind) {
      case EventKind::kSlice: {
        saw_time(track, event.ts + event.dur);
        auto row = slices.add(event.ts, event.dur, global_ids_[event.name],
                              global_ids_[event.category], track, slice_flags, event.span_id);
        add_args(trace_.slice_args, row, args);
        note_v2_flow(row, event.ts, extra);
        return;
      }
      case EventKind::kBegin:
      case EventKind::kAsyncBegin: {
        uint64_t span_id = event.kind == EventKind::kBegin ? event.span_id
                           : extra != nullptr              ? extra->marked_span
                                                           : 0;
        auto row = slices.add(event.ts, 0, global_ids_[event.name], global_ids_[event.category],
                              track, slice_flags, span_id);
        add_args(trace_.slice_args, row, args);
        note_begin_or_end(track, BeginOrEnd{event.ts, row, 0, 0, 0, 0});
        note_v2_flow(row, event.ts, extra);
        return;
      }
      case EventKind::kAsyncInstant: {
        auto row = slices.add(event.ts, 0, global_ids_[event.name], global_ids_[event.category],
                              track, slice_flags, extra != nullptr ? extra->marked_span : 0);
        add_args(trace_.slice_args, row, args);
        note_v2_flow(row, event.ts, extra);
        return;
      }
      case EventKind::kEnd:
      case EventKind::kAsyncEnd: {
        // Paired at the end of the read, by time (see pair_begin_and_end_events); its args
        // wait for the slice they merge into.
        auto args_begin = static_cast<uint32_t>(end_args_.size());
        for (const DecodedArg& arg : args)
          end_args_.emplace_back(global_ids_[arg.key], global_arg(arg.value));
        note_begin_or_end(track, BeginOrEnd{event.ts, trace::kNoRow, global_ids_[event.name],
                                            global_ids_[event.category], args_begin,
                                            static_cast<uint32_t>(end_args_.size())});
        return;
      }
      case EventKind::kFlowStart:
      case EventKind::kFlowStep:
      case EventKind::kFlowEnd:
        merge_flow_event(event, track, extra);
        return;
      default: {  // kInstant
        trace::InstantScope scope = (event.flags & kScopeGlobal) != 0 ? trace::InstantScope::kGlobal
                                    : (event.flags & kScopeProcess) != 0
                                        ? trace::InstantScope::kProcess
                                        : trace::InstantScope::kThread;
        auto row = trace_.instants.add(event.ts, global_ids_[event.name],
                                       global_ids_[event.category], track, scope);
        add_args(trace_.instant_args, row, args);
        return;
      }
    }
  }

  int64_t pid_of(const DecodedEvent& event, const LocalStrings& strings) {
    return id_of(event.pid, event.pid_text, event.flags & kPidIsText, strings, true);
  }

  // The thread track of an event; one without a tid belongs to its process's main thread
  // (tid = pid), as in Perfetto's importer.
  trace::TrackId thread_track_of(const DecodedEvent& event, const LocalStrings& strings) {
    int64_t pid = pid_of(event, strings);
    int64_t tid = (event.flags & kNoTid) != 0
                      ? pid
                      : id_of(event.tid, event.tid_text, event.flags & kTidIsText, strings, false);
    return track_for(pid, tid);
  }

  void note_begin_or_end(trace::TrackId track, const BeginOrEnd& entry) {
    auto& entries = begin_end_by_track_[track];
    if (!entries.empty() && entry.ts < entries.back().ts) begin_end_unordered_[track] = true;
    entries.push_back(entry);
  }

  void note_v2_flow(trace::RowIndex row, int64_t ts, const EventExtra* extra) {
    if (extra == nullptr || (!extra->flow_in && !extra->flow_out)) return;
    v2_flows_.push_back(V2FlowEnd{ts, row, extra->bind_id, extra->flow_in, extra->flow_out});
  }

  // "labels": "rank 0,GPU 1" (Chrome's process_labels): one label per comma-separated item.
  void set_process_labels(int64_t pid, std::string_view text) {
    trace::Process& process = trace_.process(pid);
    process.labels.clear();
    while (!text.empty()) {
      size_t comma = text.find(',');
      std::string_view label = text.substr(0, comma);
      while (!label.empty() && label.front() == ' ') label.remove_prefix(1);
      while (!label.empty() && label.back() == ' ') label.remove_suffix(1);
      if (!label.empty()) process.labels.push_back(trace_.intern(label));
      if (comma == std::string_view::npos) break;
      text.remove_prefix(comma + 1);
    }
  }

  // opsight's writer names each process-wide async track with an "opsight_async_track" M
  // event: the id its events use, the track's own key, name and sort index.
  void merge_async_track_name(const DecodedEvent& event, const EventExtra* extra,
                              const LocalStrings& strings) {
    if (extra == nullptr) return;
    int64_t pid = pid_of(event, strings);
    AsyncKey key{pid, 0, event.span_id, false};
    if (async_tracks_.count(key) != 0) return;
    trace::TrackId track = trace_.process_async_track(pid, extra->key, strings.get(event.name));
    trace_.tracks[track].sort_index = event.dur;
    async_tracks_.emplace(key, track);
    ensure_track_state(track);
  }

  // s / t / f, chained by (id, category, name) in time order (file order at one time, as
  // Perfetto sorts events before it follows them): s opens a flow at the slice enclosing
  // it; t adds a step from the previous end to the slice enclosing it; f closes it at the
  // next slice that begins on its thread, or with "bp":"e" at the slice enclosing it. In
  // opsight's files each end names its slice by span id.
  void merge_flow_event(const DecodedEvent& event, trace::TrackId track, const EventExtra* extra) {
    FlowKey key{event.span_id, global_ids_[event.category], global_ids_[event.name]};
    trace::FlowBinding binding =
        event.kind == EventKind::kFlowEnd && (event.flags & kBindEnclosing) == 0
            ? trace::FlowBinding::kNextSlice
            : trace::FlowBinding::kEnclosingSlice;
    OpenFlow here{trace::FlowEndpoint{track, event.ts, binding},
                  extra != nullptr ? extra->marked_span : 0};
    v1_flow_events_.push_back(V1FlowEvent{key, event.kind, here, v1_flow_events_.size()});
  }

  void chain_v1_flows() {
    if (v1_flow_events_.empty()) return;
    std::stable_sort(v1_flow_events_.begin(), v1_flow_events_.end(),
                     [](const V1FlowEvent& a, const V1FlowEvent& b) {
                       if (a.key.id != b.key.id) return a.key.id < b.key.id;
                       if (a.key.category != b.key.category) return a.key.category < b.key.category;
                       if (a.key.name != b.key.name) return a.key.name < b.key.name;
                       return a.here.end.ts < b.here.end.ts;
                     });
    for (const V1FlowEvent& event : v1_flow_events_)
      chain_flow_event(event.key, event.kind, event.here);
    v1_flow_events_.clear();
    v1_flow_events_.shrink_to_fit();
  }

  void chain_flow_event(const FlowKey& key, EventKind kind, const OpenFlow& here) {
    auto found = open_flows_.find(key);
    if (found == open_flows_.end()) {
      if (kind == EventKind::kFlowEnd) {
        ++unmatched_flow_events_;
      } else {
        open_flows_.emplace(key, here);
      }
      return;
    }
    if (kind == EventKind::kFlowStart) {  // a new flow with an id still open
      ++unmatched_flow_events_;
      found->second = here;
      return;
    }
    const OpenFlow& from = found->second;
    if (from.span != 0 && here.span != 0) {
      flows_by_span_.push_back(FlowBySpan{from.span, here.span, key.id, key.category, key.name});
    } else {
      trace_.add_flow_by_time(from.end, here.end, key.id, key.name, key.category);
    }
    if (kind == EventKind::kFlowEnd) {
      open_flows_.erase(found);
    } else {
      found->second = here;
    }
  }

  // Flows whose ends opsight's writer marked with span ids, bound to those slices' rows.
  void add_flows_by_span_id() {
    if (flows_by_span_.empty()) return;
    std::unordered_map<uint64_t, trace::RowIndex> row_of_span;
    row_of_span.reserve(trace_.slices.size());
    for (trace::RowIndex row = 0; row < trace_.slices.size(); ++row)
      row_of_span.emplace(trace_.slices.span_id[row], row);
    auto row_of = [&](uint64_t span) {
      auto found = row_of_span.find(span);
      return found == row_of_span.end() ? trace::kNoRow : found->second;
    };
    for (const FlowBySpan& flow : flows_by_span_)
      trace_.flows.add(row_of(flow.out_span), row_of(flow.in_span), flow.id, flow.name,
                       flow.category);  // a row not found is dropped and counted by finalize
  }

  // v2 flows ("bind_id" with "flow_out" / "flow_in" on the slices themselves), in time order:
  // a slice with flow_in ends the flow of its id that a slice with flow_out began; one with
  // both continues it.
  void chain_v2_flows() {
    if (v2_flows_.empty()) return;
    std::stable_sort(v2_flows_.begin(), v2_flows_.end(),
                     [](const V2FlowEnd& a, const V2FlowEnd& b) { return a.ts < b.ts; });
    std::unordered_map<uint64_t, trace::RowIndex> open;
    for (const V2FlowEnd& end : v2_flows_) {
      if (end.flow_in) {
        auto found = open.find(end.bind_id);
        if (found != open.end()) {
          trace_.flows.add(found->second, end.row, end.bind_id);
          open.erase(found);
        } else {
          ++unmatched_flow_events_;
        }
      }
      if (end.flow_out) open[end.bind_id] = end.row;
    }
  }

  // B/E (and b/e) pairs, per track in time order (stable: file order among equal times), not
  // file order: an E closes the innermost open B of its name (any name when it has none)
  // and of its category (any category when it has none; Perfetto's rule too);
  // slices opened inside that one and still open are closed at the same time and marked
  // unfinished (counted); an E that matches no open B is counted and ignored. A B never
  // closed ends at the last time seen on its track, marked unfinished.
  // (The stack is OpenSlices, open_slices.hpp: the native reader's rule, with a match.)
  void pair_begin_and_end_events() {
    auto& slices = trace_.slices;
    OpenSlices open;
    for (trace::TrackId track = 0; track < begin_end_by_track_.size(); ++track) {
      auto& entries = begin_end_by_track_[track];
      if (entries.empty()) continue;
      if (begin_end_unordered_[track])
        std::stable_sort(entries.begin(), entries.end(),
                         [](const BeginOrEnd& a, const BeginOrEnd& b) { return a.ts < b.ts; });
      open.clear();
      for (const BeginOrEnd& entry : entries) {
        if (entry.row != trace::kNoRow) {
          open.open(slices, entry.row, /*fill_nesting=*/false);
          continue;
        }
        trace::RowIndex row = open.close_matching(
            slices, entry.ts,
            [&](trace::RowIndex candidate) {
              return (entry.name == 0 || slices.name[candidate] == entry.name) &&
                     (entry.category == 0 || slices.category[candidate] == entry.category);
            },
            closed_by_outer_end_);
        if (row == trace::kNoRow) {
          ++unmatched_end_events_;
          continue;
        }
        for (uint32_t arg = entry.args_begin; arg < entry.args_end; ++arg)
          trace_.slice_args.add(row, end_args_[arg].first, end_args_[arg].second);
      }
      unfinished_slices_ += open.close_all_unfinished(slices, last_ts_by_track_[track]);
      entries = {};
    }
    end_args_ = {};
  }

  // Each numeric arg of a C event is a series named "<name> <arg>" ("io" with "read" and
  // "write": tracks "io read" and "io write", group "io"), as Perfetto names them, but for a
  // lone "value" (Chrome's TRACE_COUNTER1, opsight's writer): that counter is named by the
  // event ("memory"), as the reports and metrics know it. An "id" joins the event's
  // name as in Perfetto ("io id: 7 read", "memory id: 7"): counters of one name and
  // different ids stay apart.
  void merge_counter(const DecodedEvent& event, std::span<const DecodedArg> samples,
                     const LocalStrings& strings) {
    int64_t pid = pid_of(event, strings);
    const bool series =
        samples.size() > 1 || (samples.size() == 1 && strings.get(samples[0].key) != "value");
    std::string_view name = strings.get(event.name);
    std::string name_with_id;
    if (event.category != 0) {  // the id's text
      name_with_id.append(name).append(" id: ").append(strings.get(event.category));
      name = name_with_id;
    }
    for (const DecodedArg& sample : samples) {
      uint32_t track = series ? trace_.counter_series(pid, name, strings.get(sample.key))
                              : trace_.counter_track(pid, name);
      trace_.counters.add(event.ts, track, sample.value.double_value);
    }
  }

  // A thread's name, or, in opsight's files, the name of an async lane (a key and the
  // lane's thread's tid: see EventDecoder) not seen before any event used its tid.
  void merge_thread_name(const DecodedEvent& event, std::span<const DecodedArg> args,
                         const LocalStrings& strings) {
    int64_t pid = pid_of(event, strings);
    int64_t tid = (event.flags & kNoTid) != 0
                      ? pid
                      : id_of(event.tid, event.tid_text, event.flags & kTidIsText, strings, false);
    if (event.span_id != 0 && args.size() == 1 && async_lanes_.count({pid, tid}) == 0) {
      trace::ArgValue thread = args[0].value;
      int64_t thread_tid = thread.type == trace::ArgType::kString
                               ? id_from_string(strings.get(thread.string_value), false)
                               : thread.int_value;
      async_lanes_.emplace(std::pair{pid, tid}, trace_.async_track(pid, thread_tid, event.span_id,
                                                                   strings.get(event.name)));
      has_cached_track_ = false;
      return;
    }
    trace_.tracks[track_for(pid, tid)].name = global_ids_[event.name];
  }

  // The PyTorch profiler's Python functions (with_stack=True: nn.Module calls among them)
  // and its operators and record_function ranges share a thread, and mostly nest: a module
  // encloses its operators. Where they overlap without nesting (a range opens inside
  // record_function.__enter__ and closes inside __exit__), the Python function gives way:
  // one that an operator or range starts inside of and outlives ends where that one
  // begins (counted in python_functions_clipped); a Python function that outlives the
  // operator it starts in is clipped to it by finalize, like any child. So operators keep
  // their exact times and sit under the module that called them, on the thread's track.
  void nest_python_functions() {
    auto python_function = trace_.strings.find("python_function");
    if (!python_function) return;
    auto& slices = trace_.slices;
    std::vector<bool> track_has_python(trace_.tracks.size(), false);
    bool any = false;
    for (size_t row = 0; row < slices.size(); ++row) {
      if (slices.category[row] == *python_function && slices.track[row] < track_has_python.size()) {
        track_has_python[slices.track[row]] = true;
        any = true;
      }
    }
    if (!any) return;
    std::vector<trace::RowIndex> order;
    for (trace::RowIndex row = 0; row < slices.size(); ++row)
      if (slices.track[row] < track_has_python.size() && track_has_python[slices.track[row]])
        order.push_back(row);
    std::stable_sort(order.begin(), order.end(), [&](trace::RowIndex a, trace::RowIndex b) {
      if (slices.track[a] != slices.track[b]) return slices.track[a] < slices.track[b];
      if (slices.ts[a] != slices.ts[b]) return slices.ts[a] < slices.ts[b];
      return slices.dur[a] > slices.dur[b];
    });
    std::vector<trace::RowIndex> open;
    trace::TrackId current_track = std::numeric_limits<trace::TrackId>::max();
    for (trace::RowIndex row : order) {
      if (slices.track[row] != current_track) {
        open.clear();
        current_track = slices.track[row];
      }
      while (!open.empty() && slices.end(open.back()) <= slices.ts[row]) open.pop_back();
      const bool row_is_python = slices.category[row] == *python_function;
      while (!row_is_python && !open.empty() && slices.end(open.back()) < slices.end(row) &&
             slices.category[open.back()] == *python_function) {
        trace::RowIndex outer = open.back();
        slices.dur[outer] = slices.ts[row] - slices.ts[outer];
        ++python_functions_clipped_;
        open.pop_back();
      }
      open.push_back(row);
    }
  }

  trace::Trace& trace_;
  std::string_view text_;
  size_t offset_base_;
  InternCache strings_;
  std::vector<trace::StringId> global_ids_;  // of the window being merged, by local id
  size_t slices_seen_ = 0;                   // X and B events merged

  bool looks_like_pytorch_ = false;
  bool saw_onnxruntime_category_ = false;
  bool written_by_opsight_ = false;
  int64_t time_base_ns_ = 0;  // opsight's writer stores timestamps relative to this

  // Async lanes by the (pid, synthetic tid) opsight's writer gave them.
  std::map<std::pair<int64_t, int64_t>, trace::TrackId> async_lanes_;
  std::vector<int64_t> last_ts_by_track_;
  // B/E and b/e events per track, paired once every event is read.
  std::vector<std::vector<BeginOrEnd>> begin_end_by_track_;
  std::vector<bool> begin_end_unordered_;  // per track: some event came before an earlier one
  std::vector<std::pair<trace::StringId, trace::ArgValue>> end_args_;
  std::unordered_map<AsyncKey, trace::TrackId, AsyncKeyHash> async_tracks_;
  std::unordered_map<FlowKey, OpenFlow, FlowKeyHash> open_flows_;
  std::vector<V1FlowEvent> v1_flow_events_;
  std::vector<FlowBySpan> flows_by_span_;
  std::vector<V2FlowEnd> v2_flows_;
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
  uint64_t closed_by_outer_end_ = 0;
  uint64_t unfinished_slices_ = 0;
  uint64_t unmatched_flow_events_ = 0;
  uint64_t python_functions_clipped_ = 0;
};

// The fast path for a complete, well-formed document: the top level is parsed with the
// event array emptied, then the events a window of about 1 MiB at a time. Returns nullopt
// whenever anything is unusual (cut input, invalid JSON, no traceEvents...), and the whole
// document is then read by the careful path, which knows how to repair and explain.
// `done_before` (may be null) hears of the text each merged window leaves behind.
using DoneBefore = std::function<void(const char*)>;
std::optional<ReadResult> read_in_windows(std::string_view text, size_t offset_base, size_t first,
                                          bool parse_on_helper_thread,
                                          const DoneBefore* done_before) {
  PhaseClock clock;
  bool object_form = text[first] == '{';
  std::optional<size_t> array_start = object_form ? find_event_array(text) : first;
  if (!array_start || *array_start >= text.size() || text[*array_start] != '[') return std::nullopt;
  auto split = split_array_elements(text, *array_start, kWindowBytes);
  if (!split) return std::nullopt;  // left open: the careful path repairs it
  if (!object_form && skip_whitespace(text, split->array_end) != text.size()) return std::nullopt;

  clock.lap("cut windows");
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
                            object_form ? "]}" : "]", object_form, builder.decoder(),
                            parse_on_helper_thread);
    size_t index = 0;
    const size_t array_begin = split->windows.empty() ? 0 : split->windows[0].first;
    clock.lap("top level");
    double waiting_ms = 0;
    double merging_ms = 0;
    for (size_t window = 0; window < split->windows.size(); ++window) {
      auto wait_start = PhaseClock::Clock::now();
      const DecodedEvents* events = pipeline.next(window);
      auto merge_start = PhaseClock::Clock::now();
      waiting_ms += std::chrono::duration<double, std::milli>(merge_start - wait_start).count();
      if (events == nullptr) return std::nullopt;
      // The events the whole array holds, estimated from the density so far (an event is
      // more than 16 bytes).
      size_t end = split->windows[window].second;
      double events_per_byte = static_cast<double>(index + events->events.size()) /
                               static_cast<double>(std::max<size_t>(1, end - array_begin));
      size_t bytes_left = split->array_end > end ? split->array_end - end : 0;
      size_t expected_events =
          index + events->events.size() +
          std::min(
              static_cast<size_t>(std::ceil(events_per_byte * static_cast<double>(bytes_left))),
              bytes_left / 16);
      builder.merge(*events, index, expected_events);
      index += events->events.size();
      pipeline.release(window);
      if (done_before != nullptr) (*done_before)(text.data() + split->windows[window].second);
      merging_ms +=
          std::chrono::duration<double, std::milli>(PhaseClock::Clock::now() - merge_start).count();
    }
    clock.lap("windows (all)");
    PhaseClock::print("  caller: decode or wait", waiting_ms);
    PhaseClock::print("  caller: merge", merging_ms);
  }
  // Windows hold at most ~1 MiB of text: drop the parsers' memory if one grew it large.
  for (WindowParser& parser : window_parsers())
    if (parser.parser.capacity() > 8 * kWindowBytes)
      parser = WindowParser{simdjson::dom::parser{}, std::string{}};
  builder.finish(object_form);
  clock.lap("finish (B/E, flows, names)");
  result.trace.finalize();
  clock.lap("finalize");
  return result;
}

// A result read from a mended copy of the input (mend_sloppy_json, after the byte-order mark
// at `offset_base`) names offsets in the copy: map them back to the input's, in the damage
// and in the description of the first invalid event ("... at byte N: ...").
void map_offsets_to_input(ReadResult& result, const MendedOffsets& edits, size_t offset_base) {
  auto to_input = [&](size_t offset) { return edits.original(offset) + offset_base; };
  if (result.damage) result.damage->byte_offset = to_input(result.damage->byte_offset);
  for (auto& [key, value] : result.trace.run.extra) {
    if (key != "first_invalid_event") continue;
    static constexpr std::string_view kAtByte = " at byte ";
    size_t at = value.find(kAtByte);
    if (at == std::string::npos) continue;
    size_t digits = at + kAtByte.size();
    size_t end = value.find_first_not_of("0123456789", digits);
    if (end == digits) continue;
    size_t offset = std::strtoull(value.substr(digits, end - digits).c_str(), nullptr, 10);
    value.replace(digits, end - digits, std::to_string(to_input(offset)));
  }
}

ReadResult read_chrome_json_unguarded(std::string_view bytes, bool parse_on_helper_thread,
                                      const DoneBefore* done_before, bool may_mend = true) {
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

  if (auto fast = read_in_windows(text, offset_base, first, parse_on_helper_thread, done_before))
    return std::move(*fast);
  // Cut short (a killed recorder): close it after its last whole event and read that a
  // window at a time too, rather than parsing the whole file (and a repaired copy) at once.
  // The scan is kept for the strict parse's repair and error report below (same text).
  const RepairPoint repair = find_repair_point(text);
  if (repair.input_is_cut) {
    std::string repaired(text.substr(0, repair.keep_bytes));
    repaired += repair.closing_brackets;
    if (auto fast =
            read_in_windows(repaired, offset_base, first, parse_on_helper_thread, nullptr)) {
      if (repair.cut_value_offset != std::string_view::npos) {
        fast->damage = Diagnostic{
            "input ends in the middle of a value; read up to the last complete event before it",
            offset_base + repair.cut_value_offset, true};
        fast->trace.run.complete = false;
      }
      return std::move(*fast);
    }
  }

  // Trailing commas and raw control characters in strings: read a mended copy; the byte
  // offsets it reports are mapped back to the input's.
  size_t mended_count = 0;
  MendedOffsets edits;
  if (may_mend) {
    if (auto mended = mend_sloppy_json(text, &mended_count, &edits)) {
      ReadResult mended_result =
          read_chrome_json_unguarded(*mended, parse_on_helper_thread, nullptr, false);
      if (mended_result.ok()) {
        map_offsets_to_input(mended_result, edits, offset_base);
        mended_result.trace.run.extra.emplace_back("mended_json", std::to_string(mended_count));
        return mended_result;
      }
    }
  }

  // A document of one window's size is parsed by this thread's window parser, whose memory
  // is already allocated (a new parser allocates for the document and for its maximum
  // depth on every read); nothing else parses with it while `root` is in use.
  std::optional<simdjson::dom::parser> own_parser;
  simdjson::dom::parser& parser =
      text.size() <= kWindowBytes ? window_parsers()[0].parser : own_parser.emplace();
  element root;
  size_t length = 0;
  auto buffer = padded_copy(text, {}, &length);
  simdjson::error_code parse_error = parser.parse(buffer.get(), length, false).get(root);
  if (parse_error != simdjson::SUCCESS && parse_error != simdjson::DEPTH_ERROR &&
      parse_error != simdjson::MEMALLOC && parse_error != simdjson::CAPACITY) {
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
    // A mended copy (may_mend false) is used only if it reads; otherwise the caller reports
    // the input's own error, so locating the copy's would be wasted (it is the dearest step).
    result.error = may_mend ? describe_invalid_json(text, parse_error, offset_base, &repair)
                            : Diagnostic{"invalid JSON (mended copy)", 0, false};
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

ReadResult read_chrome_json_guarded(std::string_view bytes, int threads,
                                    const DoneBefore* done_before) {
  try {
    return read_chrome_json_unguarded(bytes, threads >= 2, done_before);
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

int default_threads() {
  static const int threads = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  return threads;
}

}  // namespace

ReadResult read_chrome_json(std::string_view bytes, int threads) {
  return read_chrome_json_guarded(bytes, threads, nullptr);
}

ReadResult read_chrome_json(std::string_view bytes) {
  return read_chrome_json_guarded(bytes, default_threads(), nullptr);
}

namespace chrome_json {
ReadResult read_chrome_json_dropping_input(std::string_view bytes,
                                           const std::function<void(const char*)>& done_before) {
  return read_chrome_json_guarded(bytes, default_threads(), &done_before);
}
}  // namespace chrome_json

}  // namespace opsight::io
