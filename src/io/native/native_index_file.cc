// `opsight index FILE`: the time index of a native file that has none (a process killed
// mid-session never writes one), built by a scan of the file's chunks and appended to the
// file in place. What the appended bytes are: docs/native-format.md, "Time index".
//
// Why a crash cannot make the file unreadable: nothing before the file's end is written;
// the index goes after it as one kIndex part and the 32-byte trailer, in one write, then
// fsync. A file cut anywhere in those bytes has no valid trailer at its end, so a reader
// scans as it did before, and the cut index part is the chunk the scan stops at (after
// every chunk of the recording).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "format/chunk_codec.hpp"
#include "format/chunk_index.hpp"
#include "io/io.hpp"
#include "opsight/internal/native_layout.hpp"

namespace opsight::io {

namespace {

// A read-only mapping of a whole file, unmapped when it goes.
class IndexFileMapping {
 public:
  IndexFileMapping(const IndexFileMapping&) = delete;
  IndexFileMapping& operator=(const IndexFileMapping&) = delete;
  explicit IndexFileMapping(int fd, size_t size) : size_(size) {
    if (size_ == 0) return;
    void* data = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data != MAP_FAILED) data_ = static_cast<const char*>(data);
  }
  ~IndexFileMapping() {
    if (data_) munmap(const_cast<char*>(data_), size_);
  }
  bool ok() const { return data_ != nullptr || size_ == 0; }
  std::string_view bytes() const { return data_ ? std::string_view(data_, size_) : ""; }

 private:
  const char* data_ = nullptr;
  size_t size_;
};

std::string index_file_errno(const std::string& path, const char* what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

}  // namespace

std::optional<std::string> build_native_index(std::string_view bytes, NativeIndexAdded* added,
                                              std::string* problem, bool* already_indexed) {
  *added = {};
  *already_indexed = false;
  if (bytes.size() < sizeof(format::FileHeader) ||
      std::memcmp(bytes.data(), format::kFileMagic, sizeof(format::kFileMagic)) != 0) {
    *problem = "not an .opsight file (no opsight file header)";
    return std::nullopt;
  }
  std::string index_problem;
  if (auto index = format::read_index(bytes, &index_problem)) {
    *already_indexed = true;
    *problem = "already has a time index (" + std::to_string(index->size()) + " chunks)";
    return std::nullopt;
  }
  format::FileHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  uint64_t offset = std::max<uint64_t>(header.header_bytes, sizeof(format::FileHeader));
  // One part, however many chunks: parts must lie between the chunks they list, and these
  // all go after the file's end. The part's size limit is checked by append_index.
  format::IndexBuilder builder(std::numeric_limits<size_t>::max());
  while (offset < bytes.size()) {
    std::string chunk_problem;
    auto chunk = format::read_chunk(bytes, offset, &chunk_problem);
    if (!chunk) {
      added->left_out_offset = offset;
      added->bytes_left_out = bytes.size() - offset;
      added->left_out_why = chunk_problem;
      break;
    }
    if (chunk->type == format::ChunkType::kEvents &&
        chunk->payload.size() >= sizeof(format::EventsHeader)) {
      format::EventsHeader events;
      std::memcpy(&events, chunk->payload.data(), sizeof(events));
      uint32_t slots = static_cast<uint32_t>(std::min<size_t>(
          events.slot_count, (chunk->payload.size() - sizeof(events)) / sizeof(format::Slot)));
      builder.add_events(offset, events.thread_index, chunk->payload.data() + sizeof(events),
                         slots);
      ++added->events_chunks_indexed;
    } else {
      builder.add_other(offset, chunk->type, chunk->payload);
    }
    offset = chunk->payload_offset + chunk->payload.size();
  }
  added->chunks_indexed = builder.entries().size();
  std::string out;
  if (!builder.append_index(out, bytes.size())) {
    *problem = "too many chunks (" + std::to_string(added->chunks_indexed) +
               ") for one index part of at most " + std::to_string(format::kMaxChunkPayload) +
               " bytes";
    return std::nullopt;
  }
  added->bytes_appended = out.size();
  return out;
}

std::optional<std::string> add_native_index(const std::string& path, NativeIndexAdded* added,
                                            bool* already_indexed) {
  *already_indexed = false;
  int fd = open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0) return index_file_errno(path, "cannot open");
  struct stat status {};
  if (fstat(fd, &status) != 0) {
    std::string error = index_file_errno(path, "cannot stat");
    close(fd);
    return error;
  }
  if (!S_ISREG(status.st_mode)) {
    close(fd);
    return path + ": not a regular file";
  }
  std::optional<std::string> out;
  std::string problem;
  {
    IndexFileMapping mapping(fd, static_cast<size_t>(status.st_size));
    if (!mapping.ok()) {
      std::string error = index_file_errno(path, "cannot map");
      close(fd);
      return error;
    }
    out = build_native_index(mapping.bytes(), added, &problem, already_indexed);
  }
  if (!out) {
    close(fd);
    return path + ": " + problem;
  }
  // The file must not have grown meanwhile (a recorder still writing it): the index's
  // offsets and its trailer's place assume the size it was scanned at.
  struct stat now {};
  if (fstat(fd, &now) != 0 || now.st_size != status.st_size) {
    close(fd);
    return path + ": the file changed while it was indexed (is a process still writing it?)";
  }
  size_t written = 0;
  while (written < out->size()) {
    ssize_t n = write(fd, out->data() + written, out->size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string error = index_file_errno(path, "cannot append the index");
      close(fd);
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    std::string error = index_file_errno(path, "cannot sync");
    close(fd);
    return error;
  }
  if (close(fd) != 0) return index_file_errno(path, "cannot close");
  return std::nullopt;
}

}  // namespace opsight::io
