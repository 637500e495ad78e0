// OPSIGHT_DEBUG_TIMING set: the readers print how long each phase of a read took to stderr
// (the figures of docs/performance.md's breakdowns). Off, a lap costs one branch.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace opsight::io {

inline bool debug_timing_enabled() {
  static const bool enabled = std::getenv("OPSIGHT_DEBUG_TIMING") != nullptr;
  return enabled;
}

class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;
  // Prints the time since the previous lap (or the start) as `phase`.
  void lap(const char* phase) {
    if (!debug_timing_enabled()) return;
    auto now = Clock::now();
    print(phase, std::chrono::duration<double, std::milli>(now - start_).count());
    start_ = now;
  }
  // With the process's resident memory now and at its peak (VmRSS, VmHWM), in MB.
  static void print(const char* phase, double ms) {
    if (!debug_timing_enabled()) return;
    long rss_kb = 0;
    long peak_kb = 0;
    if (std::FILE* status = std::fopen("/proc/self/status", "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, status) != nullptr) {
        std::sscanf(line, "VmRSS: %ld", &rss_kb);
        std::sscanf(line, "VmHWM: %ld", &peak_kb);
      }
      std::fclose(status);
    }
    std::fprintf(stderr, "opsight timing: %-28s %8.1f ms  rss %5ld MB  peak %5ld MB\n", phase, ms,
                 rss_kb / 1024, peak_kb / 1024);
  }

 private:
  Clock::time_point start_ = Clock::now();
};

}  // namespace opsight::io
