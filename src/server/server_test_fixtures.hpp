// Test helpers of the server's suites: a throwaway run store holding two runs of a small
// "inference" trace (B slower than A), one of them with a span whose name is HTML; a run
// of several traces.
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

// A run of several traces (trace_list.hpp), the rows after finalize() in brackets:
//   pid 100 "python serve.py", thread 101: root "step" [1000, 11000) > "forward" carrying
//     exception.type; root "step" [20000, 23000) > "forward";
//   pid 100, thread 102: "GET /predict" [5000, 45000), a request served for a caller's
//     trace kManyTracesCaller (remote parent 0x1122334455667788) > "handler" carrying
//     error.type 500 > "model";
//   pid 200 "worker", thread 201: root "job" [8000, 8500); root "batch" [70000, 70100) >
//     "call" [70010, 70060), which began a trace of its own (kManyTracesBegun);
//   pid 200, thread 202: "GET /predict" [60000, 62000), a second request of the same
//     caller's trace (remote parent 0x99).
// So: six traces; the caller's spans two processes and runs 5000 to 62000 (4 spans, 1
// error, 2 roots), step 1 has 2 spans and 1 error.
inline constexpr trace::TraceId kManyTracesCaller{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
inline constexpr trace::TraceId kManyTracesBegun{0x5555, 0x6666};

inline trace::Trace many_traces_trace() {
  trace::Trace trace;
  trace.process(100).name = trace.intern("python serve.py");
  trace.process(200).name = trace.intern("worker");
  const trace::TrackId main = trace.thread_track(100, 101), server = trace.thread_track(100, 102),
                       worker = trace.thread_track(200, 201), second = trace.thread_track(200, 202);
  const trace::StringId step = trace.intern("step"), forward = trace.intern("forward"),
                        request = trace.intern("GET /predict");
  trace.slices.add(1000, 10000, step, 0, main);
  const trace::RowIndex failed = trace.slices.add(1100, 5000, forward, 0, main);
  trace.slice_args.add(failed, trace.intern("exception.type"),
                       trace::ArgValue::of_string(trace.intern("ValueError")));
  trace.slices.add(20000, 3000, step, 0, main);
  trace.slices.add(20100, 1000, forward, 0, main);
  const trace::RowIndex served = trace.slices.add(5000, 40000, request, 0, server);
  trace.span_contexts.add(served, kManyTracesCaller, 0x1122334455667788ULL, 1);
  const trace::RowIndex handler = trace.slices.add(5100, 30000, trace.intern("handler"), 0, server);
  trace.slice_args.add(handler, trace.intern("error.type"),
                       trace::ArgValue::of_string(trace.intern("500")));
  trace.slices.add(5200, 1000, trace.intern("model"), 0, server);
  trace.slices.add(8000, 500, trace.intern("job"), 0, worker);
  trace.slices.add(70000, 100, trace.intern("batch"), 0, worker);
  const trace::RowIndex call = trace.slices.add(70010, 50, trace.intern("call"), 0, worker);
  trace.span_contexts.add(call, kManyTracesBegun, 0, 1);
  const trace::RowIndex again = trace.slices.add(60000, 2000, request, 0, second);
  trace.span_contexts.add(again, kManyTracesCaller, 0x99, 1);
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
