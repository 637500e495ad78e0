#include "io/io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "opsight/internal/native_layout.hpp"

namespace opsight::io {

namespace {
bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}
}  // namespace

std::optional<FileFormat> format_from_path(std::string_view path) {
  if (ends_with(path, ".opsight") || ends_with(path, ".opsight.tmp")) return FileFormat::kNative;
  if (ends_with(path, ".json")) return FileFormat::kChromeJson;
  if (ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace"))
    return FileFormat::kPerfetto;
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
  while (true) {
    if (filled == bytes.size()) bytes.resize(bytes.size() + 65536);  // growing files, pipes
    ssize_t got = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (got < 0) {
      if (errno == EINTR) continue;
      *error = path + ": cannot read: " + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (got == 0) break;
    filled += static_cast<size_t>(got);
  }
  ::close(fd);
  bytes.resize(filled);
  return bytes;
}

// Writes to a new file beside `path`, then renames it over `path`: a crash or a full disk
// mid-write leaves the old file (or none), never a torn one.
std::optional<std::string> write_file_bytes(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> writes{0};
  std::string temporary = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(writes.fetch_add(1, std::memory_order_relaxed));
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return path + ": cannot open for writing: " + std::strerror(errno);
  auto fail = [&](const char* doing) {
    std::string problem = path + ": " + doing + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(temporary.c_str());
    return problem;
  };
  while (!bytes.empty()) {
    ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write");
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("cannot write");
  if (::rename(temporary.c_str(), path.c_str()) != 0) return fail("cannot write");
  return std::nullopt;
}

ReadResult read_trace_file(const std::string& path) {
  std::string problem;
  auto bytes = read_file_bytes(path, &problem);
  if (!bytes) {
    ReadResult result;
    result.error = Diagnostic{problem.substr(path.size() + 2), 0, false};
    return result;
  }
  auto format = format_from_content(std::string_view(*bytes).substr(0, 64));
  if (!format) format = format_from_path(path);
  if (!format) {
    ReadResult result;
    result.error = Diagnostic{
        bytes->empty() ? "file is empty" : "not a trace: neither an opsight file nor JSON", 0,
        true};
    return result;
  }
  if (*format == FileFormat::kPerfetto) {
    ReadResult result;
    result.error = Diagnostic{
        "Perfetto protobuf traces can be written but not read (open it in Perfetto UI, or "
        "convert the .opsight or .json it came from)",
        0, false};
    return result;
  }
  return *format == FileFormat::kNative ? read_native(*bytes) : read_chrome_json(*bytes);
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
  if (!format) return path + ": unknown output format (use .opsight, .json or .pftrace)";
  switch (*format) {
    case FileFormat::kNative:
      return write_file_bytes(path, write_native(trace));
    case FileFormat::kChromeJson:
      return write_file_bytes(path, write_chrome_json(trace));
    case FileFormat::kPerfetto:
      return write_file_bytes(path, write_perfetto(trace));
  }
  return path + ": unknown output format";
}

}  // namespace opsight::io
