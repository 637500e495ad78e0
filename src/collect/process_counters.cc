// Kernel counters behind metrics; see process_counters.hpp.
#include "collect/process_counters.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <string>
#include <string_view>

#include "opsight/metrics.hpp"

namespace opsight::collect {
namespace {

int64_t clock_ns(clockid_t clock) {
  timespec now{};
  if (clock_gettime(clock, &now) != 0) return 0;
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Reads a /proc file from offset 0 into `buffer`; the size read, or -1.
ssize_t read_whole(int descriptor, char* buffer, size_t capacity) {
  if (descriptor < 0) return -1;
  ssize_t size = pread(descriptor, buffer, capacity - 1, 0);
  if (size >= 0) buffer[size] = '\0';
  return size;
}

// A descriptor opened once for the whole process and never closed (the process may read
// it from any thread until it exits, including from atexit handlers).
int shared_descriptor(const char* path, int flags) {
  int descriptor = open(path, flags | O_CLOEXEC);
  return descriptor;
}

int statm_descriptor() {
  static const int descriptor = shared_descriptor("/proc/self/statm", O_RDONLY);
  return descriptor;
}

int status_descriptor() {
  static const int descriptor = shared_descriptor("/proc/self/status", O_RDONLY);
  return descriptor;
}

int process_io_descriptor() {
  static const int descriptor = shared_descriptor("/proc/self/io", O_RDONLY);
  return descriptor;
}

// The calling thread's /proc/thread-self/io, opened on first use and closed when the
// thread exits.
struct ThreadIoFile {
  int descriptor = -2;  // -2: not opened yet; -1: cannot be opened
  ~ThreadIoFile() {
    if (descriptor >= 0) close(descriptor);
  }
  int get() {
    if (descriptor == -2) {
      descriptor = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
      if (descriptor < 0) {
        std::string path =
            "/proc/self/task/" + std::to_string(static_cast<long>(syscall(SYS_gettid))) + "/io";
        descriptor = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      }
    }
    return descriptor;
  }
};
thread_local ThreadIoFile t_thread_io_file;

// The value after `field` (e.g. "rchar: ") in `text`, if present.
std::optional<uint64_t> field_value(std::string_view text, std::string_view field) {
  size_t at = text.find(field);
  while (at != std::string_view::npos && at != 0 && text[at - 1] != '\n')
    at = text.find(field, at + 1);
  if (at == std::string_view::npos) return std::nullopt;
  size_t position = at + field.size();
  while (position < text.size() && (text[position] == ' ' || text[position] == '\t')) ++position;
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data() + position, text.data() + text.size(), value);
  if (error != std::errc()) return std::nullopt;
  return value;
}

std::atomic<uint64_t> g_process_sent{0};
std::atomic<uint64_t> g_process_received{0};
thread_local constinit NetworkCounters t_network{};

const int64_t kPageBytes = sysconf(_SC_PAGESIZE);

}  // namespace

int64_t thread_cpu_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }
int64_t process_cpu_ns() { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

std::optional<int64_t> resident_bytes() {
  char buffer[128];
  ssize_t size = read_whole(statm_descriptor(), buffer, sizeof(buffer));
  if (size <= 0) return std::nullopt;
  // "size resident shared text lib data dt", in pages.
  const char* position = buffer;
  const char* end = buffer + size;
  while (position < end && *position != ' ') ++position;
  uint64_t resident_pages = 0;
  if (std::from_chars(position + 1, end, resident_pages).ec != std::errc()) return std::nullopt;
  return static_cast<int64_t>(resident_pages) * kPageBytes;
}

std::optional<ResidentStatus> parse_status(const char* text, size_t size) {
  std::string_view view(text, size);
  auto resident = field_value(view, "VmRSS:");
  auto high_water = field_value(view, "VmHWM:");
  if (!resident || !high_water) return std::nullopt;
  return ResidentStatus{static_cast<int64_t>(*resident) * 1024,
                        static_cast<int64_t>(*high_water) * 1024};
}

std::optional<ResidentStatus> resident_status() {
  char buffer[4096];
  ssize_t size = read_whole(status_descriptor(), buffer, sizeof(buffer));
  if (size <= 0) return std::nullopt;
  return parse_status(buffer, static_cast<size_t>(size));
}

bool reset_resident_high_water() {
  static const int descriptor = shared_descriptor("/proc/self/clear_refs", O_WRONLY);
  return descriptor >= 0 && pwrite(descriptor, "5", 1, 0) == 1;
}

std::optional<IoCounters> parse_io(const char* text, size_t size) {
  std::string_view view(text, size);
  auto read = field_value(view, "rchar:");
  auto write = field_value(view, "wchar:");
  auto storage_read = field_value(view, "read_bytes:");
  auto storage_write = field_value(view, "write_bytes:");
  if (!read || !write || !storage_read || !storage_write) return std::nullopt;
  return IoCounters{*read, *write, *storage_read, *storage_write};
}

std::optional<IoCounters> thread_io() {
  char buffer[512];
  ssize_t size = read_whole(t_thread_io_file.get(), buffer, sizeof(buffer));
  if (size <= 0) return std::nullopt;
  return parse_io(buffer, static_cast<size_t>(size));
}

std::optional<IoCounters> process_io() {
  char buffer[512];
  ssize_t size = read_whole(process_io_descriptor(), buffer, sizeof(buffer));
  if (size <= 0) return std::nullopt;
  return parse_io(buffer, static_cast<size_t>(size));
}

NetworkCounters thread_network() { return t_network; }

NetworkCounters process_network() {
  return {g_process_sent.load(std::memory_order_relaxed),
          g_process_received.load(std::memory_order_relaxed)};
}

}  // namespace opsight::collect

namespace opsight {

void count_network_bytes(uint64_t sent, uint64_t received) {
  collect::t_network.sent_bytes += sent;
  collect::t_network.received_bytes += received;
  if (sent != 0) collect::g_process_sent.fetch_add(sent, std::memory_order_relaxed);
  if (received != 0) collect::g_process_received.fetch_add(received, std::memory_order_relaxed);
}

}  // namespace opsight
