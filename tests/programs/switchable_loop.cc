// The victim of `opsight ctl` for a C++ program: records a "step" span per iteration until
// the file argv[1] exists (or 60 s pass), counting the iterations made while recording and
// while switched off (opsight::recording() before and after the span agree) and the ones
// that straddled a switch. Every 20 iterations it writes "<on> <off>" to argv[2] (renamed
// into place), so a test knows how far it got; at the end it prints the counts and its
// longest switched-off stretch in nanoseconds as JSON.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <opsight/opsight.hpp>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s STOP_FILE PROGRESS_FILE\n", argv[0]);
    return 2;
  }
  const std::filesystem::path stop_file = argv[1];
  const std::string progress_file = argv[2];
  using Clock = std::chrono::steady_clock;
  long on = 0, off = 0, straddled = 0;
  Clock::duration longest_off{0};
  Clock::time_point off_since{};
  bool in_off_stretch = false;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  for (long iteration = 0; Clock::now() < deadline; ++iteration) {
    if (iteration % 20 == 0) {
      if (std::filesystem::exists(stop_file)) break;
      std::ofstream(progress_file + ".tmp") << on << " " << off << "\n";
      std::filesystem::rename(progress_file + ".tmp", progress_file);
    }
    bool before = opsight::recording();
    { OPSIGHT_SPAN("step"); }
    bool after = opsight::recording();
    Clock::time_point now = Clock::now();
    if (before != after) {
      ++straddled;
      in_off_stretch = false;
    } else if (before) {
      ++on;
      in_off_stretch = false;
    } else {
      ++off;
      if (!in_off_stretch) off_since = now;
      in_off_stretch = true;
      if (now - off_since > longest_off) longest_off = now - off_since;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  std::printf("{\"on\": %ld, \"off\": %ld, \"straddled\": %ld, \"longest_off_ns\": %lld}\n", on,
              off, straddled,
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(longest_off).count()));
  return 0;
}
