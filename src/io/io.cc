#include "io/io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "io/chrome_json/chrome_json_reader.hpp"
#include "io/debug_timing.hpp"
#include "io/trace_formats.hpp"
#include "opsight/internal/native_layout.hpp"

namespace opsight::io {

namespace {
bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}
}  // namespace

std::optional<FileFormat> format_from_path(std::string_view path) {
  if (ends_with(path, kNativeStreamExtension)) return FileFormat::kNative;
  for (const TraceFileFormat& row : kTraceFileFormats)
    for (std::string_view extension : row.extensions)
      if (ends_with(path, extension)) return row.format;
  return std::nullopt;
}

std::optional<FileFormat> format_from_content(std::string_view head) {
  if (head.size() >= sizeof(format::kFileMagic) &&
      std::memcmp(head.data(), format::kFileMagic, sizeof(format::kFileMagic)) == 0)
    return FileFormat::kNative;
  for (char c : head) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '{' || c == '[') return FileFormat::kChromeJson;
    break;
  }
  return std::nullopt;
}

std::string Diagnostic::to_string(std::string_view file) const {
  std::string text(file);
  if (has_offset) text += ": at byte " + std::to_string(byte_offset);
  text += ": " + message;
  return text;
}

std::optional<std::string> read_file_bytes(const std::string& path, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return std::nullopt;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || S_ISDIR(info.st_mode)) {
    *error = path + (S_ISDIR(info.st_mode) ? ": is a directory" : ": cannot stat");
    ::close(fd);
    return std::nullopt;
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(info.st_size));
  size_t filled = 0;
  char probe[4096];
  while (true) {
    // Once the string is full, a small read finds out whether more comes (growing files,
    // pipes): growing the string first doubled it, and copied it, for every whole file.
    const bool full = filled == bytes.size();
    ssize_t got = ::read(fd, full ? probe : bytes.data() + filled,
                         full ? sizeof probe : bytes.size() - filled);
    if (got < 0) {
      if (errno == EINTR) continue;
      *error = path + ": cannot read: " + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (got == 0) break;
    if (full) bytes.append(probe, static_cast<size_t>(got));
    filled += static_cast<size_t>(got);
  }
  ::close(fd);
  bytes.resize(filled);
  return bytes;
}

FileSink::FileSink(std::string path) : path_(std::move(path)) {
  static std::atomic<uint64_t> writes{0};
  temporary_ = path_ + ".tmp." + std::to_string(::getpid()) + "." +
               std::to_string(writes.fetch_add(1, std::memory_order_relaxed));
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) error_ = path_ + ": cannot open for writing: " + std::strerror(errno);
}

FileSink::~FileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
}

void FileSink::fail(const char* doing) {
  if (!error_) error_ = path_ + ": " + doing + ": " + std::strerror(errno);
}

bool FileSink::write(std::string_view bytes) {
  if (error_) return false;
  while (!bytes.empty()) {
    ssize_t written = ::write(fd_, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

std::optional<std::string> FileSink::commit() {
  if (error_) return error_;
  int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) {
    fail("cannot write");
    return error_;
  }
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    fail("cannot write");
    return error_;
  }
  temporary_.clear();  // in place: nothing to remove
  return std::nullopt;
}

std::optional<std::string> write_file_bytes(const std::string& path, std::string_view bytes) {
  FileSink sink(path);
  sink.write(bytes);
  return sink.commit();
}

namespace {

// A regular file mapped read-only: its bytes straight from the page cache, where reading
// them into a string first zeroed and then copied every page (a third of the time of a
// Chrome JSON read of 200 MB, and a second copy of the file while the string grew). The
// pages a reader is done with can be handed back (drop_before): the mapping stays valid,
// and a page touched again is faulted in from the page cache. A file cut shorter while
// mapped would fault with SIGBUS: trace files are written to a temporary and renamed.
class MappedFile {
 public:
  // nullopt for what cannot be mapped (pipes, /proc files, an empty file): read instead.
  // `random_access`: only some pages will be read (a time window through the native
  // index): no read-ahead of the whole file.
  static std::optional<MappedFile> open(const std::string& path, bool random_access = false) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat info {};
    std::optional<MappedFile> mapped;
    if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0) {
      auto size = static_cast<size_t>(info.st_size);
      void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (address != MAP_FAILED) {
        if (random_access) {
          ::madvise(address, size, MADV_RANDOM);
        } else {
          ::madvise(address, size, MADV_SEQUENTIAL);
          ::madvise(address, size, MADV_WILLNEED);
        }
        mapped.emplace(static_cast<const char*>(address), size);
      }
    }
    ::close(fd);
    return mapped;
  }
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}
  MappedFile(MappedFile&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(other.size_), dropped_(other.dropped_) {}
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }

  std::string_view bytes() const { return {data_, size_}; }

  // The pages wholly before `end` leave the process's memory (not the page cache), once
  // at least 8 MiB of them are done; a pointer outside the mapping is ignored.
  void drop_before(const char* end) {
    if (end < data_ || end > data_ + size_) return;
    constexpr size_t kPage = 4096;
    constexpr size_t kAtLeast = size_t{8} << 20;
    size_t up_to = static_cast<size_t>(end - data_) / kPage * kPage;
    if (up_to < dropped_ + kAtLeast) return;
    ::madvise(const_cast<char*>(data_) + dropped_, up_to - dropped_, MADV_DONTNEED);
    dropped_ = up_to;
  }

 private:
  const char* data_;
  size_t size_;
  size_t dropped_ = 0;
};

}  // namespace

ReadResult read_trace_file(const std::string& path) {
  std::string problem;
  PhaseClock clock;
  std::optional<MappedFile> mapped = MappedFile::open(path);
  std::optional<std::string> read;
  if (!mapped) read = read_file_bytes(path, &problem);
  clock.lap("map or read file");
  if (!mapped && !read) {
    ReadResult result;
    result.error = Diagnostic{problem.substr(path.size() + 2), 0, false};
    return result;
  }
  std::string_view bytes = mapped ? mapped->bytes() : std::string_view(*read);
  auto format = format_from_content(bytes.substr(0, 64));
  // A Perfetto trace starts with 0x0a ('\n'): when its first packet is 91 or 123 bytes long
  // it looks like whitespace and then '[' or '{'. Its extension decides, not its bytes.
  if (format == FileFormat::kChromeJson && format_from_path(path) == FileFormat::kPerfetto)
    format = FileFormat::kPerfetto;
  if (!format) format = format_from_path(path);
  if (!format) {
    ReadResult result;
    result.error = Diagnostic{
        bytes.empty() ? "file is empty" : "not a trace: neither an opsight file nor JSON", 0, true};
    return result;
  }
  if (*format == FileFormat::kPerfetto) return read_perfetto(bytes);
  if (*format == FileFormat::kNative) {
    if (!mapped) return read_native(bytes);
    return read_native_dropping_input(bytes, [&](const char* done) { mapped->drop_before(done); });
  }
  if (!mapped) return read_chrome_json(bytes);
  return chrome_json::read_chrome_json_dropping_input(
      bytes, [&](const char* done) { mapped->drop_before(done); });
}

ReadResult read_trace_file(const std::string& path, const TimeWindow& window) {
  std::optional<MappedFile> mapped = MappedFile::open(path, /*random_access=*/true);
  if (mapped && format_from_content(mapped->bytes().substr(0, 64)) == FileFormat::kNative)
    return read_native(mapped->bytes(), window);  // only the pages the window needs
  mapped.reset();
  ReadResult result = read_trace_file(path);
  if (result.ok()) {
    int64_t start = result.trace.time_bounds().first;
    auto plus = [](int64_t a, int64_t b) {
      int64_t sum = 0;
      return __builtin_add_overflow(a, b, &sum) ? (b > 0 ? INT64_MAX : INT64_MIN) : sum;
    };
    trace::keep_time_window(result.trace, plus(start, window.from_ns), plus(start, window.to_ns),
                            trace::WindowRule::kOverlaps);
  }
  return result;
}

ReadFilesResult read_trace_files(const std::vector<std::string>& paths) {
  ReadFilesResult result;
  if (paths.empty()) {
    result.error = "no trace file given";
    return result;
  }
  for (size_t index = 0; index < paths.size(); ++index) {
    ReadResult file = read_trace_file(paths[index]);
    if (!file.ok()) {
      result.error = file.error->to_string(paths[index]);
      result.trace = trace::Trace();
      result.damage.clear();
      return result;
    }
    if (file.damage) result.damage.push_back(file.damage->to_string(paths[index]));
    if (index == 0)
      result.trace = std::move(file.trace);
    else
      trace::append_trace(result.trace, file.trace);
  }
  return result;
}

std::optional<std::string> write_trace_file(const trace::Trace& trace, const std::string& path) {
  auto format = format_from_path(path);
  if (!format) return unknown_output_format(path);
  FileSink sink(path);
  bool whole = false;
  try {
    whole = *format == FileFormat::kNative       ? write_native(trace, sink)
            : *format == FileFormat::kChromeJson ? write_chrome_json(trace, sink)
                                                 : write_perfetto(trace, sink);
  } catch (const std::bad_alloc&) {
    return path + ": out of memory while writing";
  }
  // A writer stops only when the sink refused bytes: the file is then left out (the
  // temporary removed), never renamed into place torn.
  if (!whole) return sink.error().value_or(path + ": cannot write");
  return sink.commit();
}

}  // namespace opsight::io
