#include "io/native/native_tail.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "format/chunk_codec.hpp"
#include "io/native/derived_span_id.hpp"
#include "io/native/slot_decoder.hpp"
#include "opsight/internal/native_layout.hpp"

namespace opsight::io {

namespace {

using format::Slot;
using format::SlotKind;

template <typename T>
bool take(std::string_view bytes, size_t& position, T* value) {
  if (bytes.size() - position < sizeof(T) || position > bytes.size()) return false;
  std::memcpy(value, bytes.data() + position, sizeof(T));
  position += sizeof(T);
  return true;
}

bool take_bytes(std::string_view bytes, size_t& position, size_t count, std::string_view* out) {
  if (position > bytes.size() || bytes.size() - position < count) return false;
  *out = bytes.substr(position, count);
  position += count;
  return true;
}

}  // namespace

std::optional<std::string> scan_file_clock(const std::string& path, FileClock* clock) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return path + ": cannot open: " + std::strerror(errno);
  format::FileHeader header{};
  if (std::fread(&header, 1, sizeof(header), file) != sizeof(header) ||
      std::memcmp(header.magic, format::kFileMagic, sizeof(format::kFileMagic)) != 0) {
    std::fclose(file);
    return path + ": not an opsight file (bad magic)";
  }
  uint64_t offset = std::max<uint64_t>(header.header_bytes, sizeof(header));
  format::ChunkHeader chunk{};
  while (std::fseek(file, static_cast<long>(offset), SEEK_SET) == 0 &&
         std::fread(&chunk, 1, sizeof(chunk), file) == sizeof(chunk) &&
         chunk.payload_bytes <= format::kMaxChunkPayload) {
    if (chunk.type == static_cast<uint32_t>(format::ChunkType::kClockSync)) {
      format::ClockSync sync{};
      for (uint32_t read = 0; read + sizeof(sync) <= chunk.payload_bytes; read += sizeof(sync)) {
        if (std::fread(&sync, 1, sizeof(sync), file) != sizeof(sync)) break;
        if (!clock->found) clock->first = sync;
        clock->last = sync;
        clock->found = true;
      }
    }
    offset += sizeof(chunk) + chunk.payload_bytes;
  }
  std::fclose(file);
  return std::nullopt;
}

bool NativeTail::poll(const TailVisitor& visitor) {
  std::FILE* file = std::fopen(path_.c_str(), "rb");
  if (file == nullptr) {
    error_ = path_ + ": cannot open: " + std::strerror(errno);
    return false;
  }
  // From the next chunk to the end of what is written now, a window at a time: each pass
  // consumes the window's whole chunks; one that does not fit doubles the window (up to a
  // chunk's largest size), one cut short by the writer waits for the next poll().
  std::string data;
  size_t window = window_bytes_;
  constexpr size_t kLargestChunk = format::kMaxChunkPayload + sizeof(format::ChunkHeader);
  bool ok = true;
  while (std::fseek(file, static_cast<long>(offset_), SEEK_SET) == 0) {
    data.resize(window);
    const size_t got = std::fread(data.data(), 1, window, file);
    data.resize(got);
    if (got == 0) break;
    auto used = consume(data, visitor);
    if (!used) {
      ok = false;
      break;
    }
    offset_ += *used;
    if (got < window) break;  // the end of what is written
    if (*used == 0) {
      if (window >= kLargestChunk + sizeof(format::FileHeader)) break;  // damage: stop here
      window *= 2;
    }
  }
  std::fclose(file);
  return ok;
}

bool NativeTail::feed(std::string_view bytes, const TailVisitor& visitor) {
  auto used = consume(bytes, visitor);
  if (used) offset_ += *used;
  return used.has_value();
}

std::optional<size_t> NativeTail::consume(std::string_view data, const TailVisitor& visitor) {
  size_t position = 0;
  if (!header_read_) {
    if (data.size() < sizeof(format::FileHeader)) return 0;  // not written yet
    format::FileHeader header;
    std::memcpy(&header, data.data(), sizeof(header));
    if (std::memcmp(header.magic, format::kFileMagic, sizeof(format::kFileMagic)) != 0 ||
        header.version > format::kFormatVersion) {
      error_ = path_ + ": not an opsight file this reader knows";
      return std::nullopt;
    }
    position = std::max<size_t>(header.header_bytes, sizeof(format::FileHeader));
    header_read_ = true;
  }
  // read_chunk validates a chunk against a whole file: give it our window with the
  // offsets it expects (a chunk cut short is simply not read yet).
  while (position < data.size()) {
    std::string problem;
    auto chunk = format::read_chunk(data, position, &problem);
    if (!chunk) break;
    read_chunk_payload(static_cast<uint32_t>(chunk->type), chunk->payload, visitor);
    position = chunk->payload_offset + chunk->payload.size();
  }
  return position;
}

void NativeTail::read_chunk_payload(uint32_t type, std::string_view payload,
                                    const TailVisitor& visitor) {
  size_t position = 0;
  switch (static_cast<format::ChunkType>(type)) {
    case format::ChunkType::kRunInfo: {
      uint32_t count = 0;
      if (!take(payload, position, &count)) return;
      for (uint32_t i = 0; i < count; ++i) {
        uint32_t key_length = 0, value_length = 0;
        std::string_view key, value;
        if (!take(payload, position, &key_length) ||
            !take_bytes(payload, position, key_length, &key) ||
            !take(payload, position, &value_length) ||
            !take_bytes(payload, position, value_length, &value))
          return;
        run_info_.emplace_back(key, value);
        if (key == "event_cost_ns") {
          double parsed = std::strtod(std::string(value).c_str(), nullptr);
          if (parsed > 0) event_cost_ns_ = parsed;
        }
        if (key == "ticks_per_second") {
          double parsed = std::strtod(std::string(value).c_str(), nullptr);
          if (parsed > 0) ticks_per_second_ = parsed;
          clock_slope_stale_ = true;
        } else if (key == "trace_id" && value.size() == 32) {
          uint64_t high = std::strtoull(std::string(value.substr(0, 16)).c_str(), nullptr, 16);
          uint64_t low = std::strtoull(std::string(value.substr(16)).c_str(), nullptr, 16);
          trace_id_ = {high, low};
          span_salt_ = native::span_id_salt(trace_id_);
        }
      }
      return;
    }
    case format::ChunkType::kClockSync: {
      if (clock_fixed_) return;  // use_clock() gave the whole file's line
      format::ClockSync sync;
      while (take(payload, position, &sync)) {
        if (!has_sync_) {
          first_sync_ = sync;
          first_sync_ticks_ = sync.ticks;
          has_sync_ = true;
        }
        last_sync_ = sync;
        clock_slope_stale_ = true;
      }
      return;
    }
    case format::ChunkType::kNames:
      while (position < payload.size()) {
        format::NameRecordHeader record;
        std::string_view name, category, source;
        if (!take(payload, position, &record) ||
            !take_bytes(payload, position, record.name_bytes, &name) ||
            !take_bytes(payload, position, record.category_bytes, &category) ||
            !take_bytes(payload, position, record.file_bytes, &source) || record.id > (1u << 24))
          return;
        if (record.id >= names_.size()) names_.resize(size_t{record.id} + 1);
        names_[record.id] = Name{std::string(name), std::string(category)};
      }
      return;
    case format::ChunkType::kThread: {
      format::ThreadRecordHeader record;
      std::string_view name;
      if (take(payload, position, &record)) {
        ThreadState& thread = threads_[record.thread_index];
        thread.pid = record.pid;
        thread.tid = record.tid;
        if (take_bytes(payload, position, record.name_bytes, &name)) thread.name = name;
      }
      return;
    }
    case format::ChunkType::kEvents:
      read_events(payload, visitor);
      return;
    case format::ChunkType::kStats:
    case format::ChunkType::kDropsSoFar: {
      format::SessionStats stats;
      if (take(payload, position, &stats)) {
        events_dropped_ = stats.events_dropped;
        if (stats.event_cost_ns > 0) event_cost_ns_ = stats.event_cost_ns;
        // Each stats chunk holds the totals so far: the latest one replaces the sum.
        uint64_t slow_ticks = 0;
        format::ThreadStats thread{};
        thread_stats_.clear();
        for (uint64_t i = 0; i < stats.thread_count && take(payload, position, &thread); ++i) {
          slow_ticks += thread.slow_path_ticks;
          thread_stats_.push_back(thread);
        }
        slow_path_ticks_ = slow_ticks;
      }
      if (static_cast<format::ChunkType>(type) == format::ChunkType::kStats) finished_ = true;
      return;
    }
    default:
      return;
  }
}

int64_t NativeTail::unix_ns(uint64_t ticks) const {
  if (!has_sync_) return static_cast<int64_t>(static_cast<double>(ticks) * 1e9 / ticks_per_second_);
  // The line through the first and the latest sync (the whole-file reader's, so far).
  if (clock_slope_stale_) {
    double slope = 1e9 / ticks_per_second_;
    if (last_sync_.ticks > first_sync_.ticks && last_sync_.monotonic_ns > first_sync_.monotonic_ns)
      slope = static_cast<double>(last_sync_.monotonic_ns - first_sync_.monotonic_ns) /
              static_cast<double>(last_sync_.ticks - first_sync_.ticks);
    // The reader's arithmetic: a 48-bit fixed-point slope, rounded to the nearest ns.
    clock_slope_fixed_ =
        static_cast<int64_t>(std::llround(std::ldexp(std::min(slope, 32767.0), 48)));
    clock_slope_stale_ = false;
  }
  __extension__ using Wide = __int128;
  const int64_t slope_fixed = clock_slope_fixed_;
  auto delta = static_cast<Wide>(static_cast<int64_t>(ticks - first_sync_.ticks));
  Wide ns = first_sync_.monotonic_ns + ((delta * slope_fixed + (Wide{1} << 47)) >> 48);
  return static_cast<int64_t>(ns) + (first_sync_.realtime_ns - first_sync_.monotonic_ns);
}

std::string_view NativeTail::name_of(const OpenSpan& span, std::string& unknown) const {
  if (span.named_inline) return span.inline_name;
  if (span.name < names_.size()) return names_[span.name].name;
  unknown = "<unknown name " + std::to_string(span.name) + ">";  // the reader's text
  return unknown;
}

void NativeTail::emit(const TailVisitor& visitor, const ThreadState& thread,
                      const std::vector<OpenSpan>& open, uint64_t end_ticks, bool unfinished,
                      bool async) {
  if (!visitor.on_span) return;
  const OpenSpan& span = open.back();
  // One event, reused, every field set below: building a fresh one zeroed it first, which
  // was 40% of emit()'s time (perf: `rep stos`).
  EndedSpan& ended = ended_;
  ended.pid = thread.pid;
  ended.tid = thread.tid;
  ended.thread_name = thread.name;
  ended.name = name_of(span, unknown_name_);
  ended.category = {};
  ended.name_id = 0;
  if (!span.named_inline && span.name < names_.size()) {
    ended.category = names_[span.name].category;
    ended.name_id = span.name;
  }
  ended.has_local_parent = open.size() >= 2;
  ended.parent_name = {};
  ended.parent_name_id = 0;
  if (ended.has_local_parent) {
    const OpenSpan& parent = open[open.size() - 2];
    ended.parent_name = name_of(parent, unknown_parent_name_);
    if (!parent.named_inline && parent.name < names_.size()) ended.parent_name_id = parent.name;
  }
  double ticks =
      end_ticks >= span.begin_ticks ? static_cast<double>(end_ticks - span.begin_ticks) : 0;
  ended.duration_ns = static_cast<int64_t>(ticks * 1e9 / ticks_per_second_ + 0.5);
  ended.start_unix_ns = unix_ns(span.begin_ticks);
  ended.end_unix_ns = std::max(ended.start_unix_ns, unix_ns(end_ticks));
  ended.span_id = span.span_id;
  ended.parent_span_id = span.parent_span_id;
  ended.parent_category = {};
  if (span.parent_name != 0 && span.parent_name < names_.size())
    ended.parent_category = names_[span.parent_name].category;
  ended.trace_id = span.trace_id;
  ended.trace_flags = span.trace_flags;
  ended.remote_parent = span.remote_parent;
  ended.unfinished = unfinished;
  ended.async = async;
  ended.args = &span.args;
  ended.async_id = span.async_id;
  ended.lane = 0;
  ended.lane_name = {};
  ended.lane_serial = 0;
  if (!async) {
    ended.lane = span.lane;
    if (auto lane = thread.lanes.find(span.lane); lane != thread.lanes.end()) {
      ended.lane_name = lane->second.name;
      ended.lane_serial = lane->second.serial;
    }
  }
  visitor.on_span(ended);
}

void NativeTail::flush_instant(const TailVisitor& visitor, ThreadState& thread) {
  if (!thread.pending_instant) return;
  const PendingInstant& pending = *thread.pending_instant;
  TailInstant instant;
  if (pending.named_inline) {
    instant.name = pending.inline_name;
  } else if (pending.name < names_.size()) {
    instant.name = names_[pending.name].name;
    instant.category = names_[pending.name].category;
  } else {
    instant.name = "<unknown name>";
  }
  instant.pid = thread.pid;
  instant.tid = thread.tid;
  instant.lane = pending.lane;
  if (auto lane = thread.lanes.find(pending.lane); lane != thread.lanes.end())
    instant.lane_name = lane->second.name;
  instant.unix_ns = unix_ns(pending.ticks);
  instant.scope = pending.scope;
  instant.args = &pending.args;
  if (visitor.on_instant) visitor.on_instant(instant);
  thread.pending_instant.reset();
}

void NativeTail::use_clock(const format::ClockSync& first, const format::ClockSync& last) {
  first_sync_ = first;
  last_sync_ = last;
  first_sync_ticks_ = first.ticks;
  has_sync_ = true;
  clock_fixed_ = true;
  clock_slope_stale_ = true;
}

std::vector<TailThread> NativeTail::threads() const {
  std::vector<TailThread> list;
  for (const auto& [index, thread] : threads_)
    list.push_back({thread.pid, thread.tid, thread.name, index, thread.events, thread.has_track});
  return list;
}

void NativeTail::report_begin(const TailVisitor& visitor, const ThreadState& thread,
                              const OpenSpan& span, bool async) {
  BegunSpan begun;
  begun.name = name_of(span, unknown_name_);
  if (!span.named_inline && span.name < names_.size()) {
    begun.category = names_[span.name].category;
    begun.name_id = span.name;
  }
  begun.pid = thread.pid;
  begun.tid = thread.tid;
  begun.thread_name = thread.name;
  begun.start_unix_ns = unix_ns(span.begin_ticks);
  begun.async = async;
  begun.async_id = span.async_id;
  if (!async) {
    begun.lane = span.lane;
    if (auto lane = thread.lanes.find(span.lane); lane != thread.lanes.end()) {
      begun.lane_name = lane->second.name;
      begun.lane_serial = lane->second.serial;
    }
  }
  visitor.on_begin(begun);
}

std::vector<std::pair<std::string_view, std::string_view>> NativeTail::names() const {
  std::vector<std::pair<std::string_view, std::string_view>> list;
  list.reserve(names_.size());
  for (const Name& name : names_) list.emplace_back(name.name, name.category);
  return list;
}

void NativeTail::finish(const TailVisitor& visitor) {
  if (finish_reported_) return;
  finish_reported_ = true;
  for (auto& [index, thread] : threads_) flush_instant(visitor, thread);
  uint64_t trace_end_ticks = last_async_ticks_;
  for (auto& [index, thread] : threads_) {
    trace_end_ticks = std::max(trace_end_ticks, thread.slots.last_ticks);
    for (auto& [key, lane] : thread.lanes)
      while (!lane.open.empty()) {
        emit(visitor, thread, lane.open, thread.slots.last_ticks, true, false);
        lane.open.pop_back();
      }
  }
  // Async spans never ended: shown up to the end of the trace, as the reader does.
  for (auto& [pid, by_id] : async_)
    for (auto& [id, open] : by_id)
      while (!open.empty()) {
        ThreadState owner;
        owner.pid = pid;
        emit(visitor, owner, open, trace_end_ticks, true, true);
        open.pop_back();
      }
}

void NativeTail::read_events(std::string_view payload, const TailVisitor& visitor) {
  size_t position = 0;
  format::EventsHeader header;
  if (!take(payload, position, &header)) return;
  ThreadState& state = threads_[header.thread_index];
  const auto slot_count = static_cast<uint32_t>(
      std::min<size_t>(header.slot_count, (payload.size() - position) / sizeof(Slot)));
  native::SlotFileContext file{header.thread_index, has_sync_, first_sync_ticks_, span_salt_};
  Lane* lane = &state.lanes[state.lane];
  // A span (or async span) as its begin event gives it: a root (until a parent is given),
  // in a trace of its own.
  auto begun = [](const native::SlotEvent& event) {
    OpenSpan span;
    span.begin_ticks = event.ticks;
    span.name = event.name_id;
    span.named_inline = event.name_id == 0;
    if (span.named_inline) span.inline_name = event.text;
    span.span_id = event.span_id;
    set_own_root_trace(span);
    return span;
  };
  // A span that takes its parent's place in a trace.
  auto inherit_trace = [](OpenSpan& span, const OpenSpan& parent) {
    span.trace_id = parent.trace_id;
    span.trace_flags = parent.trace_flags;
    span.own_root_trace = false;
  };
  native::decode_slots(
      payload.data() + position, slot_count, state.slots, file,
      [&](const native::SlotEvent& event) {
        ++events_decoded_;
        ++state.events;
        if (event.malformed) return;
        // An instant's args follow it at once: any other event ends them.
        if (event.kind != SlotKind::kArg) flush_instant(visitor, state);
        switch (event.kind) {
          case SlotKind::kTrack: {
            state.lane = event.id;
            lane = &state.lanes[state.lane];
            if (!event.text.empty()) lane->name = std::string(event.text);
            // A key named again stands for a new task: the old one's open spans never end
            // (reported unfinished, ended at the lane's last event, as the reader does).
            if (event.id != 0 && !event.text.empty()) {
              while (!lane->open.empty()) {
                emit(visitor, state, lane->open, lane->last_ticks, true, false);
                lane->open.pop_back();
              }
              lane->after_instant = false;
            }
            if (lane->serial == 0 || (event.id != 0 && !event.text.empty()))
              lane->serial = next_lane_serial_++;  // after the old task's spans ended
            return;
          }
          case SlotKind::kBegin: {
            state.has_track = true;
            OpenSpan span = begun(event);
            span.lane = state.lane;
            if (!lane->open.empty()) {
              const OpenSpan& parent = lane->open.back();
              span.parent_span_id = parent.span_id;
              span.parent_name = parent.name;
              inherit_trace(span, parent);
            }
            lane->open.push_back(std::move(span));
            if (lane->serial == 0) lane->serial = next_lane_serial_++;
            if (visitor.on_begin) report_begin(visitor, state, lane->open.back(), false);
            lane->after_instant = false;
            lane->last_ticks = std::max(lane->last_ticks, event.ticks);
            return;
          }
          case SlotKind::kEnd:
            if (!lane->open.empty()) {
              emit(visitor, state, lane->open, event.ticks, event.unfinished, false);
              lane->open.pop_back();
            }
            lane->after_instant = false;
            lane->last_ticks = std::max(lane->last_ticks, event.ticks);
            return;
          case SlotKind::kInstant:
            state.has_track = true;
            lane->after_instant = true;  // the args that follow are the instant's
            lane->last_ticks = std::max(lane->last_ticks, event.ticks);
            if (visitor.on_instant) {
              PendingInstant pending;
              pending.name = event.name_id;
              pending.named_inline = event.name_id == 0;
              if (pending.named_inline) pending.inline_name = std::string(event.text);
              pending.ticks = event.ticks;
              pending.lane = state.lane;
              pending.scope = event.detail;
              state.pending_instant = std::move(pending);
            }
            return;
          case SlotKind::kArg: {
            if (lane->after_instant && state.pending_instant) {
              TailArg arg;
              arg.key = std::string(event.text);
              arg.value = event.arg;
              if (arg.value.type == trace::ArgType::kString)
                arg.text = std::string(event.string_value);
              state.pending_instant->args.push_back(std::move(arg));
              return;
            }
            if (lane->after_instant || lane->open.empty()) return;
            TailArg arg;
            arg.key = std::string(event.text);
            arg.value = event.arg;
            if (arg.value.type == trace::ArgType::kString)
              arg.text = std::string(event.string_value);
            lane->open.back().args.push_back(std::move(arg));
            return;
          }
          case SlotKind::kSpanId:
            if (!lane->open.empty()) {
              OpenSpan& span = lane->open.back();
              span.span_id = event.id;
              if (span.own_root_trace) set_own_root_trace(span);
            }
            return;
          case SlotKind::kSpanContext:
            if (lane->open.empty()) return;
            if (native::binds_to_root(event)) {
              // The lane's root, and the spans open under it in its trace, are the session's.
              trace::TraceId root_trace = lane->open.front().trace_id;
              for (OpenSpan& span : lane->open)
                if (span.trace_id == root_trace) {
                  span.trace_id = event.trace_id;
                  span.trace_flags = event.detail;
                  span.own_root_trace = false;
                }
            } else {
              OpenSpan& span = lane->open.back();
              span.trace_id = event.trace_id;
              span.parent_span_id = event.id;
              span.trace_flags = event.detail;
              span.remote_parent = event.id != 0;
              span.own_root_trace = false;
            }
            return;
          case SlotKind::kCounter:
            lane->last_ticks = std::max(lane->last_ticks, event.ticks);
            if (visitor.on_counter_sample)
              visitor.on_counter_sample(
                  TailCounterSample{event.text, state.pid, unix_ns(event.ticks), event.value});
            return;
          case SlotKind::kFlow:
            if (visitor.on_flow) visitor.on_flow();
            return;
          case SlotKind::kAsyncBegin: {
            OpenSpan span = begun(event);
            span.async_id = event.id;
            auto& open = async_[state.pid][event.id];
            if (!open.empty()) {
              span.parent_span_id = open.back().span_id;
              inherit_trace(span, open.back());
            }
            open.push_back(std::move(span));
            if (visitor.on_begin) report_begin(visitor, state, open.back(), true);
            last_async_ticks_ = std::max(last_async_ticks_, event.ticks);
            lane->last_ticks = std::max(lane->last_ticks, event.ticks);
            return;
          }
          case SlotKind::kAsyncEnd: {
            auto& open = async_[state.pid][event.id];
            if (!open.empty()) {
              emit(visitor, state, open, event.ticks, event.unfinished, true);
              open.pop_back();
            }
            last_async_ticks_ = std::max(last_async_ticks_, event.ticks);
            lane->last_ticks = std::max(lane->last_ticks, event.ticks);
            return;
          }
          default:
            return;  // flows: not streamed
        }
      });
}

std::optional<NativeTail::OpenSpanIds> NativeTail::open_span(int64_t pid, int64_t tid,
                                                             uint64_t lane) const {
  for (const auto& entry : threads_) {
    const ThreadState& thread = entry.second;
    if (thread.pid != pid || thread.tid != tid) continue;
    auto found = thread.lanes.find(lane);
    if (found == thread.lanes.end() || found->second.open.empty()) continue;
    const OpenSpan& span = found->second.open.back();
    return OpenSpanIds{span.span_id, span.trace_id, span.trace_flags};
  }
  return std::nullopt;
}

}  // namespace opsight::io
