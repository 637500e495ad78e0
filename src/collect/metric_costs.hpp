// What reading metrics has cost in the current session, per metric group, and the run
// information that carries it into the trace ("metric_cost.<group>", see
// schema/metric_names.hpp). The per-span readers and the sampler add to it; the session
// resets it at start and writes it at stop.
//
// Thread-safety: all functions may be called from any thread (relaxed atomics; the totals
// are read once recording threads have stopped adding).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opsight::collect {

enum class CostGroup : uint8_t { kCpu, kMemory, kDisk, kNetwork, kGpu, kHeap, kSampler, kCount };

// Ticks of the recorder's clock (rdtsc where it is the clock): cheap to take around reads.
uint64_t cost_clock_ticks();
// Adds one group's cost: `readings` reads that took `ticks` in all.
void add_metric_cost(CostGroup group, uint64_t readings, uint64_t ticks);

// Forgets all costs and notes of the previous session.
void reset_metric_costs();
// Remembers why GPU metrics are absent, for the run information (kept once).
void note_gpu_unavailable(const std::string& reason);
// Remembers the sampler's interval, for the run information.
void note_sampler_interval_ns(int64_t interval_ns);

// The run information entries for what was measured this session.
std::vector<std::pair<std::string, std::string>> metric_run_info();

}  // namespace opsight::collect
