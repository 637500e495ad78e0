// Per-group metric cost; see metric_costs.hpp.
#include "collect/metric_costs.hpp"

#include <array>
#include <atomic>
#include <mutex>

#include "opsight/internal/recorder_inline.hpp"
#include "record/clock.hpp"
#include "schema/metric_names.hpp"

namespace opsight::collect {
namespace {

constexpr std::array<std::string_view, static_cast<size_t>(CostGroup::kCount)> kGroupNames = {
    "cpu", "memory", "disk", "network", "gpu", "heap", schema::kMetricCostSampler};

struct GroupCost {
  std::atomic<uint64_t> readings{0};
  std::atomic<uint64_t> ticks{0};
};

struct Costs {
  std::array<GroupCost, static_cast<size_t>(CostGroup::kCount)> groups;
  std::mutex notes_mutex;
  std::atomic<bool> gpu_unavailable_noted{false};  // lets every span after the first skip the lock
  std::string gpu_unavailable;
  int64_t sampler_interval_ns = 0;
  format::ClockSync session_start{};
};

Costs& costs() {
  static Costs instance;
  return instance;
}

}  // namespace

uint64_t cost_clock_ticks() { return internal::now_ticks(); }

void add_metric_cost(CostGroup group, uint64_t readings, uint64_t ticks) {
  GroupCost& cost = costs().groups[static_cast<size_t>(group)];
  cost.readings.fetch_add(readings, std::memory_order_relaxed);
  cost.ticks.fetch_add(ticks, std::memory_order_relaxed);
}

void reset_metric_costs() {
  Costs& all = costs();
  for (GroupCost& cost : all.groups) {
    cost.readings.store(0);
    cost.ticks.store(0);
  }
  std::lock_guard lock(all.notes_mutex);
  all.gpu_unavailable.clear();
  all.gpu_unavailable_noted.store(false);
  all.sampler_interval_ns = 0;
  all.session_start = record::take_clock_sync();
}

void note_gpu_unavailable(const std::string& reason) {
  Costs& all = costs();
  if (all.gpu_unavailable_noted.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(all.notes_mutex);
  if (all.gpu_unavailable.empty()) all.gpu_unavailable = reason;
  all.gpu_unavailable_noted.store(true, std::memory_order_relaxed);
}

void note_sampler_interval_ns(int64_t interval_ns) {
  Costs& all = costs();
  std::lock_guard lock(all.notes_mutex);
  all.sampler_interval_ns = interval_ns;
}

std::vector<std::pair<std::string, std::string>> metric_run_info() {
  Costs& all = costs();
  // Ticks to ns by the line through the session's start and now.
  format::ClockSync now = record::take_clock_sync();
  double ns_per_tick = 1.0;
  {
    std::lock_guard lock(all.notes_mutex);
    if (now.ticks > all.session_start.ticks && now.monotonic_ns > all.session_start.monotonic_ns)
      ns_per_tick = static_cast<double>(now.monotonic_ns - all.session_start.monotonic_ns) /
                    static_cast<double>(now.ticks - all.session_start.ticks);
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t index = 0; index < all.groups.size(); ++index) {
    const GroupCost& cost = all.groups[index];
    uint64_t readings = cost.readings.load();
    if (readings == 0) continue;
    auto total_ns = static_cast<int64_t>(static_cast<double>(cost.ticks.load()) * ns_per_tick);
    entries.emplace_back(std::string(schema::kMetricCostPrefix) + std::string(kGroupNames[index]),
                         std::to_string(readings) + " " + std::to_string(total_ns));
  }
  std::lock_guard lock(all.notes_mutex);
  if (all.sampler_interval_ns > 0)
    entries.emplace_back(std::string(schema::kSamplerIntervalKey),
                         std::to_string(all.sampler_interval_ns));
  if (!all.gpu_unavailable.empty())
    entries.emplace_back(std::string(schema::kGpuUnavailableKey), all.gpu_unavailable);
  return entries;
}

}  // namespace opsight::collect
