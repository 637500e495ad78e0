// Per-span metrics (start_metrics / finish_metrics of <opsight/metrics.hpp>): readings at
// a span's start and end, their differences written as "metric.*" arguments, and the time
// the readings took added to the thread's tracer overhead and to the per-group costs.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "collect/gpu.hpp"
#include "collect/metric_costs.hpp"
#include "collect/process_counters.hpp"
#include "opsight/metrics.hpp"
#include "record/recorder.hpp"
#include "schema/metric_names.hpp"

namespace opsight {
namespace collect {
namespace {

// The largest resident set of the process while each open memory span runs.
//
// The kernel keeps one high-water mark of RSS per process, which can be reset to the
// current RSS (/proc/self/clear_refs). A span resets it at its start; so that spans that
// overlap (nested, or on other threads) keep exact peaks, every reset and every end first
// folds the mark reached so far into all open spans. Where the reset is forbidden, a span's
// peak is the mark at its end if the span raised it, otherwise the larger of its start and
// end RSS (a lower bound); OPSIGHT_RSS_PEAK=passive asks for that mode. Thread-safety: all
// methods lock.
class ResidentPeakTracker {
 public:
  struct Opened {
    uint32_t slot = 0;  // 0: not tracked (passive or full)
    int64_t resident_bytes = 0;
    int64_t high_water_bytes = -1;  // the mark at the start when passive, else -1
  };

  Opened open() {
    std::lock_guard lock(mutex_);
    Opened opened;
    if (open_.empty() && reset_possible_) {
      opened.resident_bytes = resident_bytes().value_or(0);
    } else {
      auto status = resident_status().value_or(ResidentStatus{});
      fold(status.high_water_bytes);
      opened.resident_bytes = status.resident_bytes;
      opened.high_water_bytes = status.high_water_bytes;
    }
    if (reset_possible_ && !reset_resident_high_water()) reset_possible_ = false;
    if (!reset_possible_) {
      if (opened.high_water_bytes < 0)
        opened.high_water_bytes = resident_status().value_or(ResidentStatus{}).high_water_bytes;
      return opened;
    }
    opened.high_water_bytes = -1;
    if (open_.size() >= kMaxOpenSpans) return opened;  // peak: a lower bound
    opened.slot = next_slot_++;
    if (next_slot_ == 0) next_slot_ = 1;
    open_.push_back({opened.slot, opened.resident_bytes});
    return opened;
  }

  int64_t close(uint32_t slot, int64_t start_resident, int64_t start_high_water,
                const ResidentStatus& end) {
    int64_t lower_bound = std::max(start_resident, end.resident_bytes);
    if (slot == 0) {
      if (start_high_water >= 0 && end.high_water_bytes > start_high_water)
        return std::max(lower_bound, end.high_water_bytes);
      return lower_bound;
    }
    std::lock_guard lock(mutex_);
    fold(end.high_water_bytes);
    auto found = std::find_if(open_.begin(), open_.end(),
                              [slot](const OpenSpan& span) { return span.slot == slot; });
    if (found == open_.end()) return lower_bound;
    int64_t peak = std::max(found->peak, lower_bound);
    open_.erase(found);
    return peak;
  }

 private:
  static constexpr size_t kMaxOpenSpans = 1024;
  struct OpenSpan {
    uint32_t slot;
    int64_t peak;
  };

  void fold(int64_t high_water) {
    for (OpenSpan& span : open_) span.peak = std::max(span.peak, high_water);
  }

  std::mutex mutex_;
  std::vector<OpenSpan> open_;
  uint32_t next_slot_ = 1;
  // OPSIGHT_RSS_PEAK=passive leaves the kernel's mark alone (the traced program's own
  // getrusage ru_maxrss and VmHWM then stay as they would be untraced).
  bool reset_possible_ = !passive_requested();

  static bool passive_requested() {
    const char* mode = std::getenv("OPSIGHT_RSS_PEAK");
    return mode != nullptr && std::string_view(mode) == "passive";
  }
};

ResidentPeakTracker& peak_tracker() {
  static ResidentPeakTracker tracker;
  return tracker;
}

std::string metric_key(std::string_view name) {
  return std::string(schema::kMetricArgPrefix) + std::string(name);
}

// The argument keys, built once.
struct MetricKeys {
  std::string cpu = metric_key(schema::kMetricCpuNs);
  std::string rss_start = metric_key(schema::kMetricRssStart);
  std::string rss_end = metric_key(schema::kMetricRssEnd);
  std::string rss_delta = metric_key(schema::kMetricRssDelta);
  std::string rss_peak = metric_key(schema::kMetricRssPeak);
  std::string io_read = metric_key(schema::kMetricIoRead);
  std::string io_write = metric_key(schema::kMetricIoWrite);
  std::string storage_read = metric_key(schema::kMetricStorageRead);
  std::string storage_write = metric_key(schema::kMetricStorageWrite);
  std::string net_sent = metric_key(schema::kMetricNetSent);
  std::string net_received = metric_key(schema::kMetricNetReceived);
  std::string gpu_memory_used = metric_key(schema::kMetricGpuMemoryUsed);
  std::string gpu_memory_delta = metric_key(schema::kMetricGpuMemoryDelta);
  std::string gpu_utilization = metric_key(schema::kMetricGpuUtilization);
  std::string gpu_power = metric_key(schema::kMetricGpuPower);
};

const MetricKeys& keys() {
  static const MetricKeys instance;
  return instance;
}

// The GPU source for per-span metrics; reports "no GPU" on stderr once per process.
GpuSource* span_gpu_source() {
  GpuSource* source = shared_gpu_source();
  if (source == nullptr) {
    static std::once_flag reported;
    std::call_once(reported, [] {
      std::fprintf(stderr, "opsight: %s; gpu metrics are left out\n",
                   gpu_unavailable_reason().c_str());
    });
    note_gpu_unavailable(gpu_unavailable_reason());
  }
  return source;
}

int64_t total_gpu_memory_used(GpuSource& source) {
  int64_t total = 0;
  for (uint32_t index = 0; index < source.device_count(); ++index)
    total += static_cast<int64_t>(source.memory_used_bytes(index).value_or(0));
  return total;
}

// Times one group's readings and adds them to its cost.
class GroupTimer {
 public:
  explicit GroupTimer(CostGroup group) : group_(group), start_(cost_clock_ticks()) {}
  ~GroupTimer() { add_metric_cost(group_, 1, cost_clock_ticks() - start_); }
  GroupTimer(const GroupTimer&) = delete;
  GroupTimer& operator=(const GroupTimer&) = delete;

 private:
  CostGroup group_;
  uint64_t start_;
};

}  // namespace

}  // namespace collect

uint32_t metric_group_from_name(std::string_view name) {
  for (uint32_t bit = 1; bit & kAllNativeMetrics; bit <<= 1)
    if (metric_group_name(bit) == name) return bit;
  return 0;
}

std::string_view metric_group_name(uint32_t group) {
  switch (group) {
    case kMetricCpu:
      return "cpu";
    case kMetricMemory:
      return "memory";
    case kMetricDisk:
      return "disk";
    case kMetricNetwork:
      return "network";
    case kMetricGpu:
      return "gpu";
    default:
      return "";
  }
}

MetricStart start_metrics(uint32_t groups) {
  using namespace collect;
  MetricStart start;
  groups &= kAllNativeMetrics;
  if (groups == 0 || !recording()) return start;
  uint64_t began = cost_clock_ticks();
  start.groups = groups;
  if (groups & kMetricMemory) {
    GroupTimer timer(CostGroup::kMemory);
    auto opened = peak_tracker().open();
    start.peak_slot = opened.slot;
    start.rss_bytes = opened.resident_bytes;
    start.rss_high_water_bytes = opened.high_water_bytes;
  }
  if (groups & kMetricDisk) {
    GroupTimer timer(CostGroup::kDisk);
    IoCounters io = thread_io().value_or(IoCounters{});
    start.io_read_bytes = io.read_bytes;
    start.io_write_bytes = io.write_bytes;
    start.storage_read_bytes = io.storage_read_bytes;
    start.storage_write_bytes = io.storage_write_bytes;
  }
  if (groups & kMetricNetwork) {
    GroupTimer timer(CostGroup::kNetwork);
    NetworkCounters network = thread_network();
    start.net_sent_bytes = network.sent_bytes;
    start.net_received_bytes = network.received_bytes;
  }
  if (groups & kMetricGpu) {
    GroupTimer timer(CostGroup::kGpu);
    if (GpuSource* source = span_gpu_source())
      start.gpu_memory_used_bytes = total_gpu_memory_used(*source);
  }
  // Last, so that the other readings are not counted as the span's CPU time.
  if (groups & kMetricCpu) {
    GroupTimer timer(CostGroup::kCpu);
    start.cpu_ns = thread_cpu_ns();
  }
  record::add_thread_overhead_ticks(cost_clock_ticks() - began);
  return start;
}

void finish_metrics(const MetricStart& start) {
  using namespace collect;
  if (start.groups == 0) return;
  uint64_t began = cost_clock_ticks();
  const MetricKeys& key = keys();
  // First, so that the other readings are not counted as the span's CPU time.
  if (start.groups & kMetricCpu) {
    GroupTimer timer(CostGroup::kCpu);
    add_arg(key.cpu, thread_cpu_ns() - start.cpu_ns);
  }
  if (start.groups & kMetricMemory) {
    GroupTimer timer(CostGroup::kMemory);
    ResidentStatus end = resident_status().value_or(ResidentStatus{});
    int64_t peak =
        peak_tracker().close(start.peak_slot, start.rss_bytes, start.rss_high_water_bytes, end);
    add_arg(key.rss_start, start.rss_bytes);
    add_arg(key.rss_end, end.resident_bytes);
    add_arg(key.rss_delta, end.resident_bytes - start.rss_bytes);
    add_arg(key.rss_peak, peak);
  }
  if (start.groups & kMetricDisk) {
    GroupTimer timer(CostGroup::kDisk);
    if (auto io = thread_io()) {
      add_arg(key.io_read, static_cast<int64_t>(io->read_bytes - start.io_read_bytes));
      add_arg(key.io_write, static_cast<int64_t>(io->write_bytes - start.io_write_bytes));
      add_arg(key.storage_read,
              static_cast<int64_t>(io->storage_read_bytes - start.storage_read_bytes));
      add_arg(key.storage_write,
              static_cast<int64_t>(io->storage_write_bytes - start.storage_write_bytes));
    }
  }
  if (start.groups & kMetricNetwork) {
    GroupTimer timer(CostGroup::kNetwork);
    NetworkCounters network = thread_network();
    add_arg(key.net_sent, static_cast<int64_t>(network.sent_bytes - start.net_sent_bytes));
    add_arg(key.net_received,
            static_cast<int64_t>(network.received_bytes - start.net_received_bytes));
  }
  if ((start.groups & kMetricGpu) && start.gpu_memory_used_bytes >= 0) {
    GroupTimer timer(CostGroup::kGpu);
    if (GpuSource* source = shared_gpu_source()) {
      int64_t used = total_gpu_memory_used(*source);
      add_arg(key.gpu_memory_used, used);
      add_arg(key.gpu_memory_delta, used - start.gpu_memory_used_bytes);
      // Utilization and power of the busiest GPU.
      std::optional<uint32_t> busiest;
      std::optional<double> power;
      for (uint32_t index = 0; index < source->device_count(); ++index) {
        GpuReading reading = source->read(index);
        if (reading.utilization_percent && (!busiest || *reading.utilization_percent > *busiest)) {
          busiest = reading.utilization_percent;
          power = reading.power_watts;
        }
      }
      if (busiest) add_arg(key.gpu_utilization, static_cast<int64_t>(*busiest));
      if (power) add_arg(key.gpu_power, *power);
    }
  }
  record::add_thread_overhead_ticks(cost_clock_ticks() - began);
}

namespace internal {

// A group bit's position is its CostGroup (kMetricCpu = 1 << kCpu, ...).
static_assert(kMetricCpu == 1u << static_cast<int>(collect::CostGroup::kCpu) &&
              kMetricMemory == 1u << static_cast<int>(collect::CostGroup::kMemory) &&
              kMetricDisk == 1u << static_cast<int>(collect::CostGroup::kDisk) &&
              kMetricNetwork == 1u << static_cast<int>(collect::CostGroup::kNetwork) &&
              kMetricGpu == 1u << static_cast<int>(collect::CostGroup::kGpu));

void account_metric_cost(std::string_view group, uint64_t readings, uint64_t ticks) {
  using namespace collect;
  CostGroup cost_group = group == "heap" ? CostGroup::kHeap : CostGroup::kCount;
  for (uint32_t bit = 1; bit & kAllNativeMetrics; bit <<= 1)
    if (metric_group_name(bit) == group) cost_group = static_cast<CostGroup>(std::countr_zero(bit));
  if (cost_group == CostGroup::kCount) return;
  add_metric_cost(cost_group, readings, ticks);
  record::add_thread_overhead_ticks(ticks);
}

}  // namespace internal
}  // namespace opsight
