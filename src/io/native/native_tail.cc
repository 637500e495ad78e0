#include "io/native/native_tail.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "format/chunk_codec.hpp"
#include "io/native/derived_span_id.hpp"
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

bool NativeTail::poll(const TailVisitor& visitor) {
  std::FILE* file = std::fopen(path_.c_str(), "rb");
  if (file == nullptr) {
    error_ = path_ + ": cannot open: " + std::strerror(errno);
    return false;
  }
  // Read from the next chunk to the end of what is written now.
  std::string data;
  if (std::fseek(file, static_cast<long>(offset_), SEEK_SET) == 0) {
    char buffer[1 << 16];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) data.append(buffer, got);
  }
  std::fclose(file);
  size_t position = 0;
  if (!header_read_) {
    if (data.size() < sizeof(format::FileHeader)) return true;  // not written yet
    format::FileHeader header;
    std::memcpy(&header, data.data(), sizeof(header));
    if (std::memcmp(header.magic, format::kFileMagic, sizeof(format::kFileMagic)) != 0 ||
        header.version > format::kFormatVersion) {
      error_ = path_ + ": not an opsight file this reader knows";
      return false;
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
  offset_ += position;
  return true;
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
        if (key == "ticks_per_second") {
          double parsed = std::strtod(std::string(value).c_str(), nullptr);
          if (parsed > 0) ticks_per_second_ = parsed;
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
      format::ClockSync sync;
      while (take(payload, position, &sync)) {
        if (!has_sync_) {
          first_sync_ = sync;
          first_sync_ticks_ = sync.ticks;
          has_sync_ = true;
        }
        last_sync_ = sync;
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
      if (take(payload, position, &stats)) events_dropped_ = stats.events_dropped;
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
  double slope = 1e9 / ticks_per_second_;
  if (last_sync_.ticks > first_sync_.ticks && last_sync_.monotonic_ns > first_sync_.monotonic_ns)
    slope = static_cast<double>(last_sync_.monotonic_ns - first_sync_.monotonic_ns) /
            static_cast<double>(last_sync_.ticks - first_sync_.ticks);
  // The reader's arithmetic: a 48-bit fixed-point slope, rounded to the nearest ns.
  __extension__ using Wide = __int128;
  auto slope_fixed = static_cast<int64_t>(std::llround(std::ldexp(std::min(slope, 32767.0), 48)));
  auto delta = static_cast<Wide>(static_cast<int64_t>(ticks - first_sync_.ticks));
  Wide ns = first_sync_.monotonic_ns + ((delta * slope_fixed + (Wide{1} << 47)) >> 48);
  return static_cast<int64_t>(ns) + (first_sync_.realtime_ns - first_sync_.monotonic_ns);
}

void NativeTail::emit(const TailVisitor& visitor, const ThreadState& thread, const OpenSpan& span,
                      uint64_t end_ticks, bool unfinished, bool async) {
  if (!visitor.on_span) return;
  EndedSpan ended;
  ended.pid = thread.pid;
  ended.tid = thread.tid;
  ended.thread_name = thread.name;
  if (!span.inline_name.empty()) {
    ended.name = span.inline_name;
  } else if (span.name < names_.size()) {
    ended.name = names_[span.name].name;
    ended.category = names_[span.name].category;
  } else {
    ended.name = "<unknown name>";
  }
  double ticks =
      end_ticks >= span.begin_ticks ? static_cast<double>(end_ticks - span.begin_ticks) : 0;
  ended.duration_ns = static_cast<int64_t>(ticks * 1e9 / ticks_per_second_ + 0.5);
  ended.start_unix_ns = unix_ns(span.begin_ticks);
  ended.end_unix_ns = std::max(ended.start_unix_ns, unix_ns(end_ticks));
  ended.span_id = span.span_id;
  ended.parent_span_id = span.parent_span_id;
  if (span.parent_name != 0 && span.parent_name < names_.size())
    ended.parent_category = names_[span.parent_name].category;
  ended.trace_id = span.trace_id;
  ended.trace_flags = span.trace_flags;
  ended.remote_parent = span.remote_parent;
  ended.unfinished = unfinished;
  ended.async = async;
  ended.args = &span.args;
  visitor.on_span(ended);
}

void NativeTail::finish(const TailVisitor& visitor) {
  if (finish_reported_) return;
  finish_reported_ = true;
  for (auto& [index, thread] : threads_)
    for (auto& [key, lane] : thread.lanes)
      while (!lane.empty()) {
        emit(visitor, thread, lane.back(), thread.last_ticks, true, false);
        lane.pop_back();
      }
}

void NativeTail::read_events(std::string_view payload, const TailVisitor& visitor) {
  size_t position = 0;
  format::EventsHeader header;
  if (!take(payload, position, &header)) return;
  ThreadState& state = threads_[header.thread_index];
  const size_t slot_count =
      std::min<size_t>(header.slot_count, (payload.size() - position) / sizeof(Slot));
  const char* base = payload.data() + position;
  size_t index = 0;
  while (index < slot_count) {
    Slot slot;
    std::memcpy(&slot, base + index * sizeof(Slot), sizeof(Slot));
    uint32_t extra = format::extra_slots_of(slot);
    if (extra > slot_count - index - 1) return;
    const char* extra_bytes = base + (index + 1) * sizeof(Slot);
    index += 1 + extra;
    auto kind = static_cast<SlotKind>(slot.kind);
    uint64_t ticks = slot.ticks;
    if (format::is_packed_async(slot.kind))
      ticks =
          format::unpack_async_ticks(format::packed_async_ticks_low(slot),
                                     state.has_last_ticks ? state.last_ticks : first_sync_ticks_);
    bool timed = kind != SlotKind::kArg && kind != SlotKind::kTrack && kind != SlotKind::kFlow &&
                 kind != SlotKind::kSpanId && kind != SlotKind::kSpanContext;
    if (timed) {
      state.last_ticks = ticks;
      state.has_last_ticks = true;
      if (has_sync_ && ticks < first_sync_ticks_) {  // written before this session
        state.after_instant = true;                  // (and so are the args after it)
        continue;
      }
      state.after_instant = kind == SlotKind::kInstant || kind == SlotKind::kInstantNamed;
    }
    std::vector<OpenSpan>& lane = state.lanes[state.lane];
    switch (kind) {
      case SlotKind::kBegin:
      case SlotKind::kBeginNamed: {
        OpenSpan span;
        span.begin_ticks = ticks;
        if (kind == SlotKind::kBegin) {
          span.name = slot.id;
        } else {
          span.inline_name =
              std::string(extra_bytes, std::min<size_t>(slot.id, size_t{extra} * sizeof(Slot)));
          if (span.inline_name.empty()) span.inline_name = "<unnamed>";
        }
        span.span_id = native::derived_span_id(header.thread_index, ++state.begins, span_salt_);
        if (!lane.empty()) {
          const OpenSpan& parent = lane.back();
          span.parent_span_id = parent.span_id;
          span.parent_name = parent.name;
          span.trace_id = parent.trace_id;
          span.trace_flags = parent.trace_flags;
        }
        lane.push_back(std::move(span));
        break;
      }
      case SlotKind::kEnd:
        if (!lane.empty()) {
          emit(visitor, state, lane.back(), ticks, slot.arg_type == format::kEndIsLate, false);
          lane.pop_back();
        }
        break;
      case SlotKind::kArg: {
        if (state.after_instant || lane.empty()) break;
        uint32_t key_length = slot.id & 0xFFFF;
        uint32_t string_length = slot.id >> 16;
        if (key_length + size_t{string_length} > size_t{extra} * sizeof(Slot)) break;
        TailArg arg;
        arg.key = std::string(extra_bytes, key_length);
        arg.value.type = static_cast<trace::ArgType>(slot.arg_type);
        if (arg.value.type == trace::ArgType::kDouble)
          std::memcpy(&arg.value.double_value, &slot.ticks, 8);
        else if (arg.value.type == trace::ArgType::kString)
          arg.text = std::string(extra_bytes + key_length, string_length);
        else if (arg.value.type == trace::ArgType::kInt || arg.value.type == trace::ArgType::kBool)
          arg.value.int_value = static_cast<int64_t>(slot.ticks);
        else
          break;
        lane.back().args.push_back(std::move(arg));
        break;
      }
      case SlotKind::kSpanId:
        if (!lane.empty()) lane.back().span_id = slot.ticks;
        break;
      case SlotKind::kSpanContext:
        if (!lane.empty() && extra >= 1) {
          OpenSpan& span = lane.back();
          std::memcpy(&span.trace_id.high, extra_bytes, 8);
          std::memcpy(&span.trace_id.low, extra_bytes + 8, 8);
          span.parent_span_id = slot.ticks;
          span.trace_flags = slot.arg_type;
          span.remote_parent = slot.ticks != 0;
        }
        break;
      case SlotKind::kTrack:
        state.lane = slot.ticks;
        // A key named again stands for a new task: the old one's open spans never end.
        if (slot.ticks != 0 && slot.id > 0) state.lanes[slot.ticks].clear();
        break;
      case SlotKind::kCounter:
        if (extra >= 1 && visitor.on_counter) {
          double value;
          std::memcpy(&value, extra_bytes, sizeof(value));
          std::string_view name(extra_bytes + sizeof(Slot),
                                std::min<size_t>(slot.id, size_t{extra - 1} * sizeof(Slot)));
          visitor.on_counter(name, state.pid, value);
        }
        break;
      case SlotKind::kAsyncBegin:
      case SlotKind::kAsyncBeginPacked: {
        uint64_t id;
        OpenSpan span;
        span.begin_ticks = ticks;
        if (kind == SlotKind::kAsyncBeginPacked) {
          id = slot.ticks >> 24;
          span.name = static_cast<uint32_t>(slot.ticks & (format::kPackedNameIdLimit - 1));
        } else {
          if (extra < 1) break;
          std::memcpy(&id, extra_bytes, sizeof(id));
          if (slot.arg_type == format::kAsyncNameId)
            span.name = slot.id;
          else
            span.inline_name =
                std::string(extra_bytes + sizeof(Slot),
                            std::min<size_t>(slot.id, size_t{extra - 1} * sizeof(Slot)));
        }
        auto& open = async_[state.pid][id];
        span.span_id = trace::mix64(span_salt_ ^ 0xa5a5a5a5a5a5a5a5ULL ^ (id * 31 + ticks)) | 1;
        if (!open.empty()) span.parent_span_id = open.back().span_id;
        open.push_back(std::move(span));
        break;
      }
      case SlotKind::kAsyncEnd:
      case SlotKind::kAsyncEndPacked: {
        uint64_t id = slot.ticks;
        if (kind == SlotKind::kAsyncEnd) {
          if (extra < 1) break;
          std::memcpy(&id, extra_bytes, sizeof(id));
        }
        auto& open = async_[state.pid][id];
        if (!open.empty()) {
          emit(visitor, state, open.back(), ticks, slot.arg_type == format::kEndOfUnfinished, true);
          open.pop_back();
        }
        break;
      }
      default:
        break;  // instants and flows: not streamed
    }
  }
}

}  // namespace opsight::io
