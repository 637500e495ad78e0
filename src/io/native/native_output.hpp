// The native writer's output and its Events chunk encoder, shared by the whole-trace writer
// (native_writer.cc) and the streaming merge of a run's files (native_merge.cc): chunks go
// into a buffer that is handed to a sink once it passes 1 MiB, and the time index learns
// every chunk on the way.
//
// Thread-safety: none; one writer owns an output.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "format/chunk_codec.hpp"
#include "format/chunk_index.hpp"
#include "io/io.hpp"
#include "opsight/internal/native_layout.hpp"

namespace opsight::io::native {

using format::Slot;
using format::SlotKind;

// At most this many slots per Events chunk.
inline constexpr uint32_t kSlotsPerChunk = 4096;

inline uint64_t slot_word(uint32_t id, SlotKind kind, uint8_t arg_type = 0, uint16_t extra = 0) {
  return uint64_t{id} | (uint64_t{static_cast<uint8_t>(kind)} << 32) | (uint64_t{arg_type} << 40) |
         (uint64_t{extra} << 48);
}

// Where the writer's chunks go: a buffer, handed to a sink (when there is one) whenever it
// passes 1 MiB at the end of an Events chunk, so that a write holds that much, not the
// whole file. Only the Events encoder hands over: every other chunk is small. The time
// index learns each chunk at the end of an Events chunk too, while its bytes are in cache.
struct NativeOutput {
  std::string bytes;
  ByteSink* sink = nullptr;
  bool refused = false;  // the sink refused bytes: what follows is dropped
  format::IndexBuilder index;
  uint64_t base = 0;   // the file offset of bytes[0]
  size_t indexed = 0;  // bytes before this are in the index

  void index_new_chunks() {
    index.add_chunks(std::string_view(bytes).substr(indexed), base + indexed);
    if (index.part_full()) index.append_part(bytes, base + bytes.size());
    indexed = bytes.size();
  }
  void hand_over_if_large() {
    if (bytes.size() - indexed >= (size_t{1} << 20)) index_new_chunks();
    if (sink && bytes.size() >= (size_t{1} << 20)) hand_over();
  }
  void hand_over() {
    index_new_chunks();
    if (!refused && !sink->write(bytes)) refused = true;
    base += bytes.size();
    bytes.clear();
    indexed = 0;
  }
  // The index of every chunk so far and its trailer: the file's end.
  void append_index() {
    index_new_chunks();
    index.append_index(bytes, base + bytes.size());
    indexed = bytes.size();
  }
};

// Writes one thread's slots straight into the output as Events chunks of whole events
// (no staging copy). One encoder at a time may write to a given output.
class EventsEncoder {
 public:
  // `sequence`: the thread's slots in the chunks written before (a thread written in
  // several runs of chunks, as the streaming merge does, continues its count).
  EventsEncoder(NativeOutput& output, uint32_t thread_index, uint64_t sequence = 0)
      : output_(output), out_(output.bytes), thread_index_(thread_index), sequence_(sequence) {}
  EventsEncoder(const EventsEncoder&) = delete;
  EventsEncoder& operator=(const EventsEncoder&) = delete;
  ~EventsEncoder() { flush(); }

  void add(uint64_t ticks, uint64_t word, std::string_view bytes = {},
           const Slot* value_slot = nullptr) {
    uint16_t byte_slots = format::slots_for_bytes(bytes.size());
    uint16_t extra = static_cast<uint16_t>(byte_slots + (value_slot ? 1 : 0));
    if (pending_ + 1u + extra > kSlotsPerChunk) flush();
    if (pending_ == 0) open_chunk();
    Slot slot{ticks, 0, 0, 0, 0};
    word |= uint64_t{extra} << 48;
    std::memcpy(&slot.id, &word, sizeof(word));
    out_.append(reinterpret_cast<const char*>(&slot), sizeof(slot));
    if (value_slot) out_.append(reinterpret_cast<const char*>(value_slot), sizeof(Slot));
    if (!bytes.empty()) {
      out_.append(bytes);
      out_.append(size_t{byte_slots} * sizeof(Slot) - bytes.size(), '\0');
    }
    pending_ += 1u + extra;
  }

  // The thread's slots so far, once flushed.
  uint64_t sequence() const { return sequence_; }

  void flush() {
    if (pending_ == 0) return;
    format::EventsHeader header{thread_index_, pending_, sequence_};
    std::memcpy(out_.data() + events_header_position_, &header, sizeof(header));
    format::end_chunk(out_, chunk_position_, format::ChunkType::kEvents);
    sequence_ += pending_;
    pending_ = 0;
    output_.hand_over_if_large();
  }

 private:
  void open_chunk() {
    chunk_position_ = format::begin_chunk(out_);
    events_header_position_ = out_.size();
    format::append_pod(out_, format::EventsHeader{thread_index_, 0, sequence_});
  }

  NativeOutput& output_;
  std::string& out_;
  uint32_t thread_index_;
  uint32_t pending_ = 0;
  uint64_t sequence_ = 0;
  size_t chunk_position_ = 0;
  size_t events_header_position_ = 0;
};

}  // namespace opsight::io::native
