// The recorder's hot path against baselines measured in the same run:
//   BM_ClockReadTwice   the floor: two clock reads (what any span must do)
//   BM_SpanEnabled      OPSIGHT_SPAN with a session recording (streamed to a null sink)
//   BM_SpanNoSession    OPSIGHT_SPAN with no session: one load and one branch
//   BM_SpanCompiledOut  OPSIGHT_SPAN with OPSIGHT_ENABLE=0 (recorder_benchmark_disabled.cc)
//   BM_EmptyLoop        the loop alone
//   BM_AsyncSpan(LargeId), BM_SpanWithFlowOut   async spans and flows, against
//                       BM_FrontEndBeginEnd
// scripts/run_benchmarks.sh turns the results into the ratios docs/performance.md shows.
// Counters: "dropped" must stay 0, or the enabled figures would flatter the recorder.
#include <benchmark/benchmark.h>

#include <atomic>
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

void BM_EmptyLoop(benchmark::State& state) {
  for (auto _ : state) benchmark::ClobberMemory();
}
BENCHMARK(BM_EmptyLoop);

void BM_ClockReadTwice(benchmark::State& state) {
  opsight::record::select_clock();  // what a session does first: TSC where invariant
  for (auto _ : state) {
    benchmark::DoNotOptimize(opsight::internal::now_ticks());
    benchmark::DoNotOptimize(opsight::internal::now_ticks());
  }
}
BENCHMARK(BM_ClockReadTwice);

void BM_SpanNoSession(benchmark::State& state) {
  opsight::record::pause_recording();
  for (auto _ : state) traced_function();
}
BENCHMARK(BM_SpanNoSession);

void BM_SpanCompiledOut(benchmark::State& state) {
  for (auto _ : state) span_compiled_out();
}
BENCHMARK(BM_SpanCompiledOut);

void BM_SpanEnabled(benchmark::State& state) {
  if (state.thread_index() == 0) start_session_once();
  uint64_t dropped_before = opsight::record::events_dropped_so_far();
  for (auto _ : state) traced_function();
  if (state.thread_index() == 0)
    state.counters["dropped"] =
        static_cast<double>(opsight::record::events_dropped_so_far() - dropped_before);
}
BENCHMARK(BM_SpanEnabled)->Threads(1)->Threads(2)->UseRealTime();

void BM_SpanRuntimeName(benchmark::State& state) {
  start_session_once();
  std::string name = "request 17";
  for (auto _ : state) opsight::Span span(name);
}
BENCHMARK(BM_SpanRuntimeName);

void BM_SpanWithIntArg(benchmark::State& state) {
  start_session_once();
  for (auto _ : state) {
    OPSIGHT_SPAN("with_arg");
    opsight::add_arg("batch", int64_t{32});
  }
}
BENCHMARK(BM_SpanWithIntArg);

void BM_Counter(benchmark::State& state) {
  start_session_once();
  double value = 0;
  for (auto _ : state) opsight::counter("queue_depth", value += 1);
}
BENCHMARK(BM_Counter);

void BM_FrontEndBeginEnd(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("forward", "python");
  for (auto _ : state) {
    if (opsight::begin(name)) opsight::end();
  }
}
BENCHMARK(BM_FrontEndBeginEnd);

// An async span (begin_async/end_async with a registered name): against BM_FrontEndBeginEnd,
// the same pair of events for a thread span.
void BM_AsyncSpan(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("request", "python");
  uint64_t id = 0;
  for (auto _ : state) {
    if (opsight::begin_async(name, ++id)) opsight::end_async(id);
  }
}
BENCHMARK(BM_AsyncSpan);

// The same with ids of 2^40 and more, whose begins take the two-slot form.
void BM_AsyncSpanLargeId(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("request", "python");
  uint64_t id = uint64_t{1} << 40;
  for (auto _ : state) {
    if (opsight::begin_async(name, ++id)) opsight::end_async(id);
  }
}
BENCHMARK(BM_AsyncSpanLargeId);

// A span that hands work off: one flow event inside it (against BM_FrontEndBeginEnd).
void BM_SpanWithFlowOut(benchmark::State& state) {
  start_session_once();
  opsight::NameId name = opsight::register_name("submit", "python");
  uint64_t id = 0;
  for (auto _ : state) {
    if (opsight::begin(name)) {
      opsight::flow_out(++id);
      opsight::end();
    }
  }
}
BENCHMARK(BM_SpanWithFlowOut);

}  // namespace
