// opsight_synthetic_run: records a run of a chosen size with the real recorder, for the
// pipeline benchmarks of long runs (benchmarks/python/pipeline_memory.py, docs/performance.md
// "Runs of hours"). Each thread records trees of a request holding a forward holding two
// operators (four spans), one argument on every request, a counter every 1,024 requests.
//
//   opsight_synthetic_run OUTPUT.opsight SPANS [THREADS]
//
// The recorder drops events when its writer falls behind; the run is paced so that it does
// not, and the tool fails (exit 1) if any event was dropped, so that every figure measured
// on its output is of exactly SPANS spans.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <opsight/opsight.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

// A few nanoseconds of work between spans, so that recording does not outrun the writer.
void pause_briefly(int rounds) {
  static std::atomic<uint64_t> sink{0};
  uint64_t value = 0;
  for (int i = 0; i < rounds; ++i) value = value * 6364136223846793005ull + 1442695040888963407ull;
  sink.fetch_add(value, std::memory_order_relaxed);
}

void record_requests(int64_t requests, int thread) {
  OPSIGHT_THREAD_NAME(("worker-" + std::to_string(thread)).c_str());
  for (int64_t request = 0; request < requests; ++request) {
    OPSIGHT_SPAN_CATEGORY("python", "handle_request");
    opsight::add_arg("request", request);
    {
      OPSIGHT_SPAN_CATEGORY("module", "forward");
      {
        OPSIGHT_SPAN_CATEGORY("cpu_op", "aten::linear");
        pause_briefly(8);
      }
      {
        OPSIGHT_SPAN_CATEGORY("cpu_op", "aten::relu");
        pause_briefly(4);
      }
    }
    if (request % 1024 == 0) OPSIGHT_COUNTER("requests_done", static_cast<double>(request));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUTPUT.opsight SPANS [THREADS]\n", argv[0]);
    return 64;
  }
  const std::string output = argv[1];
  const int64_t spans = std::atoll(argv[2]);
  const int threads = argc > 3 ? std::atoi(argv[3]) : 4;
  if (spans <= 0 || threads <= 0) {
    std::fprintf(stderr, "%s: SPANS and THREADS must be positive\n", argv[0]);
    return 64;
  }
  opsight::SessionOptions options;
  options.output = output;
  options.buffer_bytes = size_t{512} << 20;
  auto started = std::chrono::steady_clock::now();
  opsight::Session session(options);
  if (!session.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], session.error().c_str());
    return 1;
  }
  const int64_t requests_per_thread = spans / 4 / threads;
  std::vector<std::thread> workers;
  for (int thread = 0; thread < threads; ++thread)
    workers.emplace_back(record_requests, requests_per_thread, thread);
  for (auto& worker : workers) worker.join();
  session.stop();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int64_t recorded = requests_per_thread * 4 * threads;
  std::printf("%s: %lld spans on %d threads in %.1f s, %llu events dropped\n", output.c_str(),
              static_cast<long long>(recorded), threads, seconds,
              static_cast<unsigned long long>(session.events_dropped()));
  if (!session.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], session.error().c_str());
    return 1;
  }
  return session.events_dropped() == 0 ? 0 : 1;
}
