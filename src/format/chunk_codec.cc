#include "format/chunk_codec.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace opsight::format {
namespace {
// A fuzz build (OPSIGHT_FUZZING_SKIP_CHECKSUM, set only by the fuzz preset) reads chunks whose
// checksums do not match, so that mutated inputs reach the decoder behind the CRC.
#ifdef OPSIGHT_FUZZING_SKIP_CHECKSUM
constexpr bool kSkipChecksums = true;
#else
constexpr bool kSkipChecksums = false;
#endif
}  // namespace

uint32_t checksum32(const void* data, size_t size) {
  return static_cast<uint32_t>(XXH3_64bits(data, size));
}

uint32_t checksum32(const void* first, size_t first_size, const void* second, size_t second_size) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, first, first_size);
  XXH3_64bits_update(&state, second, second_size);
  return static_cast<uint32_t>(XXH3_64bits_digest(&state));
}

ChunkHeader make_chunk_header(ChunkType type, uint32_t payload_bytes, uint32_t payload_check) {
  ChunkHeader header{static_cast<uint32_t>(type), payload_bytes, payload_check, 0};
  header.header_check = checksum32(&header, 12);
  return header;
}

void append_file_header(std::string& out) {
  FileHeader header{};
  std::memcpy(header.magic, kFileMagic, sizeof(kFileMagic));
  header.version = kFormatVersion;
  header.header_bytes = sizeof(FileHeader);
  header.flags = 0;
  append_pod(out, header);
}

void append_chunk_header(std::string& out, ChunkType type, uint32_t payload_bytes,
                         uint32_t payload_check) {
  append_pod(out, make_chunk_header(type, payload_bytes, payload_check));
}

void append_chunk(std::string& out, ChunkType type, std::string_view payload) {
  append_chunk_header(out, type, static_cast<uint32_t>(payload.size()),
                      checksum32(payload.data(), payload.size()));
  out.append(payload);
}

size_t begin_chunk(std::string& out) {
  size_t position = out.size();
  out.resize(position + sizeof(ChunkHeader));
  return position;
}

void end_chunk(std::string& out, size_t header_position, ChunkType type) {
  size_t payload_start = header_position + sizeof(ChunkHeader);
  size_t payload_bytes = out.size() - payload_start;
  ChunkHeader header = make_chunk_header(type, static_cast<uint32_t>(payload_bytes),
                                         checksum32(out.data() + payload_start, payload_bytes));
  std::memcpy(out.data() + header_position, &header, sizeof(header));
}

void append_sized_string(std::string& out, std::string_view text) {
  append_pod(out, static_cast<uint32_t>(text.size()));
  out.append(text);
}

void append_run_info_chunk(std::string& out,
                           const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string payload;
  append_pod(payload, static_cast<uint32_t>(entries.size()));
  for (const auto& [key, value] : entries) {
    append_sized_string(payload, key);
    append_sized_string(payload, value);
  }
  append_chunk(out, ChunkType::kRunInfo, payload);
}

std::optional<ChunkView> read_chunk(std::string_view file, uint64_t offset, std::string* problem,
                                    bool defer_events_payload_check) {
  if (offset > file.size() || file.size() - offset < sizeof(ChunkHeader)) {
    *problem = "chunk header cut short";
    return std::nullopt;
  }
  ChunkHeader header;
  std::memcpy(&header, file.data() + offset, sizeof(header));
  if (!kSkipChecksums && checksum32(&header, 12) != header.header_check) {
    *problem = "bad chunk header checksum";
    return std::nullopt;
  }
  if (header.payload_bytes > kMaxChunkPayload) {
    *problem = "chunk larger than the format allows";
    return std::nullopt;
  }
  uint64_t payload_offset = offset + sizeof(ChunkHeader);
  if (file.size() - payload_offset < header.payload_bytes) {
    *problem = "chunk payload cut short";
    return std::nullopt;
  }
  ChunkView chunk{static_cast<ChunkType>(header.type),
                  file.substr(payload_offset, header.payload_bytes), payload_offset,
                  header.payload_check};
  if (!(defer_events_payload_check && chunk.type == ChunkType::kEvents) && !payload_intact(chunk)) {
    *problem = "bad chunk payload checksum";
    return std::nullopt;
  }
  return chunk;
}

bool payload_intact(const ChunkView& chunk) {
  return kSkipChecksums ||
         checksum32(chunk.payload.data(), chunk.payload.size()) == chunk.payload_check;
}

}  // namespace opsight::format
