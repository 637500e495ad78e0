#include "format/chunk_index.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "format/chunk_codec.hpp"

namespace opsight::format {

void IndexBuilder::add_events(uint64_t offset, uint32_t thread_index, const char* slots,
                              uint32_t slot_count) {
  ThreadFacts& thread = threads_[thread_index];
  IndexEntry entry{};
  entry.offset = offset;
  entry.type = static_cast<uint32_t>(ChunkType::kEvents);
  entry.thread_index = thread_index;
  entry.min_ticks = std::numeric_limits<uint64_t>::max();
  entry.max_ticks = 0;
  entry.ticks_before = thread.last_ticks;
  entry.begins_before = thread.begins;
  entry.async_begins_before = thread.async_begins;
  if (thread.has_last_ticks) entry.flags |= kIndexHasTicksBefore;
  if (thread.open_spans == 0 && !thread.switched_tracks && !thread.after_instant &&
      !thread.into_next_waiting)
    entry.flags |= kIndexCleanStart;
  auto note_empty_state = [&] {
    if (thread.open_spans == 0 && !thread.switched_tracks && !thread.into_next_waiting)
      entry.flags |= kIndexResumable;
  };
  note_empty_state();
  // The slot decoder's walk (src/io/native/slot_decoder.hpp), keeping only what the index
  // needs: which events are stale, the full ticks of packed ones, and the thread's nesting.
  uint32_t index = 0;
  while (index < slot_count) {
    Slot slot;
    std::memcpy(&slot, slots + size_t{index} * sizeof(Slot), sizeof(slot));
    const uint32_t extra = extra_slots_of(slot);
    if (extra > slot_count - index - 1) break;  // damage: the reader stops here too
    index += 1 + extra;
    // Events are counted as the reader counts them: every track switch, and the others
    // unless stale.
    auto kind = static_cast<SlotKind>(slot.kind);
    switch (kind) {
      case SlotKind::kTrack:
        ++entry.event_count;
        thread.switched_tracks = true;
        continue;
      case SlotKind::kFlow:
        if (thread.skipping_stale) continue;
        ++entry.event_count;
        if ((slot.arg_type & ~kFlowOnAsyncBegin) == kFlowIntoNext) thread.into_next_waiting = true;
        if (slot.arg_type & kFlowOnAsyncBegin) entry.flags |= kIndexHasAsync;
        continue;
      case SlotKind::kSpanId:
      case SlotKind::kSpanContext:
      case SlotKind::kArg:
        if (!thread.skipping_stale) ++entry.event_count;
        continue;
      default:
        break;
    }
    uint64_t ticks = slot.ticks;
    if (is_packed_async(slot.kind))
      ticks = unpack_async_ticks(packed_async_ticks_low(slot),
                                 thread.has_last_ticks ? thread.last_ticks : session_start_ticks_);
    thread.last_ticks = ticks;
    thread.has_last_ticks = true;
    thread.skipping_stale = has_session_start_ && ticks < session_start_ticks_;
    if (thread.skipping_stale) continue;
    ++entry.event_count;
    entry.min_ticks = std::min(entry.min_ticks, ticks);
    entry.max_ticks = std::max(entry.max_ticks, ticks);
    switch (kind) {
      case SlotKind::kBegin:
      case SlotKind::kBeginNamed:
        entry.flags |= kIndexHasSpans;
        ++thread.begins;
        ++thread.open_spans;
        thread.after_instant = false;
        thread.into_next_waiting = false;
        break;
      case SlotKind::kEnd:
        if (thread.open_spans > 0) --thread.open_spans;
        thread.after_instant = false;
        note_empty_state();
        break;
      case SlotKind::kInstant:
      case SlotKind::kInstantNamed:
        entry.flags |= kIndexHasSpans;
        thread.after_instant = true;
        break;
      case SlotKind::kAsyncBegin:
        if (extra >= 1) ++thread.async_begins;
        entry.flags |= kIndexHasAsync;
        break;
      case SlotKind::kAsyncBeginPacked:
        ++thread.async_begins;
        entry.flags |= kIndexHasAsync;
        break;
      case SlotKind::kAsyncEnd:
      case SlotKind::kAsyncEndPacked:
        entry.flags |= kIndexHasAsync;
        break;
      default:
        break;
    }
  }
  entries_.push_back(entry);
}

void IndexBuilder::add_other(uint64_t offset, ChunkType type, std::string_view payload) {
  if (type == ChunkType::kIndex || type == ChunkType::kIndexTrailer) return;
  if (type == ChunkType::kClockSync && !has_session_start_ && payload.size() >= sizeof(ClockSync)) {
    ClockSync sync;
    std::memcpy(&sync, payload.data(), sizeof(sync));
    has_session_start_ = true;
    session_start_ticks_ = sync.ticks;
  }
  IndexEntry entry{};
  entry.offset = offset;
  entry.type = static_cast<uint32_t>(type);
  entry.min_ticks = std::numeric_limits<uint64_t>::max();
  entries_.push_back(entry);
}

void IndexBuilder::add_chunks(std::string_view bytes, uint64_t offset) {
  size_t position = 0;
  if (offset == 0 && bytes.size() >= sizeof(FileHeader) &&
      std::memcmp(bytes.data(), kFileMagic, sizeof(kFileMagic)) == 0)
    position = sizeof(FileHeader);
  while (bytes.size() - position >= sizeof(ChunkHeader)) {
    ChunkHeader header;
    std::memcpy(&header, bytes.data() + position, sizeof(header));
    size_t size = sizeof(header) + size_t{header.payload_bytes};
    if (bytes.size() - position < size) break;  // the writers hand over whole chunks
    std::string_view payload = bytes.substr(position + sizeof(header), header.payload_bytes);
    auto type = static_cast<ChunkType>(header.type);
    if (type == ChunkType::kEvents && payload.size() >= sizeof(EventsHeader)) {
      EventsHeader events;
      std::memcpy(&events, payload.data(), sizeof(events));
      uint32_t slots = static_cast<uint32_t>(
          std::min<size_t>(events.slot_count, (payload.size() - sizeof(events)) / sizeof(Slot)));
      add_events(offset + position, events.thread_index, payload.data() + sizeof(events), slots);
    } else {
      add_other(offset + position, type, payload);
    }
    position += size;
  }
}

bool IndexBuilder::append_part(std::string& out, uint64_t offset) {
  size_t payload_bytes = sizeof(IndexHeader) + entries_.size() * sizeof(IndexEntry);
  if (payload_bytes > kMaxChunkPayload) return false;
  size_t header = begin_chunk(out);
  append_pod(out, IndexHeader{kIndexVersion, sizeof(IndexEntry), entries_.size(), previous_part_});
  out.append(reinterpret_cast<const char*>(entries_.data()), entries_.size() * sizeof(IndexEntry));
  end_chunk(out, header, ChunkType::kIndex);
  previous_part_ = offset;
  entries_.clear();
  return true;
}

bool IndexBuilder::append_index(std::string& out, uint64_t offset) {
  if (!append_part(out, offset)) return false;
  IndexTrailer trailer{offset, {}};
  std::memcpy(trailer.magic, kIndexTrailerMagic, sizeof(trailer.magic));
  append_chunk(out, ChunkType::kIndexTrailer,
               std::string_view(reinterpret_cast<const char*>(&trailer), sizeof(trailer)));
  return true;
}

std::optional<std::vector<IndexEntry>> read_index(std::string_view file, std::string* problem) {
  constexpr size_t kTrailerChunk = sizeof(ChunkHeader) + sizeof(IndexTrailer);
  if (file.size() < sizeof(FileHeader) + kTrailerChunk) {
    *problem = "no index (the file is too short to hold one)";
    return std::nullopt;
  }
  uint64_t trailer_offset = file.size() - kTrailerChunk;
  std::string chunk_problem;
  auto trailer_chunk = read_chunk(file, trailer_offset, &chunk_problem);
  if (!trailer_chunk || trailer_chunk->type != ChunkType::kIndexTrailer ||
      trailer_chunk->payload.size() != sizeof(IndexTrailer)) {
    *problem = "no index at the end of the file";
    return std::nullopt;
  }
  IndexTrailer trailer;
  std::memcpy(&trailer, trailer_chunk->payload.data(), sizeof(trailer));
  if (std::memcmp(trailer.magic, kIndexTrailerMagic, sizeof(trailer.magic)) != 0 ||
      trailer.index_offset < sizeof(FileHeader) || trailer.index_offset >= trailer_offset) {
    *problem = "the index trailer is damaged";
    return std::nullopt;
  }
  // The parts, from the last back to the first: each names the one before it, earlier in
  // the file.
  struct Part {
    uint64_t offset;
    std::string_view entries;
    uint64_t count;
    uint32_t entry_bytes;
  };
  std::vector<Part> parts;
  for (uint64_t offset = trailer.index_offset; offset != 0;) {
    auto chunk = read_chunk(file, offset, &chunk_problem);
    if (!chunk || chunk->type != ChunkType::kIndex || chunk->payload.size() < sizeof(IndexHeader)) {
      *problem = "the index chunk at byte " + std::to_string(offset) + " is damaged" +
                 (chunk ? std::string() : " (" + chunk_problem + ")");
      return std::nullopt;
    }
    IndexHeader header;
    std::memcpy(&header, chunk->payload.data(), sizeof(header));
    if (header.index_version != kIndexVersion || header.entry_bytes < sizeof(IndexEntry) ||
        header.entry_count > (chunk->payload.size() - sizeof(header)) / header.entry_bytes ||
        header.previous_part >= offset ||
        (header.previous_part != 0 && header.previous_part < sizeof(FileHeader))) {
      *problem = "the index at byte " + std::to_string(offset) +
                 " has an unknown version, a bad size or a bad link to its previous part";
      return std::nullopt;
    }
    parts.push_back(
        {offset, chunk->payload.substr(sizeof(header)), header.entry_count, header.entry_bytes});
    offset = header.previous_part;
  }
  size_t total = 0;
  for (const Part& part : parts) total += part.count;
  std::vector<IndexEntry> entries;
  entries.reserve(total);
  uint64_t previous_end = sizeof(FileHeader);
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    for (uint64_t i = 0; i < part->count; ++i) {
      IndexEntry entry;
      std::memcpy(&entry, part->entries.data() + i * part->entry_bytes, sizeof(IndexEntry));
      // In file order, before its part, not overlapping: anything else is damage.
      if (entry.offset < previous_end || entry.offset >= part->offset) {
        *problem = "the index at byte " + std::to_string(part->offset) +
                   " lists a chunk out of place (entry " + std::to_string(i) + ")";
        return std::nullopt;
      }
      previous_end = entry.offset + sizeof(ChunkHeader);
      entries.push_back(entry);
    }
    previous_end = std::max(previous_end, part->offset + sizeof(ChunkHeader));
  }
  return entries;
}

}  // namespace opsight::format
