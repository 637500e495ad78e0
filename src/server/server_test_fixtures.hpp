// Test helpers of the server's suites: a throwaway run store holding two runs of a small
// "inference" trace (B slower than A), one of them with a span whose name is HTML.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/run_store.hpp"
#include "trace/trace.hpp"

namespace opsight::server::testing {

inline constexpr const char* kHostileName = "<img src=x onerror=alert(1)>";

// `count` inferences ("infer" with "encode" and "decode" children) on one thread, each
// `scale` times 1 ms long, with a counter "rss" sampled once per inference.
inline trace::Trace inference_trace(int count, int64_t scale, bool hostile = false) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(100, 101);
  trace.process(100).name = trace.intern("python serve.py");
  uint32_t rss = trace.counter_track(100, "rss", "bytes");
  int64_t at = 1'000'000;
  for (int i = 0; i < count; ++i) {
    int64_t dur = scale * (1'000'000 + 1000 * i);
    trace::RowIndex row = trace.slices.add(at, dur, trace.intern("infer"), 0, track);
    trace.slice_args.add(row, trace.intern("batch"), trace::ArgValue::of_int(i));
    trace.slices.add(at + 10, dur / 2, trace.intern("encode"), 0, track);
    trace.slices.add(at + 20 + dur / 2, dur / 4,
                     trace.intern(hostile && i == 0 ? kHostileName : "decode"), 0, track);
    trace.counters.add(at, rss, 1000.0 * (i + 1));
    at += dur + 50'000;
  }
  trace.run.overhead_ns = 12'000;
  trace.run.traced_ns = at;
  trace.finalize();
  return trace;
}

// A run store in a fresh temporary folder, removed when destroyed.
class TemporaryStore {
 public:
  explicit TemporaryStore(const std::string& test_name) {
    folder_ = std::filesystem::temp_directory_path() /
              ("opsight-server-test-" + std::to_string(getpid()) + "-" + test_name);
    std::filesystem::remove_all(folder_);
    std::filesystem::create_directories(folder_);
    path_ = (folder_ / "runs.db").string();
  }
  ~TemporaryStore() { std::filesystem::remove_all(folder_); }
  const std::string& path() const { return path_; }
  const std::filesystem::path& folder() const { return folder_; }

  // Adds run A (20 inferences, 1x, hostile name) and B (20 inferences, 3x as long).
  void add_two_runs() {
    auto opened = store::RunStore::open(path_);
    if (!opened.ok()) throw std::runtime_error(opened.error());
    store::RunMetadata a;
    a.name = "baseline";
    a.command = "python serve.py";
    a.tags = {{"model", "bert"}};
    opened.value()->add(inference_trace(20, 1, true), a);
    store::RunMetadata b;
    b.name = "slower";
    b.command = "python serve.py --slow";
    opened.value()->add(inference_trace(20, 3, false), b);
  }

 private:
  std::filesystem::path folder_;
  std::string path_;
};

}  // namespace opsight::server::testing
