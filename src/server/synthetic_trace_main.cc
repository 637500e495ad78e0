// Writes a synthetic trace of N slices for the UI's scale benchmark (make bench-ui,
// docs/performance.md): 4 processes' worth of threads (8 threads), each a sequence of
// requests "request" > "infer" > operators "op0".."op15", 1-20 µs operators, a gap between
// requests, and an RSS counter per thread sampled every 100 requests. Deterministic. With
// --args, every operator carries two args, "seq" (its number on the thread) and "shape"
// (one of 64 strings, "[N, 768]"), for the search's benchmark (docs/performance.md).
//
//   opsight_synthetic_trace SLICES OUTPUT.opsight [--args]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/io.hpp"
#include "trace/trace.hpp"

int main(int argc, char** argv) {
  const bool with_args = argc == 4 && std::string(argv[3]) == "--args";
  if (argc != 3 && !with_args) {
    std::fprintf(stderr, "usage: opsight_synthetic_trace SLICES OUTPUT.opsight [--args]\n");
    return 64;
  }
  const uint64_t wanted = std::strtoull(argv[1], nullptr, 10);
  opsight::trace::Trace trace;
  constexpr int kThreads = 8;
  constexpr int kOperators = 16;
  opsight::trace::StringId request = trace.intern("request"), infer = trace.intern("infer");
  opsight::trace::StringId operators[kOperators];
  for (int i = 0; i < kOperators; ++i) operators[i] = trace.intern("op" + std::to_string(i));
  opsight::trace::StringId category = trace.intern("synthetic");
  opsight::trace::StringId seq = trace.intern("seq"), shape = trace.intern("shape");
  opsight::trace::StringId shapes[64];
  for (int i = 0; i < 64; ++i) shapes[i] = trace.intern("[" + std::to_string(i * 8) + ", 768]");
  trace.slices.reserve(wanted + 64);
  const uint64_t per_thread = wanted / kThreads;
  uint64_t state = 12345;
  auto next = [&state] {
    state = opsight::trace::mix64(state);
    return state;
  };
  for (int thread = 0; thread < kThreads; ++thread) {
    int64_t pid = 1000 + thread / 2;
    trace.process(pid).name = trace.intern("worker " + std::to_string(thread / 2));
    opsight::trace::TrackId track = trace.thread_track(pid, pid * 10 + thread % 2);
    uint32_t rss = trace.counter_track(pid, "rss " + std::to_string(thread), "bytes");
    int64_t at = 1'000'000;
    uint64_t written = 0;
    uint64_t requests = 0;
    while (written + 2 + kOperators <= per_thread) {
      int64_t inner = at + 2000;
      int64_t op_at = inner + 500;
      int ops = 1 + static_cast<int>(next() % kOperators);
      for (int op = 0; op < ops; ++op) {
        int64_t dur = 1000 + static_cast<int64_t>(next() % 19'000);
        opsight::trace::RowIndex row = trace.slices.add(op_at, dur, operators[op], category, track);
        if (with_args) {
          trace.slice_args.add(
              row, seq, opsight::trace::ArgValue::of_int(static_cast<int64_t>(written + op)));
          trace.slice_args.add(row, shape,
                               opsight::trace::ArgValue::of_string(shapes[(written + op) % 64]));
        }
        op_at += dur + 200;
      }
      int64_t infer_end = op_at + 300;
      trace.slices.add(inner, infer_end - inner, infer, category, track);
      trace.slices.add(at, infer_end + 1000 - at, request, category, track);
      written += 2 + static_cast<uint64_t>(ops);
      if (requests++ % 100 == 0)
        trace.counters.add(at, rss, 1e8 + static_cast<double>(next() % 100'000'000));
      at = infer_end + 1000 + 5000 + static_cast<int64_t>(next() % 20'000);
    }
  }
  trace.finalize();
  if (auto problem = opsight::io::write_trace_file(trace, argv[2])) {
    std::fprintf(stderr, "opsight_synthetic_trace: %s\n", problem->c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: %zu slices\n", argv[2], trace.slices.size());
  return 0;
}
