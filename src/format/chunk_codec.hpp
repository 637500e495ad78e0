// Encoding and checking of the native format's chunks (layout:
// include/opsight/internal/native_layout.hpp), shared by the recorder's stream writer
// and io's native reader and writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opsight/internal/native_layout.hpp"

namespace opsight::format {

uint32_t checksum32(const void* data, size_t size);
// The checksum of two byte ranges as if they were contiguous.
uint32_t checksum32(const void* first, size_t first_size, const void* second, size_t second_size);
// A chunk header for a payload of `payload_bytes` whose checksum is `payload_check`.
ChunkHeader make_chunk_header(ChunkType type, uint32_t payload_bytes, uint32_t payload_check);

// Appends the 16-byte file header.
void append_file_header(std::string& out);
// Appends a chunk header for a payload of `payload_bytes` whose checksum is `payload_check`.
void append_chunk_header(std::string& out, ChunkType type, uint32_t payload_bytes,
                         uint32_t payload_check);
// Writes a chunk in place: begin_chunk() reserves the header and returns its position,
// the caller appends the payload, end_chunk() fills the header in.
size_t begin_chunk(std::string& out);
void end_chunk(std::string& out, size_t header_position, ChunkType type);
// Appends a whole chunk (header + payload).
void append_chunk(std::string& out, ChunkType type, std::string_view payload);

// Little helpers for building payloads.
template <typename T>
void append_pod(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
void append_sized_string(std::string& out, std::string_view text);  // u32 length + bytes
// Appends a whole kRunInfo chunk holding `entries` (key/value strings, in order).
void append_run_info_chunk(std::string& out,
                           const std::vector<std::pair<std::string, std::string>>& entries);

// Validates the chunk header at `offset` of `file`. Returns the payload view, or nullopt
// with *problem set ("chunk header cut short", "bad chunk header checksum", ...).
struct ChunkView {
  ChunkType type;
  std::string_view payload;
  uint64_t payload_offset;
  uint32_t payload_check = 0;  // the checksum the header gives the payload
};
// With `defer_events_payload_check`, a kEvents chunk's payload is not checksummed here:
// the caller checks it with payload_intact() when it reads the payload (the native reader,
// so that the chunk is in the cache when it is decoded, not read from memory twice).
std::optional<ChunkView> read_chunk(std::string_view file, uint64_t offset, std::string* problem,
                                    bool defer_events_payload_check = false);
// Whether the payload matches its checksum (what read_chunk checks unless it deferred it).
bool payload_intact(const ChunkView& chunk);

}  // namespace opsight::format
