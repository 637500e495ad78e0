// Readers of the kernel's per-process and per-thread counters that metrics are made of:
// thread CPU time, resident set size and its high-water mark, and read/write accounting
// (/proc/<pid>/io, per process and per thread). Each read is one system call on a file
// descriptor kept open (/proc files are regenerated on every read at offset 0), so a
// metric costs a few microseconds, not the tens an open/read/close would.
//
// Network bytes are counted by whoever does the I/O (count_network_bytes in
// <opsight/metrics.hpp>): the kernel keeps no per-process socket byte counters.
//
// Thread-safety: every function may be called from any thread; per-thread readers keep a
// thread-local descriptor, process-wide ones share one opened once.
#pragma once

#include <cstdint>
#include <optional>

namespace opsight::collect {

// CPU time the calling thread has used (user + system), in ns.
int64_t thread_cpu_ns();
// CPU time the whole process has used (user + system, all threads), in ns.
int64_t process_cpu_ns();

// Resident set size of the process now (from /proc/self/statm); nullopt if unreadable.
std::optional<int64_t> resident_bytes();

struct ResidentStatus {
  int64_t resident_bytes = 0;    // VmRSS
  int64_t high_water_bytes = 0;  // VmHWM: the largest RSS since start or the last reset
};
// Both at once (from /proc/self/status, dearer than resident_bytes()).
std::optional<ResidentStatus> resident_status();
// Sets the kernel's RSS high-water mark of the process to its current RSS (writes "5" to
// /proc/self/clear_refs). False where the kernel or a sandbox forbids it.
bool reset_resident_high_water();

// Read/write accounting (the fields of /proc/<pid>/io).
struct IoCounters {
  uint64_t read_bytes = 0;           // rchar: bytes passed to read-like system calls
  uint64_t write_bytes = 0;          // wchar
  uint64_t storage_read_bytes = 0;   // read_bytes: bytes fetched from storage
  uint64_t storage_write_bytes = 0;  // write_bytes: bytes sent towards storage
};
std::optional<IoCounters> thread_io();   // the calling thread's (/proc/thread-self/io)
std::optional<IoCounters> process_io();  // the process's, all threads (/proc/self/io)

// Parses the text of an io file; nullopt if a field is missing. Exposed for tests.
std::optional<IoCounters> parse_io(const char* text, size_t size);
// Parses the text of /proc/self/status; nullopt if VmRSS or VmHWM is missing.
std::optional<ResidentStatus> parse_status(const char* text, size_t size);

// Network bytes counted through count_network_bytes(): the calling thread's, and the
// process's (every thread, including threads that have exited).
struct NetworkCounters {
  uint64_t sent_bytes = 0;
  uint64_t received_bytes = 0;
};
NetworkCounters thread_network();
NetworkCounters process_network();

}  // namespace opsight::collect
