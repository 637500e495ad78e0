// Reads the native .opsight format into a Trace. Chunks are checked one by one; the first
// chunk that is cut short or fails its checksum ends the read, and everything before it
// is kept (ReadResult::damage says where). Events are decoded per thread: Begin/End pair
// up on a stack (OpenSlices, open_slices.hpp, whose rule the Chrome JSON reader pairs B/E
// by too; async begins and ends pair on one per (process, id) once every thread is read),
// args attach to the innermost open span (or the instant just before).
// A thread's events may be spread over tracks (kTrack events, from switch_track): each
// track of a thread — its own, and one per async key and reuse of that key — has a stack
// of its own and becomes a trace::Track the first time something is recorded on it.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <unordered_map>

#include "format/chunk_codec.hpp"
#include "format/chunk_index.hpp"
#include "io/io.hpp"
#include "io/native/derived_span_id.hpp"
#include "io/native/slot_decoder.hpp"
#include "io/open_slices.hpp"

namespace opsight::io {

namespace {

using format::Slot;
using format::SlotKind;
using trace::kNoRow;
using trace::RowIndex;
using trace::StringId;

// One track of a thread while it is decoded: the thread's own (key 0) or an async lane.
struct LaneState {
  uint64_t key = 0;
  std::string name;  // for an async lane; empty: "track <key>"
  bool has_track = false;
  trace::TrackId track = 0;
  OpenSlices open;                 // slices begun and not yet ended
  RowIndex last_instant = kNoRow;  // an instant the next args may belong to
  int64_t last_ns = 0;
  std::vector<uint64_t> flows_into_next;  // kFlowIntoNext ids waiting for the next begin
  RowIndex in_session_trace = kNoRow;     // the last root that joined the session's trace
};

// An async span's begin or end, kept until every thread is read: the two may be on
// different threads, so they are paired afterwards.
struct AsyncEvent {
  int64_t pid = 0;
  uint64_t id = 0;
  int64_t ns = 0;
  uint64_t order = 0;  // file order, for a stable sort of events at one time
  bool begin = false;
  bool unfinished = false;  // an end the model writer marked kEndOfUnfinished
  StringId name = 0;
  StringId category = 0;
  uint64_t span_id = 0;  // a begin's derived id (native::derived_async_span_id)
};

// One end of a flow bound to a slice, kept until every thread is read.
// 24 bytes: a read keeps one per flow end until the last thread is read.
struct FlowEndEvent {
  uint64_t id = 0;
  int64_t ns = 0;  // the thread's last time when it was recorded (kFlow carries none)
  // The slice row; with kOnAsyncBegin in `direction`, the AsyncEvent::order of the async
  // begin it binds to, turned into a row once async slices are built.
  RowIndex slice = kNoRow;
  uint8_t direction = 0;
  static constexpr uint8_t kOnAsyncBegin = 0x80;
  static constexpr uint64_t kNoAsyncBegin = ~uint64_t{0};
};
static_assert(sizeof(FlowEndEvent) == 24);

struct ThreadState {
  int64_t pid = 0;
  int64_t tid = 0;
  std::string name;
  // lanes[0] is the thread's own track; the others are async lanes, in order of first use.
  std::vector<LaneState> lanes = std::vector<LaneState>(1);
  std::unordered_map<uint64_t, size_t> lane_of_key;  // the current lane of each async key
  size_t current_lane = 0;
  int64_t last_ns = 0;
  native::ThreadSlotState slots;  // what decoding its next chunk needs from the last
  uint64_t events = 0;
  uint64_t last_async_begin = FlowEndEvent::kNoAsyncBegin;  // order of its last kAsyncBegin
};

// Ids and thread indices above this are damage, not data (2^24: far beyond any recording).
constexpr uint32_t kMaxIndex = 1u << 24;

struct NameIds {
  StringId name = 0;
  StringId category = 0;
};

class NativeDecoder {
 public:
  // `done_before(p)`, when given, hears that the bytes before p are no longer needed (a
  // mapped file's pages can then leave memory): after each Events chunk is decoded.
  // `defer_events_checks`: decode() checks each kEvents chunk's payload checksum just
  // before decoding it (the chunk is then in the cache for the decode, where checking every
  // chunk first read the file from memory twice); false: as each chunk is read.
  explicit NativeDecoder(std::string_view file,
                         std::function<void(const char*)> done_before = nullptr,
                         bool defer_events_checks = true)
      : file_(file),
        done_before_(std::move(done_before)),
        defer_events_checks_(defer_events_checks) {}

  ReadResult decode() {
    if (!check_header()) return std::move(result_);
    format::FileHeader header;
    std::memcpy(&header, file_.data(), sizeof(header));
    uint64_t offset = std::max<uint64_t>(header.header_bytes, sizeof(format::FileHeader));
    std::vector<format::ChunkView> event_chunks;
    bool saw_stats = false;
    while (offset < file_.size()) {
      std::string problem;
      auto chunk = format::read_chunk(file_, offset, &problem, defer_events_checks_);
      if (!chunk) {
        damage(offset, problem + "; the " + std::to_string(offset) + " bytes before it were read");
        break;
      }
      uint64_t chunk_offset = offset;
      offset = chunk->payload_offset + chunk->payload.size();
      if (chunk->type == format::ChunkType::kEvents)
        event_chunks.push_back(*chunk);
      else
        read_other_chunk(*chunk, chunk_offset, saw_stats);
    }
    if (!saw_stats && !result_.damage)
      damage(offset, "the recording has no end (the process stopped before the session did)");
    fit_clock();
    size_t slots = 0;
    for (const auto& chunk : event_chunks) slots += chunk.payload.size() / sizeof(Slot);
    result_.trace.slices.reserve(slots / 2 + 1);
    for (const auto& chunk : event_chunks) {
      // A damaged kEvents chunk ends the read where it is, and the chunks after it (names,
      // clock syncs, the footer), which this pass has read, must not count: read the file
      // again checking each chunk as it comes (a damaged file only). Pages handed back
      // are faulted in again (read_native_dropping_input's contract).
      if (defer_events_checks_ && !format::payload_intact(chunk)) [[unlikely]]
        return NativeDecoder(file_, nullptr, /*defer_events_checks=*/false).decode();
      decode_events(chunk);
      if (done_before_) done_before_(chunk.payload.data() + chunk.payload.size());
    }
    trim_slices();
    finish_threads();
    int64_t trace_end_ns = 0;
    for (const auto& state : threads_) trace_end_ns = std::max(trace_end_ns, state.last_ns);
    build_async_slices(trace_end_ns);
    apply_async_track_layout();
    build_flows();
    note_counts();
    trace::Trace& trace = result_.trace;
    trace.run.complete = saw_stats && !result_.damage;
    trace.run.source_format = "opsight";
    trace.nesting_filled_by_reader = true;  // rows per thread in begin order, stack-nested
    trace.finalize();
    return std::move(result_);
  }

  // The chunks of `index` needed for `window` (ns from the trace's first event): every chunk
  // but the kEvents ones; of those, per thread, the run of chunks from the last one where
  // the thread's state is empty (kIndexCleanStart) at or before the first chunk that
  // overlaps the window, up to the next such chunk after the last one that overlaps it, so
  // that every span overlapping the window is read whole, with its begin's name, args,
  // parent and id; and the async events of the other chunks (they pair across threads).
  // What is read is then cut to the window by trace::keep_time_window's overlap rule, so
  // the result equals the whole file read and cut (docs/native-format.md, "Time index").
  // Returns false, having read nothing of the model, when a chunk is not what the index
  // says (the caller then rebuilds the index by a scan).
  bool decode_window(const std::vector<format::IndexEntry>& index, const TimeWindow& window,
                     const std::string& index_note, std::optional<Diagnostic> scan_damage) {
    if (!check_header()) return true;
    bool saw_stats = false;
    for (const format::IndexEntry& entry : index) {
      if (entry.type == static_cast<uint32_t>(format::ChunkType::kEvents)) continue;
      std::string problem;
      auto chunk = format::read_chunk(file_, entry.offset, &problem);
      if (!chunk || static_cast<uint32_t>(chunk->type) != entry.type) return false;
      read_other_chunk(*chunk, entry.offset, saw_stats);
    }
    if (scan_damage) result_.damage = scan_damage;
    if (!saw_stats && !result_.damage)
      damage(file_.size(), "the recording has no end (the process stopped before the session did)");
    fit_clock();

    // The window in ns on the file's clock.
    uint64_t first_ticks = std::numeric_limits<uint64_t>::max();
    for (const format::IndexEntry& entry : index)
      if (is_timed_events(entry)) first_ticks = std::min(first_ticks, entry.min_ticks);
    std::vector<uint8_t> decode(index.size(), 0);  // 1: whole, 2: async events only
    std::unordered_map<uint32_t, uint64_t> max_ticks_of_thread;
    std::unordered_map<uint32_t, uint64_t> events_of_thread;
    std::unordered_map<uint32_t, bool> thread_has_spans;
    uint64_t chunks_read = 0;
    if (first_ticks != std::numeric_limits<uint64_t>::max()) {
      const int64_t start_ns = to_ns(first_ticks);
      const int64_t window_from = saturating_add(start_ns, window.from_ns);
      const int64_t window_to = saturating_add(start_ns, window.to_ns);
      std::unordered_map<uint32_t, std::vector<size_t>> chunks_of_thread;
      // (Thread indices above kMaxIndex are damage: the whole read stops at such a chunk.)
      for (size_t i = 0; i < index.size(); ++i)
        if (index[i].type == static_cast<uint32_t>(format::ChunkType::kEvents) &&
            index[i].thread_index <= kMaxIndex)
          chunks_of_thread[index[i].thread_index].push_back(i);
      for (auto& [thread, chunks] : chunks_of_thread) {
        // Each chunk covers its events' times and, unless the thread's state is empty where
        // it begins, the gap back to the thread's previous events (a span open across it).
        size_t first = chunks.size(), last = 0;
        bool has_previous = false;
        int64_t previous_high = 0;
        for (size_t k = 0; k < chunks.size(); ++k) {
          const format::IndexEntry& entry = index[chunks[k]];
          events_of_thread[thread] += entry.event_count;
          if (entry.flags & format::kIndexHasSpans) thread_has_spans[thread] = true;
          bool timed = is_timed_events(entry);
          if (timed)
            max_ticks_of_thread[thread] = std::max(max_ticks_of_thread[thread], entry.max_ticks);
          int64_t low = timed ? to_ns(entry.min_ticks) : previous_high;
          if (!(entry.flags & format::kIndexCleanStart) && has_previous)
            low = std::min(low, previous_high);
          int64_t high = timed ? to_ns(entry.max_ticks) : low;
          if (has_previous) high = std::max(high, previous_high);
          if (low <= window_to && high >= window_from && (timed || has_previous)) {
            first = std::min(first, k);
            last = k;
          }
          if (timed || has_previous) {
            previous_high = high;
            has_previous = true;
          }
        }
        if (first == chunks.size()) continue;
        // From the last chunk at or before the first one overlapping the window where the
        // thread's state is empty at some point (the spans open at the window's start all
        // began after it), through the first such chunk after the last one overlapping it
        // (the spans open at the window's end all end before that point).
        // (The first overlapping chunk itself only when its start is empty: a point inside
        // it may lie after the window's start.)
        size_t begin = first;
        if (!(index[chunks[first]].flags & format::kIndexCleanStart) && first > 0) {
          begin = first - 1;
          while (begin > 0 && !(index[chunks[begin]].flags & format::kIndexResumable)) --begin;
        }
        size_t end = last + 1;
        while (end < chunks.size() && !(index[chunks[end]].flags & format::kIndexResumable)) ++end;
        end = std::min(end + 1, chunks.size());
        for (size_t k = begin; k < end; ++k) decode[chunks[k]] = 1;
      }
      for (size_t i = 0; i < index.size(); ++i)
        if (decode[i] == 0 && (index[i].flags & format::kIndexHasAsync) &&
            index[i].type == static_cast<uint32_t>(format::ChunkType::kEvents) &&
            index[i].thread_index <= kMaxIndex)
          decode[i] = 2;
      // The chunks, in file order: a thread's run of whole chunks starts from the index's
      // account of the chunks before it.
      std::unordered_map<uint32_t, size_t> previous_whole;  // the thread's last whole chunk
      for (size_t i = 0; i < index.size(); ++i) {
        if (decode[i] == 0) continue;
        const format::IndexEntry& entry = index[i];
        std::string problem;
        auto chunk = format::read_chunk(file_, entry.offset, &problem);
        if (!chunk || chunk->type != format::ChunkType::kEvents ||
            chunk->payload.size() < sizeof(format::EventsHeader))
          return false;
        format::EventsHeader header;
        std::memcpy(&header, chunk->payload.data(), sizeof(header));
        if (header.thread_index != entry.thread_index) return false;
        ++chunks_read;
        ThreadState& state = thread_state(entry.thread_index);
        if (decode[i] == 1) {
          auto previous = previous_whole.find(entry.thread_index);
          bool continues = previous != previous_whole.end() && previous->second + 1 == i;
          if (!continues) {
            for (size_t k = i; k-- > 0;) {
              if (index[k].type == static_cast<uint32_t>(format::ChunkType::kEvents) &&
                  index[k].thread_index == entry.thread_index) {
                continues = decode[k] == 1;
                break;
              }
            }
          }
          if (!continues) state.slots = slot_state_before(entry);
          previous_whole[entry.thread_index] = i;
          decode_events(*chunk);
        } else {
          decode_async_events(*chunk, entry);
        }
      }
    }
    // What the index knows of the chunks left unread: each thread's last time, its event
    // count and whether it has a track of its own, as the whole file gives them.
    for (auto& [thread, ticks] : max_ticks_of_thread) {
      ThreadState& state = thread_state(thread);
      if (!syncs_.empty() && ticks < base_ticks_) continue;
      state.last_ns = std::max(state.last_ns, to_ns(ticks));
    }
    for (auto& [thread, events] : events_of_thread) thread_state(thread).events = events;
    for (auto& [thread, has_spans] : thread_has_spans)
      if (has_spans) {
        ThreadState& state = thread_state(thread);
        track_of(state, state.lanes[0]);
      }
    // A run that starts inside spans begun before it meets their ends, arguments and
    // flows without them: not the file's problems, so not counted.
    unmatched_ends_ = orphan_args_ = contexts_without_span_ = flow_ends_without_span_ = 0;
    trim_slices();
    finish_threads();
    int64_t trace_end_ns = 0;
    for (const auto& state : threads_) trace_end_ns = std::max(trace_end_ns, state.last_ns);
    build_async_slices(trace_end_ns);
    apply_async_track_layout();
    build_flows();
    flow_ends_without_span_ = 0;
    note_counts();
    trace::Trace& trace = result_.trace;
    trace.run.complete = saw_stats && !result_.damage;
    trace.run.source_format = "opsight";
    trace.nesting_filled_by_reader = true;
    trace.finalize();
    trace.run.extra.emplace_back("native_index", index_note);
    trace.run.extra.emplace_back("window_chunks_read", std::to_string(chunks_read));
    if (first_ticks != std::numeric_limits<uint64_t>::max()) {
      const int64_t start_ns = to_ns(first_ticks);
      trace::keep_time_window(trace, saturating_add(start_ns, window.from_ns),
                              saturating_add(start_ns, window.to_ns), trace::WindowRule::kOverlaps);
    }
    return true;
  }

  ReadResult take_result() { return std::move(result_); }

 private:
  static bool is_timed_events(const format::IndexEntry& entry) {
    return entry.type == static_cast<uint32_t>(format::ChunkType::kEvents) &&
           entry.min_ticks <= entry.max_ticks;
  }

  static int64_t saturating_add(int64_t a, int64_t b) {
    int64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum))
      return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
    return sum;
  }

  // The decoder's state for a thread at the start of the chunk `entry` describes.
  native::ThreadSlotState slot_state_before(const format::IndexEntry& entry) const {
    native::ThreadSlotState slots;
    slots.has_last_ticks = (entry.flags & format::kIndexHasTicksBefore) != 0;
    slots.last_ticks = slots.has_last_ticks ? entry.ticks_before : 0;
    slots.skipping_stale =
        slots.has_last_ticks && !syncs_.empty() && entry.ticks_before < base_ticks_;
    slots.begins = entry.begins_before;
    slots.async_begins = entry.async_begins_before;
    return slots;
  }

  // Only the async begins and ends of a chunk (and flows bound to them), which pair across
  // threads: a window read takes them from chunks it does not otherwise decode.
  void decode_async_events(const format::ChunkView& chunk, const format::IndexEntry& entry) {
    format::EventsHeader header;
    std::memcpy(&header, chunk.payload.data(), sizeof(header));
    uint32_t slots = static_cast<uint32_t>(std::min<size_t>(
        header.slot_count, (chunk.payload.size() - sizeof(header)) / sizeof(Slot)));
    ThreadState& state = thread_state(header.thread_index);
    native::ThreadSlotState slot_state = slot_state_before(entry);
    native::SlotFileContext file{header.thread_index, !syncs_.empty(), base_ticks_, span_salt()};
    native::decode_slots(chunk.payload.data() + sizeof(header), slots, slot_state, file,
                         [&](const native::SlotEvent& event) {
                           if (event.malformed) return;
                           switch (event.kind) {
                             case SlotKind::kBegin:
                             case SlotKind::kEnd:
                             case SlotKind::kInstant:
                             case SlotKind::kCounter:
                               state.last_ns = std::max(state.last_ns, to_ns(event.ticks));
                               return;
                             case SlotKind::kAsyncBegin:
                             case SlotKind::kAsyncEnd: {
                               int64_t ns = to_ns(event.ticks);
                               state.last_ns = std::max(state.last_ns, ns);
                               add_async_event(state, event, ns);
                               return;
                             }
                             case SlotKind::kFlow:
                               if (event.detail & format::kFlowOnAsyncBegin)
                                 bind_flow(state, state.lanes[0], event);
                               return;
                             default:
                               return;
                           }
                         });
  }

  // Checks the file header; false (with result_.error set) when it is not a file to read.
  bool check_header() {
    if (file_.size() < sizeof(format::FileHeader) ||
        std::memcmp(file_.data(), format::kFileMagic, sizeof(format::kFileMagic)) != 0) {
      result_.error =
          Diagnostic{file_.empty() ? "file is empty" : "not an opsight file (bad magic)", 0, true};
      return false;
    }
    format::FileHeader header;
    std::memcpy(&header, file_.data(), sizeof(header));
    if (header.version > format::kFormatVersion) {
      result_.error = Diagnostic{"opsight format version " + std::to_string(header.version) +
                                     " is newer than this reader (" +
                                     std::to_string(format::kFormatVersion) + ")",
                                 8, true};
      return false;
    }
    return true;
  }

  // A chunk other than kEvents, read as it comes (unknown types are skipped).
  void read_other_chunk(const format::ChunkView& chunk, uint64_t chunk_offset, bool& saw_stats) {
    switch (chunk.type) {
      case format::ChunkType::kRunInfo:
        read_run_info(chunk, chunk_offset);
        break;
      case format::ChunkType::kClockSync:
        read_clock_sync(chunk);
        break;
      case format::ChunkType::kNames:
        read_names(chunk, chunk_offset);
        break;
      case format::ChunkType::kThread:
        read_thread(chunk, chunk_offset);
        break;
      case format::ChunkType::kStats:
        read_stats(chunk);
        saw_stats = true;
        break;
      case format::ChunkType::kDropsSoFar:  // the latest counts until the footer comes
        read_stats(chunk);
        break;
      default:
        break;  // the index, or a chunk type from a newer writer: skip it
    }
  }

  void note_counts() {
    for (auto [key, count] :
         {std::pair{"unmatched_async_ends", unmatched_async_ends_},
          std::pair{"flow_ends_without_span", flow_ends_without_span_ + flows_into_next_unbound_},
          std::pair{"trace_contexts_without_span", contexts_without_span_},
          std::pair{"layout_entries_ignored", layout_entries_ignored_}})
      if (count > 0) result_.trace.run.extra.emplace_back(key, std::to_string(count));
  }

  // Keeps the earliest problem: everything before it was read.
  void damage(uint64_t offset, std::string message) {
    if (!result_.damage || offset < result_.damage->byte_offset)
      result_.damage = Diagnostic{std::move(message), offset, true};
  }

  // A bounds-checked cursor over one chunk's payload.
  struct Cursor {
    std::string_view bytes;
    size_t position = 0;
    bool failed = false;
    template <typename T>
    T take() {
      T value{};
      if (bytes.size() - position < sizeof(T)) {
        failed = true;
        return value;
      }
      std::memcpy(&value, bytes.data() + position, sizeof(T));
      position += sizeof(T);
      return value;
    }
    std::string_view take_bytes(size_t count) {
      if (bytes.size() - position < count) {
        failed = true;
        return {};
      }
      auto view = bytes.substr(position, count);
      position += count;
      return view;
    }
  };

  void read_run_info(const format::ChunkView& chunk, uint64_t chunk_offset) {
    Cursor cursor{chunk.payload};
    auto count = cursor.take<uint32_t>();
    auto& run = result_.trace.run;
    for (uint32_t i = 0; i < count && !cursor.failed; ++i) {
      std::string_view key = cursor.take_bytes(cursor.take<uint32_t>());
      std::string_view value = cursor.take_bytes(cursor.take<uint32_t>());
      if (cursor.failed) break;
      if (key == "command_line")
        run.command_line = value;
      else if (key == "host")
        run.host = value;
      else if (key == "opsight_version")
        run.opsight_version = value;
      else if (key == "clock")
        run.clock = value;
      else if (key == "pid")
        run.pid = std::strtoll(std::string(value).c_str(), nullptr, 10);
      else if (key.starts_with("process.") || key.starts_with("thread.") ||
               key.starts_with("async_track.") || key.starts_with("counter_series.")) {
        if (layout_entries_.size() < kMaxLayoutEntries)
          layout_entries_.emplace_back(std::string(key), std::string(value));
        else
          ++layout_entries_ignored_;
      } else if (key == "parent_pid")
        parent_pid_ = std::strtoll(std::string(value).c_str(), nullptr, 10);
      else if (key == "process_name")
        process_name_ = value;
      else if (key == "ticks_per_second")
        ticks_per_second_ = std::strtod(std::string(value).c_str(), nullptr);
      else if (key == "event_cost_ns")
        event_cost_ns_ = std::strtod(std::string(value).c_str(), nullptr);
      else if (key == "trace_id" && value.size() == 32) {
        run.trace_id.high = std::strtoull(std::string(value.substr(0, 16)).c_str(), nullptr, 16);
        run.trace_id.low = std::strtoull(std::string(value.substr(16)).c_str(), nullptr, 16);
      } else if (key == "source_format")
        source_format_ = value;
      else
        run.extra.emplace_back(std::string(key), std::string(value));
    }
    if (cursor.failed) damage(chunk_offset, "run-info chunk is malformed");
  }

  void read_clock_sync(const format::ChunkView& chunk) {
    Cursor cursor{chunk.payload};
    while (cursor.bytes.size() - cursor.position >= sizeof(format::ClockSync))
      syncs_.push_back(cursor.take<format::ClockSync>());
  }

  void read_names(const format::ChunkView& chunk, uint64_t chunk_offset) {
    Cursor cursor{chunk.payload};
    trace::Trace& trace = result_.trace;
    while (cursor.position < cursor.bytes.size()) {
      auto record = cursor.take<format::NameRecordHeader>();
      std::string_view name = cursor.take_bytes(record.name_bytes);
      std::string_view category = cursor.take_bytes(record.category_bytes);
      cursor.take_bytes(record.file_bytes);
      if (cursor.failed) {
        damage(chunk_offset, "names chunk is malformed");
        return;
      }
      if (record.id == 0 || record.id > kMaxIndex) {
        damage(chunk_offset, "names chunk has an impossible name id " + std::to_string(record.id));
        return;
      }
      NameIds ids{trace.intern(name), trace.intern(category)};
      // Ids are dense in files opsight writes; a damaged file may name any up to 2^24, so
      // one far beyond the ids so far costs a map entry, not a vector of 2^24 (128 MiB
      // zeroed for a 4 KiB input: what held the fuzzer below 2,000 inputs/s).
      if (record.id < names_.size() + kDenseNameGrowth) {
        if (record.id >= names_.size()) names_.resize(size_t{record.id} + 1);
        names_[record.id] = ids;
      } else {
        sparse_names_[record.id] = ids;
      }
    }
  }

  // Thread indices are dense in files opsight writes, but a damaged file may name any:
  // map them, so a huge index costs one entry, not a huge vector.
  ThreadState& thread_state(uint32_t index) {
    auto [it, inserted] = thread_positions_.try_emplace(index, threads_.size());
    if (inserted) threads_.emplace_back();
    return threads_[it->second];
  }

  void read_thread(const format::ChunkView& chunk, uint64_t chunk_offset) {
    Cursor cursor{chunk.payload};
    auto record = cursor.take<format::ThreadRecordHeader>();
    std::string_view name = cursor.take_bytes(record.name_bytes);
    if (cursor.failed || record.thread_index > kMaxIndex) {
      damage(chunk_offset, "thread chunk is malformed");
      return;
    }
    ThreadState& state = thread_state(record.thread_index);
    state.pid = record.pid;
    state.tid = record.tid;
    state.name = name;
  }

  void read_stats(const format::ChunkView& chunk) {
    Cursor cursor{chunk.payload};
    auto stats = cursor.take<format::SessionStats>();
    if (cursor.failed) return;
    result_.trace.run.events_dropped = stats.events_dropped;
    if (stats.event_cost_ns > 0) event_cost_ns_ = stats.event_cost_ns;
    thread_stats_.clear();  // each stats chunk holds whole counts, not increments
    for (uint64_t i = 0; i < stats.thread_count && !cursor.failed; ++i) {
      auto thread = cursor.take<format::ThreadStats>();
      if (cursor.failed || thread.thread_index > kMaxIndex) break;
      thread_stats_.push_back(thread);
    }
  }

  void fit_clock() {
    if (syncs_.empty()) {
      slope_ = 1.0;
      set_fast_ns_range();
      return;
    }
    const auto& first = syncs_.front();
    const auto& last = syncs_.back();
    base_ticks_ = first.ticks;
    base_ns_ = first.monotonic_ns;
    if (syncs_.size() >= 2 && last.ticks > first.ticks && last.monotonic_ns > first.monotonic_ns) {
      slope_ = (static_cast<double>(last.monotonic_ns) - static_cast<double>(first.monotonic_ns)) /
               static_cast<double>(last.ticks - first.ticks);
    } else {
      slope_ = ticks_per_second_ > 0 ? 1e9 / ticks_per_second_ : 1.0;
    }
    slope_fixed_ = static_cast<int64_t>(std::llround(std::ldexp(std::min(slope_, 32767.0), 48)));
    set_fast_ns_range();
    // How far the line strays from the sync points between the first and the last: the
    // bound on a timestamp's error against CLOCK_MONOTONIC, which every process of the
    // machine shares (so the traces of several processes align within the sum of theirs).
    // (In doubles: a damaged file's sync points may be anywhere in int64.)
    double worst = 0;
    for (const auto& sync : syncs_)
      worst = std::max(worst, std::fabs(static_cast<double>(to_ns(sync.ticks)) -
                                        static_cast<double>(sync.monotonic_ns)));
    if (syncs_.size() >= 3 && worst < 1e15)
      result_.trace.run.extra.emplace_back(
          "clock_max_error_ns", std::to_string(static_cast<int64_t>(std::llround(worst))));
    auto& run = result_.trace.run;
    run.start_unix_ns = first.realtime_ns;
    // Damaged or hostile sync points may hold any values: a difference that does not fit
    // is no offset (and no traced time) rather than an overflow.
    run.has_unix_offset =
        !__builtin_sub_overflow(first.realtime_ns, first.monotonic_ns, &run.unix_offset_ns);
    if (!run.has_unix_offset) run.unix_offset_ns = 0;
    if (__builtin_sub_overflow(last.monotonic_ns, first.monotonic_ns, &run.traced_ns)) {
      run.traced_ns = 0;
    }
  }

  // An overhead from the file's costs and counts (which a damaged file may make NaN,
  // negative or huge), as ns in [0, kMaxOverheadNs]: sums of them cannot overflow.
  static constexpr int64_t kMaxOverheadNs = int64_t{1} << 61;
  static int64_t overhead_ns(double value) {
    if (!(value > 0)) return 0;
    if (value >= static_cast<double>(kMaxOverheadNs)) return kMaxOverheadNs;
    return static_cast<int64_t>(std::llround(value));
  }

  // ns = base_ns + delta_ticks * slope, slope in 16.48 fixed point (exact for slope 1,
  // under 0.1 ns of drift after 10^13 ticks).
  // Clamped to +-2^62 ns (146 years), so that a damaged clock cannot make the sums and
  // differences of timestamps downstream overflow.
  // (Inline: it runs for every timed event. For the deltas whose ns need no clamp, set by
  // set_fast_ns_range() with the clock fit, the product is taken without the clamp's
  // 128-bit comparisons: the same result.)
  __attribute__((always_inline)) int64_t to_ns(uint64_t ticks) const {
    __extension__ using Wide = __int128;
    const auto delta = static_cast<int64_t>(ticks - base_ticks_);
    Wide scaled = (static_cast<Wide>(delta) * slope_fixed_ + (Wide{1} << 47)) >> 48;
    if (static_cast<uint64_t>(delta) - static_cast<uint64_t>(fast_delta_low_) < fast_delta_width_)
        [[likely]]  // base_ns_ + scaled is within the clamp: exact in 64 bits, wrapping
      return static_cast<int64_t>(static_cast<uint64_t>(base_ns_) + static_cast<uint64_t>(scaled));
    Wide ns = base_ns_ + scaled;
    return static_cast<int64_t>(std::clamp(ns, Wide{-kNsLimit}, Wide{kNsLimit}));
  }
  static constexpr int64_t kNsLimit = int64_t{1} << 62;

  // The deltas whose ns need no clamp, [fast_delta_low_, + width), for to_ns to check
  // with one unsigned comparison: a range a little narrower than the exact one (2 ns of
  // margin for the rounding), since outside it to_ns clamps as before. Width 0: none (a
  // damaged file's slope).
  void set_fast_ns_range() {
    __extension__ using Wide = __int128;
    fast_delta_width_ = 0;
    if (slope_fixed_ <= 0) return;
    auto floor_div = [](Wide a, Wide b) { return a / b - ((a % b != 0 && a < 0) ? 1 : 0); };
    auto ceil_div = [](Wide a, Wide b) { return a / b + ((a % b != 0 && a > 0) ? 1 : 0); };
    Wide high = floor_div((Wide{kNsLimit} - base_ns_ - 2) * (Wide{1} << 48), slope_fixed_);
    Wide low = ceil_div((Wide{-kNsLimit} - base_ns_ + 2) * (Wide{1} << 48), slope_fixed_);
    high = std::min<Wide>(high, std::numeric_limits<int64_t>::max());
    low = std::max<Wide>(low, std::numeric_limits<int64_t>::min());
    if (high < low) return;
    fast_delta_low_ = static_cast<int64_t>(low);
    // (one delta short of 2^64 when every delta qualifies: the width fits in 64 bits)
    fast_delta_width_ =
        static_cast<uint64_t>(std::min<Wide>(high - low + 1, std::numeric_limits<uint64_t>::max()));
  }

  __attribute__((always_inline)) trace::TrackId track_of(const ThreadState& state,
                                                         LaneState& lane) {
    if (!lane.has_track) [[unlikely]]
      create_track(state, lane);
    return lane.track;
  }

  void create_track(const ThreadState& state, LaneState& lane) {
    lane.track = lane.key == 0
                     ? result_.trace.thread_track(state.pid, state.tid)
                     : result_.trace.async_track(state.pid, state.tid, lane.key, lane.name);
    lane.has_track = true;
  }

  // The slice columns grow by kSliceRowsAtATime rows at a time (zero-filled by resize():
  // the pages' first touch), and a begin writes its row in place through pointers to the
  // columns' data: nine stores, where nine std::vector appends (SliceTable::add, out of
  // line) cost more instructions than decoding the event. slices_used_ of the rows are
  // slices; trim_slices() cuts the columns to them once the event chunks are decoded,
  // before anything else adds or counts rows.
  static constexpr size_t kSliceRowsAtATime = 1024;
  struct SliceColumnData {
    int64_t* ts = nullptr;
    int64_t* dur = nullptr;
    StringId* name = nullptr;
    StringId* category = nullptr;
    trace::TrackId* track = nullptr;
    uint16_t* depth = nullptr;
    uint16_t* flags = nullptr;
    RowIndex* parent = nullptr;
    uint64_t* span_id = nullptr;
  };

  void resize_slices(size_t rows) {
    trace::SliceTable& slices = result_.trace.slices;
    slices.ts.resize(rows);
    slices.dur.resize(rows);
    slices.name.resize(rows);
    slices.category.resize(rows);
    slices.track.resize(rows);
    slices.depth.resize(rows);
    slices.flags.resize(rows);
    slices.parent.resize(rows);
    slices.span_id.resize(rows);
    columns_ = SliceColumnData{slices.ts.data(),       slices.dur.data(),    slices.name.data(),
                               slices.category.data(), slices.track.data(),  slices.depth.data(),
                               slices.flags.data(),    slices.parent.data(), slices.span_id.data()};
    slices_sized_ = rows;
  }

  // (Up to the reserved capacity, when there is room: past it, the columns move.)
  void grow_slices() {
    const size_t capacity = result_.trace.slices.ts.capacity();
    size_t rows = slices_used_ + kSliceRowsAtATime;
    if (slices_used_ < capacity && rows > capacity) rows = capacity;
    resize_slices(rows);
  }

  void trim_slices() {
    if (slices_sized_ != slices_used_) resize_slices(slices_used_);
  }

  // A begin: its slice (duration 0 until its end), nested in the innermost open one of
  // the lane, and opened there.
  __attribute__((always_inline)) RowIndex begin_slice(OpenSlices& open, int64_t ns, NameIds ids,
                                                      trace::TrackId track, uint64_t span_id) {
    if (slices_used_ == slices_sized_) [[unlikely]]
      grow_slices();
    const auto row = static_cast<RowIndex>(slices_used_++);
    columns_.ts[row] = ns;
    columns_.name[row] = ids.name;
    columns_.category[row] = ids.category;
    columns_.track[row] = track;
    columns_.depth[row] = static_cast<uint16_t>(std::min<size_t>(open.size(), 0xFFFF));
    columns_.parent[row] = open.empty() ? kNoRow : open.innermost();
    columns_.span_id[row] = span_id;
    // (dur and flags: 0 from the resize)
    open.open_nested(row);
    return row;
  }

  // An end: closes the lane's innermost open slice at `ns` (OpenSlices::close_innermost,
  // through the column pointers); its row, or kNoRow when none is open.
  __attribute__((always_inline)) RowIndex end_slice(OpenSlices& open, int64_t ns, bool unfinished) {
    const RowIndex row = open.pop_innermost();
    if (row == kNoRow) return kNoRow;
    columns_.dur[row] = OpenSlices::duration(columns_.ts[row], ns);
    if (unfinished) columns_.flags[row] |= trace::kSliceUnfinished;
    return row;
  }

  // A kTrack event: the thread's next events belong to `key`'s lane. A name for a key that
  // already has a lane means the key now stands for a new task: the old lane is closed.
  void switch_lane(ThreadState& state, uint64_t key, std::string_view name) {
    if (key == 0) {
      state.current_lane = 0;
      return;
    }
    auto [position, inserted] = state.lane_of_key.try_emplace(key, 0);
    if (!inserted && !name.empty()) {
      close_open_spans(state.lanes[position->second], state.lanes[position->second].last_ns);
      inserted = true;
    }
    if (inserted) {
      position->second = state.lanes.size();
      LaneState lane;
      lane.key = key;
      lane.name = name;
      state.lanes.push_back(std::move(lane));
    }
    state.current_lane = position->second;
  }

  // Ends the lane's open spans at `end_ns`, marked unfinished (they had no end).
  void close_open_spans(LaneState& lane, int64_t end_ns) {
    lane.open.close_all_unfinished(result_.trace.slices, end_ns);
    lane.last_instant = kNoRow;
  }

  __attribute__((always_inline)) NameIds name_of(uint32_t id) {
    if (id < names_.size()) [[likely]]
      return names_[id];
    return name_not_dense(id);
  }

  NameIds name_not_dense(uint32_t id) {
    if (auto found = sparse_names_.find(id); found != sparse_names_.end()) return found->second;
    ++unknown_names_;
    return NameIds{result_.trace.intern("<unknown name " + std::to_string(id) + ">"), 0};
  }

  void decode_events(const format::ChunkView& chunk) {
    Cursor cursor{chunk.payload};
    auto header = cursor.take<format::EventsHeader>();
    if (cursor.failed || header.thread_index > kMaxIndex ||
        (chunk.payload.size() - sizeof(header)) / sizeof(Slot) < header.slot_count) {
      damage(chunk.payload_offset - sizeof(format::ChunkHeader), "events chunk is malformed");
      return;
    }
    ThreadState& state = thread_state(header.thread_index);
    trace::Trace& trace = result_.trace;
    native::SlotFileContext file{header.thread_index, !syncs_.empty(), base_ticks_, span_salt()};
    LaneState* lane = &state.lanes[state.current_lane];
    // The thread's and the lane's clocks and the thread's event count, kept in locals (in
    // registers: the columns' stores cannot alias them) and stored back before a call that
    // reads them (a flow end, a lane switch) and at the chunk's end.
    int64_t thread_last_ns = state.last_ns;
    int64_t lane_last_ns = lane->last_ns;
    uint64_t events = 0;
    auto store_clocks = [&]() __attribute__((always_inline)) {
      state.last_ns = thread_last_ns;
      lane->last_ns = lane_last_ns;
    };
    uint32_t decoded = native::decode_slots(
        chunk.payload.data() + sizeof(header), header.slot_count, state.slots,
        file, [&](const native::SlotEvent& event) __attribute__((always_inline)) {
          ++events;
          // One dispatch per event: each timed kind moves the thread's and lane's clocks.
          auto now = [&]() __attribute__((always_inline)) {
            int64_t ns = to_ns(event.ticks);
            thread_last_ns = std::max(thread_last_ns, ns);
            lane_last_ns = std::max(lane_last_ns, ns);
            return ns;
          };
          if (event.malformed) [[unlikely]] {
            ++unknown_slots_;
            if (event.kind != SlotKind::kArg && event.kind != SlotKind::kSpanContext) now();
            return;
          }
          switch (event.kind) {
            case SlotKind::kBegin: {
              int64_t ns = now();
              RowIndex row = begin_slice(lane->open, ns, name_of(event), track_of(state, *lane),
                                         event.span_id);
              lane->last_instant = kNoRow;
              if (!lane->flows_into_next.empty()) [[unlikely]] {
                for (uint64_t flow : lane->flows_into_next)
                  flow_ends_.push_back(FlowEndEvent{flow, ns, row, format::kFlowIn});
                lane->flows_into_next.clear();
              }
              return;
            }
            case SlotKind::kEnd: {
              int64_t ns = now();
              RowIndex row = end_slice(lane->open, ns, event.unfinished);
              if (row == kNoRow) {
                ++unmatched_ends_;
              } else if (event.late) [[unlikely]] {
                ++late_ends_;
              }
              lane->last_instant = kNoRow;
              return;
            }
            case SlotKind::kSpanId:
            case SlotKind::kSpanContext:
              bind_span_identity(*lane, event);
              return;
            case SlotKind::kArg:
              decode_arg(*lane, event);
              return;
            case SlotKind::kTrack:
              store_clocks();
              switch_lane(state, event.id, event.text);
              lane = &state.lanes[state.current_lane];
              lane_last_ns = lane->last_ns;
              return;
            case SlotKind::kFlow:
              store_clocks();
              bind_flow(state, *lane, event);
              return;
            case SlotKind::kInstant: {
              int64_t ns = now();
              NameIds ids = name_of(event);
              auto scope = event.detail <= static_cast<uint8_t>(trace::InstantScope::kGlobal)
                               ? static_cast<trace::InstantScope>(event.detail)
                               : trace::InstantScope::kThread;
              lane->last_instant =
                  trace.instants.add(ns, ids.name, ids.category, track_of(state, *lane), scope);
              return;
            }
            case SlotKind::kCounter: {
              int64_t ns = now();
              trace.counters.add(ns, trace.counter_track(state.pid, event.text), event.value);
              return;
            }
            case SlotKind::kAsyncBegin:
            case SlotKind::kAsyncEnd:
              add_async_event(state, event, now());
              return;
            default:
              return;
          }
        });
    store_clocks();
    state.events += events;
    if (decoded < header.slot_count)
      damage(chunk.payload_offset + sizeof(header) + size_t{decoded} * sizeof(Slot),
             "event payload runs past its chunk");
  }

  // A kSpanId or kSpanContext event: the innermost open span of the lane takes the id, or
  // joins the remote trace; one bound to the root (opsight::join_session_trace) is the
  // lane's outermost open span's, once.
  __attribute__((always_inline)) void bind_span_identity(LaneState& lane,
                                                         const native::SlotEvent& event) {
    if (lane.open.empty()) {
      ++contexts_without_span_;
      return;
    }
    trace::Trace& trace = result_.trace;
    RowIndex row = lane.open.innermost();
    if (event.kind == SlotKind::kSpanId) {
      columns_.span_id[row] = event.id;
      columns_.flags[row] |= trace::kSliceExplicitSpanId;
    } else if (native::binds_to_root(event)) {
      RowIndex root = lane.open.outermost();
      if (root != lane.in_session_trace) {
        lane.in_session_trace = root;
        trace.span_contexts.add(root, event.trace_id, 0, event.detail);
      }
    } else {
      trace.span_contexts.add(row, event.trace_id, event.id, event.detail);
    }
  }

  // A kFlow event: an end bound to the lane's innermost open span (or its next span), or,
  // in the model writer's form, to the thread's last async begin.
  void bind_flow(ThreadState& state, LaneState& lane, const native::SlotEvent& event) {
    if (event.detail & format::kFlowOnAsyncBegin) {
      uint8_t direction = event.detail & ~format::kFlowOnAsyncBegin;
      if (state.last_async_begin == FlowEndEvent::kNoAsyncBegin || direction < format::kFlowOut ||
          direction > format::kFlowStep) {
        ++flow_ends_without_span_;
        return;
      }
      flow_ends_.push_back(
          FlowEndEvent{event.id, state.last_ns, static_cast<RowIndex>(state.last_async_begin),
                       static_cast<uint8_t>(direction | FlowEndEvent::kOnAsyncBegin)});
      return;
    }
    bind_flow_end(lane, event.id, event.detail, state.last_ns);
  }

  __attribute__((always_inline)) NameIds name_of(const native::SlotEvent& event) {
    return event.name_id != 0 || event.text.data() == nullptr
               ? name_of(event.name_id)
               : NameIds{result_.trace.intern(event.text), 0};
  }

  void add_async_event(ThreadState& state, const native::SlotEvent& event, int64_t ns) {
    AsyncEvent async;
    async.pid = state.pid;
    async.id = event.id;
    async.ns = ns;
    async.order = async_events_.size();
    async.begin = event.kind == SlotKind::kAsyncBegin;
    async.unfinished = event.unfinished;
    if (async.begin) {
      NameIds ids = name_of(event);
      async.name = ids.name;
      async.category = ids.category;
      async.span_id = event.span_id;
      state.last_async_begin = async.order;
    }
    async_events_.push_back(async);
  }

  // An argument's key, interned: the last key is kept, since a thread's args mostly repeat
  // their keys (a byte comparison, where interning hashes the key and probes the table).
  StringId arg_key(std::string_view text) {
    if (has_last_arg_key_ && text == last_arg_key_) return last_arg_key_id_;
    last_arg_key_id_ = result_.trace.intern(text);
    last_arg_key_.assign(text);
    has_last_arg_key_ = true;
    return last_arg_key_id_;
  }

  void decode_arg(LaneState& lane, const native::SlotEvent& event) {
    trace::Trace& trace = result_.trace;
    trace::ArgValue value = event.arg;
    if (value.type == trace::ArgType::kString)
      value.string_value = trace.intern(event.string_value);
    StringId key = arg_key(event.text);
    if (lane.last_instant != kNoRow) {
      trace.instant_args.add(lane.last_instant, key, value);
    } else if (!lane.open.empty()) {
      trace.slice_args.add(lane.open.innermost(), key, value);
    } else {
      ++orphan_args_;
    }
  }

  // A kFlow event: binds its end of the flow to the innermost open span of the lane (or,
  // for kFlowIntoNext, to the lane's next span).
  void bind_flow_end(LaneState& lane, uint64_t flow, uint8_t direction, int64_t ns) {
    if (direction == format::kFlowIntoNext) {
      lane.flows_into_next.push_back(flow);
      return;
    }
    if (direction < format::kFlowOut || direction > format::kFlowStep) {
      ++unknown_slots_;
      return;
    }
    if (lane.open.empty()) {
      ++flow_ends_without_span_;
      return;
    }
    flow_ends_.push_back(FlowEndEvent{flow, ns, lane.open.innermost(), direction});
  }

  // Pairs the async begins and ends of every thread: per (process, id), in time order, an
  // end closes the innermost open begin of that id. Each (process, id) gets its own track,
  // named after its first span; slices nest on it by the same stack.
  void build_async_slices(int64_t trace_end_ns) {
    if (async_events_.empty()) return;
    trace::Trace& trace = result_.trace;
    std::stable_sort(async_events_.begin(), async_events_.end(),
                     [](const AsyncEvent& a, const AsyncEvent& b) {
                       if (a.pid != b.pid) return a.pid < b.pid;
                       if (a.id != b.id) return a.id < b.id;
                       if (a.ns != b.ns) return a.ns < b.ns;
                       return a.order < b.order;
                     });
    row_of_async_begin_.assign(async_events_.size(), kNoRow);
    size_t first = 0;
    while (first < async_events_.size()) {
      size_t last = first;
      while (last < async_events_.size() && async_events_[last].pid == async_events_[first].pid &&
             async_events_[last].id == async_events_[first].id)
        ++last;
      std::optional<trace::TrackId> track;
      OpenSlices open;
      for (size_t index = first; index < last; ++index) {
        const AsyncEvent& event = async_events_[index];
        if (event.begin) {
          if (!track) track = trace.process_async_track(event.pid, event.id, trace.str(event.name));
          RowIndex row =
              trace.slices.add(event.ns, 0, event.name, event.category, *track, 0, event.span_id);
          open.open(trace.slices, row, /*fill_nesting=*/true);
          row_of_async_begin_[event.order] = row;
        } else if (RowIndex row = open.close_innermost(trace.slices, event.ns); row == kNoRow) {
          ++unmatched_async_ends_;
        } else if (event.unfinished) {
          trace.slices.flags[row] |= trace::kSliceUnfinished;
        }
      }
      open.close_all_unfinished(trace.slices, trace_end_ns);  // never ended: to the trace's end
      first = last;
    }
  }

  // Joins the flow ends of every thread: per flow id, its departures (kFlowOut, then the
  // kFlowStep stops in time order) form a chain, and each arrival (kFlowIn) links from the
  // chain's last stop. Ends whose other end is not in this file (a flow to or from another
  // process) stay in Trace::open_flow_ends, for append_trace to join.
  void build_flows() {
    if (flow_ends_.empty()) return;
    trace::Trace& trace = result_.trace;
    for (FlowEndEvent& end : flow_ends_)
      if (end.direction & FlowEndEvent::kOnAsyncBegin) {
        end.direction &= static_cast<uint8_t>(~FlowEndEvent::kOnAsyncBegin);
        end.slice =
            end.slice < row_of_async_begin_.size() ? row_of_async_begin_[end.slice] : kNoRow;
      }
    std::erase_if(flow_ends_, [](const FlowEndEvent& end) { return end.slice == kNoRow; });
    // Group the ends by id with an open-addressing table (first end of each id) and a chain
    // through the others: linear time, where a sort of 2M ends cost more than the rest of
    // the read. Groups are joined in the order of their first end in the file.
    constexpr uint32_t kNone = ~uint32_t{0};
    const size_t count = flow_ends_.size();
    // Salted per process, so that a file cannot choose ids that collide in the tables.
    static const uint64_t hash_salt =
        (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    // Partitioned by the hash's top byte first (one sequential scatter of (id, index)), so
    // that each partition's table fits in the cache: a single table over every end missed
    // the cache on nearly every probe.
    struct IdAndIndex {
      uint64_t id;
      uint32_t index;
    };
    constexpr size_t kPartitions = 256;
    auto partition_of = [](uint64_t hash) { return static_cast<size_t>(hash >> 56); };
    std::vector<uint32_t> partition_begin(kPartitions + 1, 0);
    for (const FlowEndEvent& end : flow_ends_)
      ++partition_begin[partition_of(trace::mix64(end.id ^ hash_salt)) + 1];
    for (size_t partition = 0; partition < kPartitions; ++partition)
      partition_begin[partition + 1] += partition_begin[partition];
    std::vector<IdAndIndex> partitioned(count);
    {
      std::vector<uint32_t> cursor(partition_begin.begin(), partition_begin.end() - 1);
      for (uint32_t index = 0; index < count; ++index) {
        uint64_t id = flow_ends_[index].id;
        partitioned[cursor[partition_of(trace::mix64(id ^ hash_salt))]++] = IdAndIndex{id, index};
      }
    }
    struct IdGroup {
      uint64_t id;
      uint32_t first;  // kNone: an empty slot
      uint32_t last;
    };
    std::vector<IdGroup> table;
    std::vector<uint32_t> next_of(count, kNone);
    std::vector<uint8_t> is_first(count, 0);
    for (size_t partition = 0; partition < kPartitions; ++partition) {
      const uint32_t begin = partition_begin[partition];
      const uint32_t end = partition_begin[partition + 1];
      if (begin == end) continue;
      size_t capacity = 16;
      while (capacity < size_t{end - begin} * 2) capacity *= 2;
      const size_t mask = capacity - 1;
      table.assign(capacity, IdGroup{0, kNone, kNone});
      for (uint32_t position_in = begin; position_in < end; ++position_in) {
        auto [id, index] = partitioned[position_in];
        size_t position = trace::mix64(id ^ hash_salt) & mask;  // low bits; the top chose it
        while (table[position].first != kNone && table[position].id != id)
          position = (position + 1) & mask;
        IdGroup& group = table[position];
        if (group.first == kNone) {
          group = IdGroup{id, index, index};
          is_first[index] = 1;
        } else {  // (the scatter kept file order within a partition: index grows)
          next_of[group.last] = index;
          group.last = index;
        }
      }
    }
    std::vector<FlowEndEvent> group;
    for (uint32_t index = 0; index < count; ++index) {
      if (!is_first[index]) continue;
      uint32_t second = next_of[index];
      const FlowEndEvent& head = flow_ends_[index];
      if (second != kNone && next_of[second] == kNone) {  // the usual case: one out, one in
        const FlowEndEvent& other = flow_ends_[second];
        const FlowEndEvent* out = head.direction == format::kFlowOut    ? &head
                                  : other.direction == format::kFlowOut ? &other
                                                                        : nullptr;
        const FlowEndEvent* in = out == &head ? &other : &head;
        if (out != nullptr && in->direction == format::kFlowIn) {
          trace.flows.add(out->slice, in->slice, head.id);
          continue;
        }
      }
      group.clear();
      for (uint32_t member = index; member != kNone; member = next_of[member])
        group.push_back(flow_ends_[member]);
      join_flow_group(group);
    }
  }

  // The ends of one flow id, in any order. In time order, each departure (out or step)
  // becomes the flow's current stop and each arrival (in or step) links from it; an arrival
  // before any departure (a kFlow end carries only its thread's last time, so a receiver
  // can seem early) links from the first departure. Ends with nothing to link stay open.
  void join_flow_group(std::vector<FlowEndEvent>& ends) {
    trace::Trace& trace = result_.trace;
    std::stable_sort(ends.begin(), ends.end(),
                     [](const FlowEndEvent& a, const FlowEndEvent& b) { return a.ns < b.ns; });
    const FlowEndEvent* first_departure = nullptr;
    for (const FlowEndEvent& end : ends)
      if (end.direction != format::kFlowIn) {
        first_departure = &end;
        break;
      }
    RowIndex from = kNoRow;
    std::vector<bool> departed_linked(ends.size(), false);
    size_t from_index = 0;
    for (size_t index = 0; index < ends.size(); ++index) {
      const FlowEndEvent& end = ends[index];
      if (end.direction != format::kFlowOut) {  // an arrival
        RowIndex source = from;
        size_t source_index = from_index;
        if (source == kNoRow && first_departure != nullptr && first_departure != &end) {
          source = first_departure->slice;
          source_index = static_cast<size_t>(first_departure - ends.data());
        }
        if (source != kNoRow) {
          trace.flows.add(source, end.slice, end.id);
          departed_linked[source_index] = true;
        } else {
          trace.open_flow_ends.push_back({end.slice, end.id, false});
        }
      }
      if (end.direction != format::kFlowIn) {
        from = end.slice;
        from_index = index;
      }
    }
    for (size_t index = 0; index < ends.size(); ++index)
      if (ends[index].direction != format::kFlowIn && !departed_linked[index] &&
          ends[index].direction == format::kFlowOut)
        trace.open_flow_ends.push_back({ends[index].slice, ends[index].id, true});
  }

  // The model writer's run-info entries for what the event streams cannot carry
  // (native_writer.cc, append_layout_info): "process.<pid>.name|parent_pid|sort_index|label",
  // "thread.<pid>.<tid>.sort_index", "async_track.<pid>.<key>.name|sort_index",
  // "counter_series.<pid>.<name>" = group \x1f series.
  void apply_layout_entries() {
    trace::Trace& trace = result_.trace;
    auto to_int = [](std::string_view text) {
      return std::strtoll(std::string(text).c_str(), nullptr, 10);
    };
    for (const auto& [key, value] : layout_entries_) {
      std::string_view rest = key;
      if (rest.starts_with("process.")) {
        rest.remove_prefix(8);
        size_t dot = rest.find('.');
        if (dot == std::string_view::npos) continue;
        trace::Process& process = trace.process(to_int(rest.substr(0, dot)));
        std::string_view field = rest.substr(dot + 1);
        if (field == "name") process.name = trace.intern(value);
        if (field == "parent_pid") process.parent_pid = to_int(value);
        if (field == "sort_index") process.sort_index = to_int(value);
        if (field == "label") process.labels.push_back(trace.intern(value));
      } else if (rest.starts_with("thread.")) {
        rest.remove_prefix(7);
        size_t first_dot = rest.find('.');
        size_t second_dot = rest.find('.', first_dot == std::string_view::npos ? 0 : first_dot + 1);
        if (second_dot == std::string_view::npos || rest.substr(second_dot + 1) != "sort_index")
          continue;
        trace::TrackId track =
            trace.thread_track(to_int(rest.substr(0, first_dot)),
                               to_int(rest.substr(first_dot + 1, second_dot - first_dot - 1)));
        trace.tracks[track].sort_index = to_int(value);
      } else if (rest.starts_with("counter_series.")) {
        rest.remove_prefix(15);
        size_t dot = rest.find('.');
        size_t separator = value.find('\x1f');
        if (dot == std::string_view::npos || separator == std::string::npos) continue;
        uint32_t counter = trace.counter_track(to_int(rest.substr(0, dot)), rest.substr(dot + 1));
        trace.counter_tracks[counter].group = trace.intern(value.substr(0, separator));
        trace.counter_tracks[counter].series = trace.intern(value.substr(separator + 1));
      }
    }
  }

  // "async_track.<pid>.<key>.name|sort_index": applied once the async tracks exist.
  void apply_async_track_layout() {
    trace::Trace& trace = result_.trace;
    for (const auto& [key, value] : layout_entries_) {
      std::string_view rest = key;
      if (!rest.starts_with("async_track.")) continue;
      rest.remove_prefix(12);
      size_t first_dot = rest.find('.');
      size_t second_dot = rest.find('.', first_dot == std::string_view::npos ? 0 : first_dot + 1);
      if (second_dot == std::string_view::npos) continue;
      int64_t pid = std::strtoll(std::string(rest.substr(0, first_dot)).c_str(), nullptr, 10);
      uint64_t async_key = std::strtoull(
          std::string(rest.substr(first_dot + 1, second_dot - first_dot - 1)).c_str(), nullptr, 10);
      std::string_view field = rest.substr(second_dot + 1);
      for (trace::Track& track : trace.tracks) {
        if (track.kind != trace::TrackKind::kAsync || track.pid != pid ||
            track.async_key != async_key)
          continue;
        if (field == "name") track.name = trace.intern(value);
        if (field == "sort_index") track.sort_index = std::strtoll(value.c_str(), nullptr, 10);
      }
    }
  }

  uint64_t span_salt() const { return native::span_id_salt(result_.trace.run.trace_id); }

  void finish_threads() {
    trace::Trace& trace = result_.trace;
    for (auto& state : threads_) {
      // Spans still open when the recording ended: close them at the thread's last event.
      bool has_async_track = false;
      for (LaneState& lane : state.lanes) {
        close_open_spans(lane, state.last_ns);
        flows_into_next_unbound_ += lane.flows_into_next.size();
        has_async_track = has_async_track || (lane.key != 0 && lane.has_track);
      }
      // The thread's own track holds its overhead and counts, also when all its spans ran
      // on async lanes.
      if (has_async_track) track_of(state, state.lanes[0]);
      LaneState& own = state.lanes[0];
      if (own.has_track && !state.name.empty())
        trace.tracks[own.track].name = trace.intern(state.name);
    }
    int64_t total_overhead = 0;
    // Without the footer (a crash), every thread's overhead is estimated from the events
    // seen; the footer, or else the last kDropsSoFar, adds drops and slow-path time.
    for (auto& state : threads_) {
      if (!state.lanes[0].has_track) continue;
      trace::Track& track = trace.tracks[state.lanes[0].track];
      track.events_recorded = state.events;
      track.overhead_ns = overhead_ns(static_cast<double>(state.events) * event_cost_ns_);
    }
    for (const auto& stats : thread_stats_) {
      auto position = thread_positions_.find(stats.thread_index);
      if (position == thread_positions_.end() || !threads_[position->second].lanes[0].has_track)
        continue;
      trace::Track& track = trace.tracks[threads_[position->second].lanes[0].track];
      track.events_dropped = stats.events_dropped;
      track.overhead_ns = overhead_ns(static_cast<double>(track.events_recorded) * event_cost_ns_ +
                                      static_cast<double>(stats.slow_path_ticks) * slope_);
    }
    for (const auto& track : trace.tracks) {
      total_overhead = std::min(total_overhead + track.overhead_ns, kMaxOverheadNs);
    }
    trace.run.overhead_ns = total_overhead;
    apply_layout_entries();
    if (trace.run.pid != 0) {
      trace::Process& process = trace.process(trace.run.pid);
      if (!process_name_.empty()) process.name = trace.intern(process_name_);
      if (parent_pid_ != 0) process.parent_pid = parent_pid_;
    }
    auto note = [&](const char* key, uint64_t count) {
      if (count > 0) trace.run.extra.emplace_back(key, std::to_string(count));
    };
    note("unmatched_ends", unmatched_ends_);
    note("unknown_names", unknown_names_);
    note("undecodable_slots", unknown_slots_);
    note("orphan_args", orphan_args_);
    note("ends_written_late_after_drops", late_ends_);
    if (!source_format_.empty()) trace.run.extra.emplace_back("converted_from", source_format_);
  }

  std::string_view file_;
  std::function<void(const char*)> done_before_;
  bool defer_events_checks_ = true;
  SliceColumnData columns_;   // the slice columns' data while the event chunks are decoded
  std::string last_arg_key_;  // arg_key()'s cache
  StringId last_arg_key_id_ = 0;
  bool has_last_arg_key_ = false;
  size_t slices_used_ = 0;   // rows begun
  size_t slices_sized_ = 0;  // rows the columns hold
  ReadResult result_;
  std::vector<format::ClockSync> syncs_;
  std::vector<NameIds> names_;
  std::unordered_map<uint32_t, NameIds> sparse_names_;  // ids far beyond the dense ones
  static constexpr size_t kDenseNameGrowth = 65'536;
  std::vector<ThreadState> threads_;
  std::unordered_map<uint32_t, size_t> thread_positions_;
  std::vector<format::ThreadStats> thread_stats_;
  double ticks_per_second_ = 0;
  double event_cost_ns_ = 0;
  double slope_ = 1.0;
  int64_t slope_fixed_ = int64_t{1} << 48;
  int64_t fast_delta_low_ = 0;
  uint64_t fast_delta_width_ = 0;
  uint64_t base_ticks_ = 0;
  int64_t base_ns_ = 0;
  uint64_t unmatched_ends_ = 0, unknown_names_ = 0, unknown_slots_ = 0, orphan_args_ = 0;
  uint64_t late_ends_ = 0;
  uint64_t unmatched_async_ends_ = 0, flow_ends_without_span_ = 0;
  uint64_t contexts_without_span_ = 0;
  std::vector<AsyncEvent> async_events_;
  std::vector<FlowEndEvent> flow_ends_;
  std::vector<RowIndex> row_of_async_begin_;  // by AsyncEvent::order
  std::string source_format_;
  std::vector<std::pair<std::string, std::string>> layout_entries_;
  // Far more processes, threads and counters than any recording has: a damaged or hostile
  // file cannot make the reader spend its time on them.
  static constexpr size_t kMaxLayoutEntries = 100'000;
  uint64_t layout_entries_ignored_ = 0;
  uint64_t flows_into_next_unbound_ = 0;
  std::string process_name_;
  int64_t parent_pid_ = 0;
};

}  // namespace

ReadResult read_native(std::string_view bytes) { return NativeDecoder(bytes).decode(); }

// The index of a file that has none (or a damaged one), by a walk over its chunks: each
// chunk's header and checksum, and the slot headers of kEvents chunks (no names, no model).
static std::optional<std::vector<format::IndexEntry>> scan_native_index(
    std::string_view bytes, std::optional<Diagnostic>* damage) {
  if (bytes.size() < sizeof(format::FileHeader) ||
      std::memcmp(bytes.data(), format::kFileMagic, sizeof(format::kFileMagic)) != 0)
    return std::nullopt;
  format::FileHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  uint64_t offset = std::max<uint64_t>(header.header_bytes, sizeof(format::FileHeader));
  format::IndexBuilder builder;
  while (offset < bytes.size()) {
    std::string problem;
    auto chunk = format::read_chunk(bytes, offset, &problem);
    if (!chunk) {
      if (damage)
        *damage =
            Diagnostic{problem + "; the " + std::to_string(offset) + " bytes before it were read",
                       offset, true};
      break;
    }
    if (chunk->type == format::ChunkType::kEvents &&
        chunk->payload.size() >= sizeof(format::EventsHeader)) {
      format::EventsHeader events;
      std::memcpy(&events, chunk->payload.data(), sizeof(events));
      uint32_t slots = static_cast<uint32_t>(std::min<size_t>(
          events.slot_count, (chunk->payload.size() - sizeof(events)) / sizeof(Slot)));
      builder.add_events(offset, events.thread_index, chunk->payload.data() + sizeof(events),
                         slots);
    } else {
      builder.add_other(offset, chunk->type, chunk->payload);
    }
    offset = chunk->payload_offset + chunk->payload.size();
  }
  return builder.entries();
}

ReadResult read_native(std::string_view bytes, const TimeWindow& window) {
  std::string problem;
  if (auto index = format::read_index(bytes, &problem)) {
    NativeDecoder decoder(bytes);
    if (decoder.decode_window(*index, window, "read", std::nullopt)) return decoder.take_result();
    problem = "the index does not match the file's chunks";
  }
  std::optional<Diagnostic> damage;
  auto scanned = scan_native_index(bytes, &damage);
  if (!scanned) return NativeDecoder(bytes).decode();  // not an opsight file: its error
  NativeDecoder decoder(bytes);
  decoder.decode_window(*scanned, window, "rebuilt by a scan: " + problem, damage);
  return decoder.take_result();
}

ReadResult read_native_dropping_input(std::string_view bytes,
                                      const std::function<void(const char*)>& done_before) {
  return NativeDecoder(bytes, done_before).decode();
}

}  // namespace opsight::io
