// The background sampler: while a session records, a thread of its own samples the
// process's resident set, CPU use and I/O rates, and each GPU's utilization, memory,
// power and temperature, and records them as counter tracks ("process.rss_bytes",
// "gpu0.power_watts", see schema/metric_names.hpp for the naming and units). The time each
// sample takes is added to the "sampler" metric cost; it is spent on the sampler's thread,
// not on the program's.
//
// Thread-safety: construct and destroy from one thread (the session's owner).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "collect/process_counters.hpp"

namespace opsight::collect {

class GpuSource;

struct SamplerOptions {
  std::chrono::milliseconds interval{100};
  bool gpus = true;  // sample GPUs when NVML finds any
};

// The counters of one process sample and the rates since the previous one; a pure
// computation, kept apart from the thread so that tests can feed it.
struct ProcessSample {
  int64_t monotonic_ns = 0;
  int64_t cpu_ns = 0;
  std::optional<int64_t> resident_bytes;
  std::optional<IoCounters> io;
  NetworkCounters network;
};

// Records one sample's counters (rates against `previous` when given).
void record_process_sample(const ProcessSample& sample, const ProcessSample* previous);
// Records one reading of every GPU of `source`.
void record_gpu_sample(GpuSource& source);
ProcessSample take_process_sample();

class Sampler {
 public:
  explicit Sampler(SamplerOptions options);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  uint64_t samples_taken() const { return samples_; }

 private:
  void run();

  SamplerOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_requested_ = false;
  uint64_t samples_ = 0;
  std::thread thread_;
};

}  // namespace opsight::collect
