// A test helper: GPUs whose readings a test sets, with reads that fail on demand, so that
// everything above the GPU source (health, the sampler, per-span GPU metrics, `opsight
// devices`) is tested on machines without a GPU. Used by gpu_test.cc, the sampler's tests,
// the devices command's tests and, through OPSIGHT_FAKE_GPUS, the build-tree test program
// opsight_with_fake_gpus (src/cli/fake_gpus_for_tests.cc); never by the installed CLI.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collect/gpu.hpp"

namespace opsight::collect {

// GPUs that report what the test set. A failed query empties its fields in read() and
// makes `health` "error: <NVML function>: <message>", as the NVML source does; a failed
// kMemory query also makes memory_used_bytes() nullopt. A value a GPU "does not support"
// is simply an empty optional in the reading the test sets. `health` in the readings the
// test sets is ignored: read() computes it with describe_gpu_health.
//
// Thread-safety: any number of threads at once (one mutex).
class FakeGpuSource final : public GpuSource {
 public:
  explicit FakeGpuSource(std::string driver_version = "555.42.06 (fake)")
      : driver_version_(std::move(driver_version)) {}

  // Adds a GPU; its index is the number added before it. Returns that index.
  uint32_t add_gpu(GpuReading reading) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto index = static_cast<uint32_t>(gpus_.size());
    reading.index = index;
    gpus_.push_back({std::move(reading), {}});
    return index;
  }
  // Replaces what GPU `index` reports (its failures stay).
  void set_reading(uint32_t index, GpuReading reading) {
    std::lock_guard<std::mutex> lock(mutex_);
    reading.index = index;
    gpus_.at(index).reading = std::move(reading);
  }
  void set_memory_used_bytes(uint32_t index, std::optional<uint64_t> bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    gpus_.at(index).reading.memory_used_bytes = bytes;
  }
  // From now on, `query` on GPU `index` fails with NVML's `message` ("GPU is lost").
  void fail_query(uint32_t index, GpuQuery query, std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    gpus_.at(index).failures[query] = std::move(message);
  }
  // Every query on GPU `index` fails with `message`.
  void fail_every_query(uint32_t index, const std::string& message) {
    for (GpuQuery query : kAllGpuQueries) fail_query(index, query, message);
  }
  void clear_failures(uint32_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    gpus_.at(index).failures.clear();
  }

  // How often read() and memory_used_bytes() were called, over all GPUs.
  size_t read_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return read_calls_;
  }
  size_t memory_used_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return memory_used_calls_;
  }

  std::string driver_version() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return driver_version_;
  }
  uint32_t device_count() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<uint32_t>(gpus_.size());
  }
  GpuReading read(uint32_t index) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++read_calls_;
    GpuReading reading;
    reading.index = index;
    std::vector<GpuReadFailure> failures;
    if (index >= gpus_.size()) {
      failures.push_back({"nvmlDeviceGetHandleByIndex_v2",
                          "no GPU with index " + std::to_string(index) + " (the fake has " +
                              std::to_string(gpus_.size()) + ")"});
    } else {
      reading = gpus_[index].reading;
      for (GpuQuery query : kAllGpuQueries) {
        auto failure = gpus_[index].failures.find(query);
        if (failure == gpus_[index].failures.end()) continue;
        clear_query_fields(query, &reading);
        failures.push_back({std::string(nvml_function_name(query)), failure->second});
      }
    }
    reading.health = describe_gpu_health(reading, failures);
    return reading;
  }
  std::optional<uint64_t> memory_used_bytes(uint32_t index) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++memory_used_calls_;
    if (index >= gpus_.size() || gpus_[index].failures.count(GpuQuery::kMemory) != 0)
      return std::nullopt;
    return gpus_[index].reading.memory_used_bytes;
  }

 private:
  struct FakeGpu {
    GpuReading reading;
    std::map<GpuQuery, std::string> failures;  // query -> NVML's error message
  };
  mutable std::mutex mutex_;
  std::string driver_version_;
  std::vector<FakeGpu> gpus_;
  size_t read_calls_ = 0;
  size_t memory_used_calls_ = 0;
};

}  // namespace opsight::collect
