// Metrics measured on real effects: CPU burnt, memory touched, files written and read, bytes
// counted; the sampler's counter tracks; the cost accounting. Each test records through the
// public API into memory and reads the trace back with the native reader.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "collect/fake_gpu_for_tests.hpp"
#include "collect/gpu.hpp"
#include "collect/process_counters.hpp"
#include "collect/sampler.hpp"
#include "io/io.hpp"
#include "opsight/metrics.hpp"
#include "opsight/opsight.hpp"
#include "schema/metric_names.hpp"

namespace {

using opsight::trace::Trace;

Trace record_in_memory(const std::function<void()>& body, opsight::SessionOptions options = {}) {
  Trace trace;
  {
    opsight::Session session(options);
    EXPECT_TRUE(session.ok()) << session.error();
    body();
    EXPECT_TRUE(session.stop()) << session.error();
    auto result = opsight::io::read_native(session.take_native_bytes());
    EXPECT_TRUE(result.ok());
    trace = std::move(result.trace);
  }
  return trace;
}

// The "metric.*" arguments of the first slice named `name`, by key without the prefix.
std::map<std::string, double> metrics_of(const Trace& trace, std::string_view name) {
  std::map<std::string, double> metrics;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    if (trace.strings.get(trace.slices.name[row]) != name) continue;
    for (auto arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1]; ++arg) {
      std::string key(trace.strings.get(trace.slice_args.key[arg]));
      if (!key.starts_with(opsight::schema::kMetricArgPrefix)) continue;
      const auto& value = trace.slice_args.value[arg];
      double number = value.type == opsight::trace::ArgType::kDouble
                          ? value.double_value
                          : static_cast<double>(value.int_value);
      metrics[key.substr(opsight::schema::kMetricArgPrefix.size())] = number;
    }
    return metrics;
  }
  ADD_FAILURE() << "no slice named " << name;
  return metrics;
}

std::string run_info_value(const Trace& trace, std::string_view key) {
  for (const auto& [entry_key, value] : trace.run.extra)
    if (entry_key == key) return value;
  return {};
}

constexpr int64_t kMiB = 1 << 20;

// Maps and touches `bytes` of anonymous memory (resident until unmapped).
void* touch_memory(size_t bytes) {
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(memory, MAP_FAILED);
  std::memset(memory, 1, bytes);
  return memory;
}

// Burns `cpu_time` of CPU as std::clock (the process's CPU time, counted by the C library
// apart from opsight) measures it: on a loaded machine that takes longer than `cpu_time`.
void burn_cpu_time(std::chrono::milliseconds cpu_time) {
  std::clock_t until =
      std::clock() + static_cast<std::clock_t>(cpu_time.count() * CLOCKS_PER_SEC / 1000);
  volatile uint64_t sink = 0;
  while (std::clock() < until)
    for (int step = 0; step < 1000; ++step) sink = sink + static_cast<uint64_t>(step);
}

TEST(SpanMetrics, CpuTimeOfABurnMatchesTheCLibrarysClock) {
  Trace trace = record_in_memory([] {
    opsight::MetricSpan span("burn", opsight::kMetricCpu);
    burn_cpu_time(std::chrono::milliseconds(50));
  });
  auto metrics = metrics_of(trace, "burn");
  ASSERT_TRUE(metrics.contains("cpu_ns"));
  EXPECT_GE(metrics["cpu_ns"], 49e6);
  int64_t wall_ns = 0;
  for (size_t row = 0; row < trace.slices.size(); ++row) wall_ns = trace.slices.dur[row];
  EXPECT_LE(metrics["cpu_ns"], static_cast<double>(wall_ns)) << "one thread: CPU <= wall";
  EXPECT_FALSE(metrics.contains("rss_delta_bytes")) << "only the groups asked for";
}

TEST(SpanMetrics, SleepingUsesAlmostNoCpu) {
  Trace trace = record_in_memory([] {
    opsight::MetricSpan span("sleep", opsight::kMetricCpu);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  EXPECT_LT(metrics_of(trace, "sleep")["cpu_ns"], 10e6);
}

TEST(SpanMetrics, MemoryKeptShowsInDeltaAndMemoryFreedStillShowsInPeak) {
  void* kept = nullptr;
  Trace trace = record_in_memory([&] {
    {
      opsight::MetricSpan span("keep", opsight::kMetricMemory);
      kept = touch_memory(64 * kMiB);
    }
    {
      opsight::MetricSpan span("transient", opsight::kMetricMemory);
      void* transient = touch_memory(96 * kMiB);
      munmap(transient, 96 * kMiB);
    }
  });
  munmap(kept, 64 * kMiB);
  auto keep = metrics_of(trace, "keep");
  EXPECT_GE(keep["rss_delta_bytes"], 60 * kMiB);
  EXPECT_EQ(keep["rss_delta_bytes"], keep["rss_end_bytes"] - keep["rss_start_bytes"]);
  EXPECT_GE(keep["rss_peak_bytes"], keep["rss_end_bytes"]);
  auto transient = metrics_of(trace, "transient");
  EXPECT_LT(transient["rss_delta_bytes"], 16 * kMiB);
  EXPECT_GE(transient["rss_peak_bytes"], transient["rss_start_bytes"] + 90 * kMiB)
      << "the peak is the high-water mark reached inside the span";
}

TEST(SpanMetrics, AnOuterSpanKeepsThePeakOfTheSpansInsideIt) {
  Trace trace = record_in_memory([&] {
    opsight::MetricSpan outer("outer", opsight::kMetricMemory);
    {
      opsight::MetricSpan inner("inner", opsight::kMetricMemory);
      void* transient = touch_memory(80 * kMiB);
      munmap(transient, 80 * kMiB);
    }
    opsight::MetricSpan after("after", opsight::kMetricMemory);  // resets the mark again
  });
  auto outer = metrics_of(trace, "outer");
  auto inner = metrics_of(trace, "inner");
  EXPECT_GE(inner["rss_peak_bytes"], inner["rss_start_bytes"] + 75 * kMiB);
  EXPECT_GE(outer["rss_peak_bytes"], inner["rss_peak_bytes"])
      << "the inner span's reset must not lose the outer span's peak";
  EXPECT_LT(metrics_of(trace, "after")["rss_peak_bytes"], inner["rss_peak_bytes"] - 40 * kMiB);
}

TEST(SpanMetrics, DiskBytesOfAFileWrittenAndReadBack) {
  auto path =
      std::filesystem::temp_directory_path() / ("opsight_collect_test_" + std::to_string(getpid()));
  constexpr size_t kFileBytes = 3 * kMiB + 123;
  std::vector<char> data(kFileBytes, 'x');
  Trace trace = record_in_memory([&] {
    {
      opsight::MetricSpan span("write", opsight::kMetricDisk);
      int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ASSERT_GE(file, 0);
      size_t written = 0;
      while (written < kFileBytes) {
        ssize_t step = write(file, data.data() + written, kFileBytes - written);
        ASSERT_GT(step, 0);
        written += static_cast<size_t>(step);
      }
      fsync(file);
      close(file);
    }
    {
      opsight::MetricSpan span("read", opsight::kMetricDisk);
      int file = open(path.c_str(), O_RDONLY);
      ASSERT_GE(file, 0);
      std::vector<char> back(kFileBytes);
      size_t read_so_far = 0;
      ssize_t step = 0;
      while ((step = read(file, back.data() + read_so_far, kFileBytes - read_so_far)) > 0)
        read_so_far += static_cast<size_t>(step);
      close(file);
      EXPECT_EQ(read_so_far, kFileBytes);
    }
  });
  std::filesystem::remove(path);
  auto written = metrics_of(trace, "write");
  auto read_back = metrics_of(trace, "read");
  EXPECT_GE(written["io_write_bytes"], kFileBytes);
  EXPECT_LT(written["io_write_bytes"], kFileBytes + kMiB);
  EXPECT_GE(read_back["io_read_bytes"], kFileBytes);
  EXPECT_LT(read_back["io_read_bytes"], kFileBytes + kMiB);
  EXPECT_LT(read_back["io_write_bytes"], 64 * 1024);
  // fsync pushed the pages towards storage (tmpfs has no storage: then 0 is right).
  EXPECT_TRUE(written.contains("storage_write_bytes"));
}

TEST(SpanMetrics, NetworkBytesAreTheSpansThreadsOnly) {
  Trace trace = record_in_memory([] {
    opsight::MetricSpan span("send", opsight::kMetricNetwork);
    opsight::count_network_bytes(1000, 24);
    std::thread other([] { opsight::count_network_bytes(5000, 5000); });
    other.join();
    opsight::count_network_bytes(234, 0);
  });
  auto metrics = metrics_of(trace, "send");
  EXPECT_EQ(metrics["net_sent_bytes"], 1234);
  EXPECT_EQ(metrics["net_received_bytes"], 24);
  EXPECT_GE(opsight::collect::process_network().sent_bytes, 6234u);
}

TEST(SpanMetrics, CostIsReportedPerGroupAndCountedAsOverhead) {
  Trace trace = record_in_memory([] {
    for (int span = 0; span < 50; ++span) {
      opsight::MetricSpan metric_span("measured", opsight::kMetricCpu | opsight::kMetricMemory);
    }
  });
  std::string cpu = run_info_value(trace, "metric_cost.cpu");
  std::string memory = run_info_value(trace, "metric_cost.memory");
  ASSERT_FALSE(cpu.empty());
  ASSERT_FALSE(memory.empty());
  EXPECT_TRUE(cpu.starts_with("100 ")) << cpu;  // a start and an end per span
  EXPECT_TRUE(memory.starts_with("100 ")) << memory;
  int64_t memory_ns = std::stoll(memory.substr(4));
  EXPECT_GT(memory_ns, 100 * 200) << "a /proc read takes microseconds";
  int64_t overhead = 0;
  for (const auto& track : trace.tracks) overhead += track.overhead_ns;
  EXPECT_GE(overhead, memory_ns) << "the metrics' cost is part of the thread's overhead";
}

TEST(SpanMetrics, NothingIsReadWhenNoSessionRecords) {
  opsight::MetricStart start = opsight::start_metrics(opsight::kMetricCpu);
  EXPECT_EQ(start.groups, 0u);
  opsight::finish_metrics(start);  // does nothing
}

TEST(SpanMetrics, GpuMetricsComeFromTheGpuSource) {
  auto fake = std::make_unique<opsight::collect::FakeGpuSource>();
  opsight::collect::GpuReading reading;
  reading.name = "Fake H100";
  reading.memory_used_bytes = 1000 * kMiB;
  reading.memory_total_bytes = 80000 * kMiB;
  reading.utilization_percent = 87;
  reading.power_watts = 412.5;
  fake->add_gpu(reading);
  auto* gpu = fake.get();
  opsight::collect::set_gpu_source_for_tests(std::move(fake));
  Trace trace = record_in_memory([&] {
    opsight::MetricSpan span("infer", opsight::kMetricGpu);
    gpu->set_memory_used_bytes(0, 1512 * kMiB);
  });
  opsight::collect::set_gpu_source_for_tests(nullptr);
  auto metrics = metrics_of(trace, "infer");
  EXPECT_EQ(metrics["gpu_memory_used_bytes"], 1512 * kMiB);
  EXPECT_EQ(metrics["gpu_memory_delta_bytes"], 512 * kMiB);
  EXPECT_EQ(metrics["gpu_utilization_percent"], 87);
  EXPECT_DOUBLE_EQ(metrics["gpu_power_watts"], 412.5);
}

TEST(SpanMetrics, GroupNamesRoundTrip) {
  for (std::string_view name : {"cpu", "memory", "disk", "network", "gpu"})
    EXPECT_EQ(opsight::metric_group_name(opsight::metric_group_from_name(name)), name);
  EXPECT_EQ(opsight::metric_group_from_name("latency"), 0u);
  EXPECT_EQ(opsight::metric_group_from_name("mem"), 0u);
}

TEST(ProcessCounters, ParseTheKernelsTextFormats) {
  const char io[] =
      "rchar: 6976\nwchar: 12\nsyscr: 10\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 8192\n"
      "cancelled_write_bytes: 0\n";
  auto counters = opsight::collect::parse_io(io, sizeof(io) - 1);
  ASSERT_TRUE(counters);
  EXPECT_EQ(counters->read_bytes, 6976u);
  EXPECT_EQ(counters->write_bytes, 12u);
  EXPECT_EQ(counters->storage_read_bytes, 4096u);
  EXPECT_EQ(counters->storage_write_bytes, 8192u) << "not cancelled_write_bytes";
  EXPECT_FALSE(opsight::collect::parse_io("rchar: 1\n", 9));
  const char status[] = "Name:\tx\nVmHWM:\t    2148 kB\nVmRSS:\t    2000 kB\n";
  auto resident = opsight::collect::parse_status(status, sizeof(status) - 1);
  ASSERT_TRUE(resident);
  EXPECT_EQ(resident->resident_bytes, 2000 * 1024);
  EXPECT_EQ(resident->high_water_bytes, 2148 * 1024);
}

TEST(ProcessCounters, LiveReadingsAreSane) {
  auto resident = opsight::collect::resident_bytes();
  ASSERT_TRUE(resident);
  EXPECT_GT(*resident, 1 * kMiB);
  auto status = opsight::collect::resident_status();
  ASSERT_TRUE(status);
  EXPECT_GE(status->high_water_bytes, status->resident_bytes);
  EXPECT_TRUE(opsight::collect::thread_io());
  EXPECT_TRUE(opsight::collect::process_io());
  EXPECT_GT(opsight::collect::process_cpu_ns(), 0);
}

TEST(Sampler, RecordsProcessAndGpuCounterTracks) {
  auto fake = std::make_unique<opsight::collect::FakeGpuSource>();
  opsight::collect::GpuReading reading;
  reading.memory_used_bytes = 100 * kMiB;
  reading.utilization_percent = 40;
  reading.power_watts = 120.0;
  reading.temperature_celsius = 55;
  fake->add_gpu(reading);
  opsight::collect::set_gpu_source_for_tests(std::move(fake));
  opsight::SessionOptions options;
  options.sample_interval_ms = 10;
  Trace trace = record_in_memory(
      [] {
        OPSIGHT_SPAN("work");
        burn_cpu_time(std::chrono::milliseconds(100));
      },
      options);
  opsight::collect::set_gpu_source_for_tests(nullptr);
  std::map<std::string, std::vector<double>> samples;
  for (size_t row = 0; row < trace.counters.size(); ++row) {
    const auto& track = trace.counter_tracks[trace.counters.counter_track[row]];
    samples[std::string(trace.strings.get(track.name))].push_back(trace.counters.value[row]);
  }
  ASSERT_TRUE(samples.contains("process.rss_bytes"));
  EXPECT_GE(samples["process.rss_bytes"].size(), 5u);
  ASSERT_TRUE(samples.contains("process.cpu_percent"));
  double busiest = 0;
  for (double value : samples["process.cpu_percent"]) busiest = std::max(busiest, value);
  EXPECT_GT(busiest, 20.0) << "a thread burning CPU shows (a loaded machine shares the core)";
  EXPECT_TRUE(samples.contains("process.io_read_bytes_per_s"));
  ASSERT_TRUE(samples.contains("gpu0.power_watts"));
  EXPECT_EQ(samples["gpu0.power_watts"].front(), 120.0);
  EXPECT_EQ(samples["gpu0.temperature_celsius"].front(), 55.0);
  EXPECT_EQ(samples["gpu0.utilization_percent"].front(), 40.0);
  EXPECT_EQ(run_info_value(trace, "sampler_interval_ns"), "10000000");
  EXPECT_FALSE(run_info_value(trace, "metric_cost.sampler").empty());
}

}  // namespace
