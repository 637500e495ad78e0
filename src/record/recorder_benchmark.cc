// The recorder's hot path against baselines measured in the same run:
//   BM_ClockReadTwice   the floor: two clock reads (what any span must do)
//   BM_SpanEnabled      OPSIGHT_SPAN with a session recording (streamed to a null sink)
//   BM_SpanNoSession    OPSIGHT_SPAN with no session: one load and one branch
//   BM_SpanCompiledOut  OPSIGHT_SPAN with OPSIGHT_ENABLE=0 (recorder_benchmark_disabled.cc)
//   BM_EmptyLoop        the loop alone
//   BM_AsyncSpan(LargeId), BM_SpanWithFlowOut   async spans and flows, against
//                       BM_FrontEndBeginEnd
// scripts/run_benchmarks.sh turns the results into the ratios docs/performance.md shows.
//
// Every benchmark reports two checks (FloorCheck below), because a figure can look cheap
// for reasons that are not the recorder's:
//   dropped   events the session dropped during the benchmark's loop. A dropped begin
//             reads no clock and writes nothing, so drops flatter the figure; the label
//             says so when there are any.
//   floor_ns  the work the benchmark cannot skip (two clock reads for a span, one for a
//             counter sample, the call alone for a span with no session), timed on the same
//             thread right after the benchmark's own loop (median of 5 batches); vs_floor is
//             the benchmark's own time per iteration over it (wall time, and CPU time as
//             vs_floor_cpu). Below 1, the figure measures noise (a slow stretch of the
//             machine during the floor's batches, a fast one during the loop) or drops, not
//             "no cost": the label says "BELOW FLOOR", and below_floor is 1 (0 otherwise;
//             its mean over repetitions is the share of them below the floor: labels do not
//             reach the aggregates).
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

#include "opsight/opsight.hpp"
#include "record/clock.hpp"
#include "record/recorder.hpp"

void span_compiled_out();  // recorder_benchmark_disabled.cc

namespace {

// Counts bytes and throws them away: the benchmark measures recording, not the disk.
class NullSink : public opsight::record::ByteSink {
 public:
  bool write(std::string_view bytes) override {
    written += bytes.size();
    return true;
  }
  std::string error() const override { return {}; }
  std::atomic<uint64_t> written{0};
};

// One session for all enabled benchmarks of a run (started by the first thread).
struct BenchmarkSession {
  BenchmarkSession() {
    opsight::record::RecordingOptions options;
    options.buffer_bytes = size_t{512} << 20;
    options.flush_interval_ms = 5;
    opsight::record::start_recording([](std::string*) { return std::make_unique<NullSink>(); },
                                     options);
  }
  ~BenchmarkSession() { opsight::record::stop_recording(); }
};

void start_session_once() {
  static BenchmarkSession session;
  opsight::record::resume_recording();
}

__attribute__((noinline)) void traced_function() { OPSIGHT_SPAN("traced_function"); }

// ---- the checks every benchmark reports --------------------------------------------------

// What a benchmark's figure cannot be below: the work it must do whatever the recorder does.
enum class Floor {
  kNone,           // a baseline itself
  kOneClockRead,   // a counter sample reads the clock once
  kTwoClockReads,  // a span (or async span) reads it at its begin and its end
  kCallAlone,      // a span with no session: the call of the same function compiled out
};

const char* floor_name(Floor floor) {
  switch (floor) {
    case Floor::kOneClockRead:
      return "one clock read";
    case Floor::kTwoClockReads:
      return "two clock reads";
    case Floor::kCallAlone:
      return "the call alone (compiled out)";
    case Floor::kNone:
      break;
  }
  return "";
}

int64_t thread_cpu_ns() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct PerIteration {
  double wall_ns = 0;
  double cpu_ns = 0;
};

// One batch of the floor's work, timed: its own loop per kind of floor, so that the loop
// is as tight as the benchmark's.
template <Floor kFloor>
PerIteration floor_batch(int64_t count) {
  const int64_t wall_started = wall_ns();
  const int64_t cpu_started = thread_cpu_ns();
  for (int64_t left = count; left != 0; --left) {  // counts down, as Google Benchmark's loop
    if constexpr (kFloor == Floor::kOneClockRead) {
      benchmark::DoNotOptimize(opsight::internal::now_ticks());
    } else if constexpr (kFloor == Floor::kTwoClockReads) {
      benchmark::DoNotOptimize(opsight::internal::now_ticks());
      benchmark::DoNotOptimize(opsight::internal::now_ticks());
    } else {
      span_compiled_out();
    }
  }
  return {static_cast<double>(wall_ns() - wall_started) / static_cast<double>(count),
          static_cast<double>(thread_cpu_ns() - cpu_started) / static_cast<double>(count)};
}

// The floor's time per iteration on the calling thread: the median of 5 batches, together
// as many iterations as the benchmark ran (at most 2^20).
PerIteration measure_floor(Floor floor, int64_t iterations) {
  constexpr int kBatches = 5;
  const int64_t count = std::max<int64_t>(1, std::min<int64_t>(iterations, 1 << 20) / kBatches);
  PerIteration batches[kBatches];
  for (PerIteration& batch : batches) {
    switch (floor) {
      case Floor::kOneClockRead:
        batch = floor_batch<Floor::kOneClockRead>(count);
        break;
      case Floor::kTwoClockReads:
        batch = floor_batch<Floor::kTwoClockReads>(count);
        break;
      case Floor::kCallAlone:
        batch = floor_batch<Floor::kCallAlone>(count);
        break;
      case Floor::kNone:
        return {};
    }
  }
  auto by_wall = [](const PerIteration& a, const PerIteration& b) { return a.wall_ns < b.wall_ns; };
  auto by_cpu = [](const PerIteration& a, const PerIteration& b) { return a.cpu_ns < b.cpu_ns; };
  PerIteration median;
  std::nth_element(batches, batches + kBatches / 2, batches + kBatches, by_wall);
  median.wall_ns = batches[kBatches / 2].wall_ns;
  std::nth_element(batches, batches + kBatches / 2, batches + kBatches, by_cpu);
  median.cpu_ns = batches[kBatches / 2].cpu_ns;
  return median;
}

// Constructed just before a benchmark's loop, finish() just after it: reports the events
// dropped meanwhile (counter "dropped", by the first thread: the count is the session's) and
// the benchmark's time per iteration against its floor (counters floor_ns, vs_floor,
// vs_floor_cpu: each thread checks its own time against its own floor, the first thread's
// are reported), and labels a figure that drops flattered or that came out below its floor
// (on any thread).
class FloorCheck {
 public:
  FloorCheck(benchmark::State& state, Floor floor)
      : state_(state),
        floor_(floor),
        dropped_before_(opsight::record::events_dropped_so_far()),
        wall_started_(wall_ns()),
        cpu_started_(thread_cpu_ns()) {}

  void finish() {
    const int64_t wall = wall_ns() - wall_started_;
    const int64_t cpu = thread_cpu_ns() - cpu_started_;
    const uint64_t dropped = opsight::record::events_dropped_so_far() - dropped_before_;
    std::string label;
    if (state_.thread_index() == 0) {
      state_.counters["dropped"] = static_cast<double>(dropped);
      if (dropped > 0)
        label = std::to_string(dropped) +
                " events DROPPED: the figure flatters the recorder (a dropped begin reads no "
                "clock)";
    }
    const int64_t iterations = state_.iterations();
    if (floor_ != Floor::kNone && iterations > 0) {
      const PerIteration own{static_cast<double>(wall) / static_cast<double>(iterations),
                             static_cast<double>(cpu) / static_cast<double>(iterations)};
      const PerIteration floor = measure_floor(floor_, iterations);
      const double vs_floor = floor.wall_ns > 0 ? own.wall_ns / floor.wall_ns : 0;
      const double vs_floor_cpu = floor.cpu_ns > 0 ? own.cpu_ns / floor.cpu_ns : 0;
      if (state_.thread_index() == 0) {  // each thread checks its own; the first reports
        state_.counters["floor_ns"] = floor.wall_ns;
        state_.counters["vs_floor"] = vs_floor;
        state_.counters["vs_floor_cpu"] = vs_floor_cpu;
      }
      const bool below = vs_floor < 1 || vs_floor_cpu < 1;
      if (state_.thread_index() == 0) state_.counters["below_floor"] = below ? 1 : 0;
      if (below) {
        char text[200];
        std::snprintf(text, sizeof text,
                      "BELOW FLOOR (%s: %.2f ns wall, %.2f ns CPU, same run): noise or drops, "
                      "not \"no cost\"",
                      floor_name(floor_), floor.wall_ns, floor.cpu_ns);
        label += (label.empty() ? "" : "; ") + std::string(text);
      }
    }
    if (!label.empty()) state_.SetLabel(label);
  }

 private:
  benchmark::State& state_;
  Floor floor_;
  uint64_t dropped_before_;
  int64_t wall_started_;
  int64_t cpu_started_;
};

// ---- the benchmarks -----------------------------------------------------------------------

void BM_EmptyLoop(benchmark::State& state) {
  FloorCheck check(state, Floor::kNone);
  for (auto _ : state) benchmark::ClobberMemory();
  check.finish();
}
BENCHMARK(BM_EmptyLoop);

void BM_ClockReadTwice(benchmark::State& state) {
  opsight::record::select_clock();  // what a session does first: TSC where invariant
  FloorCheck check(state, Floor::kNone);
  for (auto _ : state) {
    benchmark::DoNotOptimize(opsight::internal::now_ticks());
    benchmark::DoNotOptimize(opsight::internal::now_ticks());
  }
  check.finish();
}
BENCHMARK(BM_ClockReadTwice);

void BM_SpanNoSession(benchmark::State& state) {
  opsight::record::pause_recording();
  FloorCheck check(state, Floor::kCallAlone);
  for (auto _ : state) traced_function();
  check.finish();
}
BENCHMARK(BM_SpanNoSession);

void BM_SpanCompiledOut(benchmark::State& state) {
  FloorCheck check(state, Floor::kNone);
  for (auto _ : state) span_compiled_out();
  check.finish();
}
BENCHMARK(BM_SpanCompiledOut);

void BM_SpanEnabled(benchmark::State& state) {
  if (state.thread_index() == 0) start_session_once();
  FloorCheck check(state, Floor::kTwoClockReads);
  for (auto _ : state) traced_function();
  check.finish();
}
BENCHMARK(BM_SpanEnabled)->Threads(1)->Threads(2)->UseRealTime();

void BM_SpanRuntimeName(benchmark::State& state) {
  start_session_once();
  std::string name = "request 17";
  FloorCheck check(state, Floor::kTwoClockReads);
  for (auto _ : state) opsight::Span span(name);
  check.finish();
}
BENCHMARK(BM_SpanRuntimeName);

void BM_SpanWithIntArg(benchmark::State& state) {
  start_session_once();
  FloorCheck check(state, Floor::kTwoClockReads);
  for (auto _ : state) {
    OPSIGHT_SPAN("with_arg");
    opsight::add_arg("batch", int64_t{32});
  }
  check.finish();
}
BENCHMARK(BM_SpanWithIntArg);

void BM_Counter(benchmark::State& state) {
  start_session_once();
  double value = 0;
  FloorCheck check(state, Floor::kOneClockRead);
  for (auto _ : state) opsight::counter("queue_depth", value += 1);
  check.finish();
}
BENCHMARK(BM_Counter);

void BM_FrontEndBeginEnd(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("forward", "python");
  FloorCheck check(state, Floor::kTwoClockReads);
  for (auto _ : state) {
    if (opsight::begin(name)) opsight::end();
  }
  check.finish();
}
BENCHMARK(BM_FrontEndBeginEnd);

// An async span (begin_async/end_async with a registered name): against BM_FrontEndBeginEnd,
// the same pair of events for a thread span.
void BM_AsyncSpan(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("request", "python");
  uint64_t id = 0;
  FloorCheck check(state, Floor::kTwoClockReads);
  for (auto _ : state) {
    if (opsight::begin_async(name, ++id)) opsight::end_async(id);
  }
  check.finish();
}
BENCHMARK(BM_AsyncSpan);

// The same with ids of 2^40 and more, whose begins take the two-slot form.
void BM_AsyncSpanLargeId(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("request", "python");
  uint64_t id = uint64_t{1} << 40;
  FloorCheck check(state, Floor::kTwoClockReads);
  for (auto _ : state) {
    if (opsight::begin_async(name, ++id)) opsight::end_async(id);
  }
  check.finish();
}
BENCHMARK(BM_AsyncSpanLargeId);

// A span that hands work off: one flow event inside it (against BM_FrontEndBeginEnd).
void BM_SpanWithFlowOut(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("submit", "python");
  uint64_t id = 0;
  FloorCheck check(state, Floor::kTwoClockReads);
  for (auto _ : state) {
    if (opsight::begin(name)) {
      opsight::flow_out(++id);
      opsight::end();
    }
  }
  check.finish();
}
BENCHMARK(BM_SpanWithFlowOut);

}  // namespace
