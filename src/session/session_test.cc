// The recorder end to end: record through the public API, read back with the native
// reader, check the trace model. (record alone cannot decode; session links both.)
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "io/io.hpp"
#include "opsight/opsight.hpp"
#include "record/recorder.hpp"
#include "record/slow_sink_for_tests.hpp"

namespace {

using opsight::trace::kNoRow;
using opsight::trace::Trace;

Trace record_in_memory(const std::function<void()>& body, opsight::SessionOptions options = {}) {
  options.output.clear();
  opsight::Session session(options);
  EXPECT_TRUE(session.ok()) << session.error();
  body();
  EXPECT_TRUE(session.stop()) << session.error();
  auto result = opsight::io::read_native(session.take_native_bytes());
  EXPECT_TRUE(result.ok()) << (result.error ? result.error->message : "");
  EXPECT_FALSE(result.damage.has_value()) << result.damage->message;
  return std::move(result.trace);
}

std::map<std::string, size_t> count_by_name(const Trace& trace) {
  std::map<std::string, size_t> counts;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    ++counts[std::string(trace.str(trace.slices.name[row]))];
  return counts;
}

void leaf() { OPSIGHT_SPAN("leaf"); }

TEST(Session, NestedStaticSpansKeepTheirStructureAndDurations) {
  Trace trace = record_in_memory([] {
    OPSIGHT_SPAN_CATEGORY("demo", "outer");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    leaf();
    leaf();
  });
  ASSERT_EQ(trace.slices.size(), 3u);
  EXPECT_EQ(trace.str(trace.slices.name[0]), "outer");
  EXPECT_EQ(trace.str(trace.slices.category[0]), "demo");
  EXPECT_EQ(trace.slices.parent[0], kNoRow);
  EXPECT_GE(trace.slices.dur[0], 2'000'000);  // slept 2 ms inside
  EXPECT_LT(trace.slices.dur[0], 2'000'000'000);
  for (int row = 1; row <= 2; ++row) {
    EXPECT_EQ(trace.str(trace.slices.name[row]), "leaf");
    EXPECT_EQ(trace.slices.parent[row], 0u);
    EXPECT_EQ(trace.slices.depth[row], 1);
    EXPECT_GE(trace.slices.ts[row], trace.slices.ts[0]);
    EXPECT_LE(trace.slices.end(row), trace.slices.end(0));
  }
  EXPECT_GE(trace.slices.ts[2], trace.slices.end(1));
  EXPECT_NE(trace.slices.span_id[0], trace.slices.span_id[1]);
  EXPECT_NE(trace.run.trace_id, opsight::trace::TraceId{});
  EXPECT_TRUE(trace.run.complete);
  EXPECT_GT(trace.run.overhead_ns, 0);
  EXPECT_EQ(trace.run.events_dropped, 0u);
  EXPECT_EQ(trace.tracks.size(), 1u);
  EXPECT_EQ(trace.tracks[0].pid, getpid());
  EXPECT_GT(trace.tracks[0].overhead_ns, 0);
  EXPECT_EQ(trace.tracks[0].events_recorded, 6u);
}

// A front end's own hook cost (the torch observer's RecordFunction floor) joins the
// overhead of the thread that paid it.
TEST(Session, OverheadTicksAddedByAFrontEndAreReported) {
  Trace plain = record_in_memory([] { OPSIGHT_SPAN("op"); });
  Trace charged = record_in_memory([] {
    OPSIGHT_SPAN("op");
    opsight::internal::add_overhead_ns(25'000'000.0);
  });
  ASSERT_EQ(charged.tracks.size(), 1u);
  int64_t added = charged.run.overhead_ns - plain.run.overhead_ns;
  EXPECT_GE(added, 24'000'000);  // 25 ms, give or take the two runs' own few events
  EXPECT_LE(added, 26'000'000);
}

TEST(Session, RuntimeNamesArgsInstantsAndCounters) {
  Trace trace = record_in_memory([] {
    opsight::Span span("step 7");
    span.arg("batch", 32).arg("lr", 0.5).arg("model", "bert").arg("warm", true);
    opsight::instant("checkpoint");
    opsight::add_arg("path", "/tmp/x");
    opsight::counter("queue_depth", 3.0);
    opsight::counter("queue_depth", 5.0);
  });
  ASSERT_EQ(trace.slices.size(), 1u);
  EXPECT_EQ(trace.str(trace.slices.name[0]), "step 7");
  std::map<std::string, opsight::trace::ArgValue> args;
  for (auto arg = trace.slices.args_begin[0]; arg < trace.slices.args_begin[1]; ++arg)
    args[std::string(trace.str(trace.slice_args.key[arg]))] = trace.slice_args.value[arg];
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args["batch"].int_value, 32);
  EXPECT_DOUBLE_EQ(args["lr"].double_value, 0.5);
  EXPECT_EQ(trace.str(args["model"].string_value), "bert");
  EXPECT_EQ(args["warm"].type, opsight::trace::ArgType::kBool);
  EXPECT_EQ(args["warm"].int_value, 1);
  ASSERT_EQ(trace.instants.size(), 1u);
  EXPECT_EQ(trace.str(trace.instants.name[0]), "checkpoint");
  ASSERT_EQ(trace.instant_args.size(), 1u);
  EXPECT_EQ(trace.str(trace.instant_args.value[0].string_value), "/tmp/x");
  ASSERT_EQ(trace.counters.size(), 2u);
  EXPECT_EQ(trace.str(trace.counter_tracks[trace.counters.counter_track[0]].name), "queue_depth");
  EXPECT_DOUBLE_EQ(trace.counters.value[1], 5.0);
}

TEST(Session, RegisteredNamesForFrontEnds) {
  opsight::NameId forward = opsight::register_name("forward", "python");
  EXPECT_EQ(forward, opsight::register_name("forward", "python"));
  EXPECT_NE(forward, opsight::register_name("forward", "torch"));
  Trace trace = record_in_memory([&] {
    ASSERT_TRUE(opsight::begin(forward));
    ASSERT_TRUE(opsight::begin(std::string_view("inner")));
    opsight::end();
    opsight::end();
  });
  ASSERT_EQ(trace.slices.size(), 2u);
  EXPECT_EQ(trace.str(trace.slices.name[0]), "forward");
  EXPECT_EQ(trace.str(trace.slices.category[0]), "python");
  EXPECT_EQ(trace.slices.parent[1], 0u);
}

TEST(Session, ManyThreadsEachKeepEveryEventAndTheirNames) {
  constexpr int kThreads = 6;
  constexpr int kSpans = 20000;  // several chunks per thread
  Trace trace = record_in_memory([] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([t] {
        opsight::set_thread_name("worker " + std::to_string(t));
        for (int i = 0; i < kSpans; ++i) {
          OPSIGHT_SPAN("work");
          leaf();
        }
      });
    for (auto& thread : threads) thread.join();  // they exit before the session stops
  });
  auto counts = count_by_name(trace);
  EXPECT_EQ(counts["work"], size_t{kThreads} * kSpans);
  EXPECT_EQ(counts["leaf"], size_t{kThreads} * kSpans);
  EXPECT_EQ(trace.tracks.size(), size_t{kThreads});
  std::set<std::string> names;
  for (const auto& track : trace.tracks) names.insert(std::string(trace.str(track.name)));
  EXPECT_EQ(names.size(), size_t{kThreads});
  EXPECT_TRUE(names.count("worker 0"));
  for (size_t row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == "leaf") {
      ASSERT_NE(trace.slices.parent[row], kNoRow);
    }
  EXPECT_EQ(trace.run.events_dropped, 0u);
}

// A front end (Python's threading) names threads by their system id: a thread that
// recorded already takes the name at once, one that has not yet takes it when it does
// (unless the name was dropped first), and a name the thread gave itself is kept.
TEST(Session, FrontEndsNameThreadsByTheirIdUnlessTheyNamedThemselves) {
  Trace trace = record_in_memory([] {
    std::atomic<int64_t> started_tid{0};
    std::atomic<bool> named{false};
    std::thread recorded_first([&] {
      OPSIGHT_SPAN("before the name");
      started_tid = static_cast<int64_t>(::gettid());
      while (!named) std::this_thread::yield();
      OPSIGHT_SPAN("after the name");
    });
    while (started_tid == 0) std::this_thread::yield();
    opsight::internal::name_thread_if_unnamed(started_tid, "prefetcher");
    named = true;
    recorded_first.join();

    std::atomic<int64_t> waiting_tid{0};
    std::atomic<bool> go{false};
    std::thread named_before_recording([&] {
      waiting_tid = static_cast<int64_t>(::gettid());
      while (!go) std::this_thread::yield();
      OPSIGHT_SPAN("pool job");
    });
    while (waiting_tid == 0) std::this_thread::yield();
    opsight::internal::name_thread_if_unnamed(waiting_tid, "ThreadPoolExecutor-0_0");
    go = true;
    named_before_recording.join();

    std::atomic<int64_t> forgotten_tid{0};
    std::atomic<bool> forgotten{false};
    std::thread name_forgotten([&] {
      forgotten_tid = static_cast<int64_t>(::gettid());
      while (!forgotten) std::this_thread::yield();
      OPSIGHT_SPAN("after its name was dropped");
    });
    while (forgotten_tid == 0) std::this_thread::yield();
    opsight::internal::name_thread_if_unnamed(forgotten_tid, "stale");
    opsight::internal::forget_unclaimed_thread_name(forgotten_tid);
    forgotten = true;
    name_forgotten.join();

    std::thread self_named([] {
      opsight::set_thread_name("decoder");
      OPSIGHT_SPAN("decode");
      opsight::internal::name_thread_if_unnamed(static_cast<int64_t>(::gettid()), "Thread-3");
    });
    self_named.join();
  });
  std::map<std::string, std::string> track_of_span;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    track_of_span[std::string(trace.str(trace.slices.name[row]))] =
        std::string(trace.str(trace.tracks[trace.slices.track[row]].name));
  EXPECT_EQ(track_of_span["after the name"], "prefetcher");
  EXPECT_EQ(track_of_span["before the name"], "prefetcher");  // one track, one name
  EXPECT_EQ(track_of_span["pool job"], "ThreadPoolExecutor-0_0");
  EXPECT_EQ(track_of_span["decode"], "decoder");
  EXPECT_NE(track_of_span["after its name was dropped"], "stale");
}

TEST(Session, PauseLeavesAGapAndOpenSpansStillEnd) {
  Trace trace = record_in_memory([] {});  // warm up registration paths
  opsight::Session session(opsight::SessionOptions{});
  leaf();
  {
    OPSIGHT_SPAN("spans_the_pause");
    session.pause();
    leaf();  // not recorded
    session.resume();
  }
  leaf();
  session.stop();
  auto result = opsight::io::read_native(session.take_native_bytes());
  auto counts = count_by_name(result.trace);
  EXPECT_EQ(counts["leaf"], 2u);
  EXPECT_EQ(counts["spans_the_pause"], 1u);
  for (size_t row = 0; row < result.trace.slices.size(); ++row)
    EXPECT_EQ(result.trace.slices.flags[row] & opsight::trace::kSliceUnfinished, 0);
}

TEST(Session, OnlyOneSessionAtATime) {
  opsight::Session first(opsight::SessionOptions{});
  ASSERT_TRUE(first.ok());
  opsight::Session second(opsight::SessionOptions{});
  EXPECT_FALSE(second.ok());
  EXPECT_NE(second.error().find("already"), std::string::npos);
  EXPECT_TRUE(first.stop());
}

TEST(Session, SpanOpenAtStopIsMarkedUnfinished) {
  opsight::Session session(opsight::SessionOptions{});
  opsight::begin(std::string_view("never_ended"));
  leaf();
  session.stop();
  opsight::end();  // after the session: ignored by it
  auto result = opsight::io::read_native(session.take_native_bytes());
  ASSERT_EQ(result.trace.slices.size(), 2u);
  EXPECT_EQ(result.trace.str(result.trace.slices.name[0]), "never_ended");
  EXPECT_TRUE(result.trace.slices.flags[0] & opsight::trace::kSliceUnfinished);
  EXPECT_GE(result.trace.slices.end(0), result.trace.slices.end(1));
}

TEST(Session, WritesNativeAndChromeFiles) {
  auto directory =
      std::filesystem::temp_directory_path() / ("opsight_session_" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  for (std::string name : {"run.opsight", "run.json"}) {
    std::string path = (directory / name).string();
    {
      opsight::Session session(path);
      ASSERT_TRUE(session.ok()) << session.error();
      for (int i = 0; i < 10; ++i) leaf();
    }
    auto result = opsight::io::read_trace_file(path);
    ASSERT_TRUE(result.ok()) << result.error->message;
    EXPECT_EQ(count_by_name(result.trace)["leaf"], 10u) << name;
    EXPECT_FALSE(std::filesystem::exists(path + ".opsight.tmp"));
  }
  // Perfetto output is converted at stop like Chrome JSON: its bytes are a Trace whose
  // first field is a packet, with "leaf" interned once.
  std::string perfetto_path = (directory / "run.pftrace").string();
  {
    opsight::Session session(perfetto_path);
    ASSERT_TRUE(session.ok()) << session.error();
    for (int i = 0; i < 10; ++i) leaf();
  }
  std::string problem;
  auto bytes = opsight::io::read_file_bytes(perfetto_path, &problem);
  ASSERT_TRUE(bytes.has_value()) << problem;
  ASSERT_FALSE(bytes->empty());
  EXPECT_EQ((*bytes)[0], '\x0a');  // field 1 (packet), length-delimited
  size_t first = bytes->find("leaf");
  EXPECT_NE(first, std::string::npos);
  EXPECT_EQ(bytes->find("leaf", first + 1), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(perfetto_path + ".opsight.tmp"));
  opsight::Session bad((directory / "run.txt").string());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("run.txt"), std::string::npos);
  opsight::Session unwritable("/nonexistent-dir/run.opsight");
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.error().find("/nonexistent-dir/run.opsight"), std::string::npos);
  std::filesystem::remove_all(directory);
}

TEST(Session, NoSessionRecordsNothingAndCostsNoMemory) {
  EXPECT_FALSE(opsight::recording());
  for (int i = 0; i < 1000; ++i) leaf();  // must not allocate chunks or crash
  EXPECT_FALSE(opsight::begin(std::string_view("x")));
  Trace trace = record_in_memory([] {});
  EXPECT_EQ(trace.slices.size(), 0u);
}

}  // namespace

namespace {

TEST(Session, AForkedChildLeavesTheParentsOutputAlone) {
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_fork_" + std::to_string(getpid()) + ".json");
  {
    opsight::Session session(path.string());
    ASSERT_TRUE(session.ok());
    leaf();
    pid_t child = fork();
    if (child == 0) {
      leaf();          // recording is off in the child: must not crash or write
      session.stop();  // must not touch the parent's output
      _exit(opsight::recording() ? 3 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_FALSE(std::filesystem::exists(path)) << "the child wrote the parent's output";
    leaf();
  }
  auto result = opsight::io::read_trace_file(path.string());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(count_by_name(result.trace)["leaf"], 2u);
  std::filesystem::remove(path);
}

}  // namespace

namespace {

TEST(Session, ARefusedSecondSessionTouchesNoFile) {
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_refused_" + std::to_string(getpid()) + ".opsight");
  opsight::Session first(path.string());
  ASSERT_TRUE(first.ok());
  leaf();
  opsight::Session second(path.string());  // same path: must not truncate or remove it
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE(std::filesystem::exists(path));
  ASSERT_TRUE(first.stop());
  auto result = opsight::io::read_trace_file(path.string());
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result.damage.has_value());
  EXPECT_EQ(count_by_name(result.trace)["leaf"], 1u);
  std::filesystem::remove(path);
}

TEST(Session, AFullPoolRecoversOnceTheWriterHasDrainedIt) {
  opsight::SessionOptions options;
  options.buffer_bytes = 1;  // two chunks, two threads: each thread's chunk fills up
  options.flush_interval_ms = 5;
  opsight::Session session(options);
  std::atomic<int> phase{0};
  auto work = [&] {
    for (int i = 0; i < 3000; ++i) leaf();  // 6000 slots: more than one chunk
    phase.fetch_add(1);
    while (phase.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 0; i < 100; ++i) {
      OPSIGHT_SPAN("late");
    }
  };
  std::thread first(work), second(work);
  while (phase.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // several drains
  phase.store(3);
  first.join();
  second.join();
  ASSERT_TRUE(session.stop());
  auto result = opsight::io::read_native(session.take_native_bytes());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(count_by_name(result.trace)["late"], 200u);
}

}  // namespace

namespace {

TEST(Session, EndsDroppedForLackOfMemoryAreWrittenLateAndNestingSurvives) {
  opsight::record::RecordingOptions options;
  options.buffer_bytes = 1;  // two chunks in flight
  options.flush_interval_ms = 1;
  ASSERT_FALSE(opsight::record::start_recording(
      [](std::string*) { return std::make_unique<opsight::record::SlowSinkForTests>(); }, options));
  // Six slots an iteration, so chunk boundaries fall inside spans; for long enough that
  // the slow writer hands chunks back several times while the thread is still recording.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 1000; ++i) {
      OPSIGHT_SPAN("outer");
      leaf();
      leaf();
    }
  }
  auto stopped = opsight::record::stop_recording();
  ASSERT_TRUE(stopped.sink);
  EXPECT_GT(stopped.events_dropped, 0u);
  auto result =
      opsight::io::read_native(static_cast<opsight::record::MemorySink&>(*stopped.sink).bytes());
  ASSERT_TRUE(result.ok());
  const auto& trace = result.trace;
  uint64_t late = 0;
  for (const auto& [key, value] : trace.run.extra)
    if (key == "ends_written_late_after_drops") late = std::stoull(value);
  EXPECT_GT(late, 0u);
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    // (A leaf may be a root: its outer's begin can be the event that was dropped.)
    ASSERT_LE(trace.slices.depth[row], 1) << "a lost end made later spans nest inside an old one";
  }
}

}  // namespace

namespace {

// GPU tracing asked for where it cannot run (no driver, no GPU, or a build without CUPTI):
// one line says why, and the session records everything else as if it had not been asked.
TEST(Session, GpuTracingThatCannotRunSaysWhyAndRecordsEverythingElse) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver != nullptr) {
    dlclose(driver);
    GTEST_SKIP()
        << "an NVIDIA driver is present: scripts/device/gpu_check.sh proves GPU tracing there";
  }
  opsight::SessionOptions options;
  options.cuda = true;
  opsight::Session session(options);
  ASSERT_TRUE(session.ok()) << session.error();
  EXPECT_NE(session.gpu_status().find("GPU tracing off: "), std::string::npos)
      << session.gpu_status();
  EXPECT_EQ(session.gpu_status().find('\n'), std::string::npos);
  { OPSIGHT_SPAN("work"); }
  ASSERT_TRUE(session.stop()) << session.error();
  auto result = opsight::io::read_native(session.take_native_bytes());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(count_by_name(result.trace)["work"], 1u);
}

TEST(Session, GpuTracingNotAskedForSaysNothing) {
  opsight::Session session(opsight::SessionOptions{});
  ASSERT_TRUE(session.ok());
  EXPECT_TRUE(session.gpu_status().empty());
  session.stop();
}

// A front end may start GPU tracing later (when the program initialises CUDA); where it
// cannot run it says why, and a stopped session refuses.
TEST(Session, GpuTracingStartedLaterSaysWhyItCannotRunHere) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver != nullptr) {
    dlclose(driver);
    GTEST_SKIP()
        << "an NVIDIA driver is present: scripts/device/gpu_check.sh proves GPU tracing there";
  }
  opsight::Session session(opsight::SessionOptions{});
  ASSERT_TRUE(session.ok());
  EXPECT_NE(session.start_gpu_tracing().find("GPU tracing off: "), std::string::npos);
  ASSERT_TRUE(session.stop());
  EXPECT_EQ(session.start_gpu_tracing(),
            "GPU tracing off: the session is not recording in this process");
}

}  // namespace
