// The background sampler; see sampler.hpp.
#include "collect/sampler.hpp"

#include <fmt/format.h>

#include <string>

#include "collect/gpu.hpp"
#include "collect/metric_costs.hpp"
#include "opsight/opsight.hpp"

namespace opsight::collect {
namespace {

void record_rate(const char* name, uint64_t now, uint64_t before, double seconds) {
  if (now < before || seconds <= 0) return;
  opsight::counter(name, static_cast<double>(now - before) / seconds);
}

}  // namespace

ProcessSample take_process_sample() {
  ProcessSample sample;
  sample.monotonic_ns = internal::monotonic_ns();
  sample.cpu_ns = process_cpu_ns();
  sample.resident_bytes = resident_bytes();
  sample.io = process_io();
  sample.network = process_network();
  return sample;
}

void record_process_sample(const ProcessSample& sample, const ProcessSample* previous) {
  if (sample.resident_bytes)
    opsight::counter("process.rss_bytes", static_cast<double>(*sample.resident_bytes));
  if (previous == nullptr || sample.monotonic_ns <= previous->monotonic_ns) return;
  double seconds = static_cast<double>(sample.monotonic_ns - previous->monotonic_ns) / 1e9;
  // 100 = one core busy all the time.
  opsight::counter("process.cpu_percent",
                   100.0 * static_cast<double>(sample.cpu_ns - previous->cpu_ns) / 1e9 / seconds);
  if (sample.io && previous->io) {
    record_rate("process.io_read_bytes_per_s", sample.io->read_bytes, previous->io->read_bytes,
                seconds);
    record_rate("process.io_write_bytes_per_s", sample.io->write_bytes, previous->io->write_bytes,
                seconds);
    record_rate("process.storage_read_bytes_per_s", sample.io->storage_read_bytes,
                previous->io->storage_read_bytes, seconds);
    record_rate("process.storage_write_bytes_per_s", sample.io->storage_write_bytes,
                previous->io->storage_write_bytes, seconds);
  }
  record_rate("process.net_sent_bytes_per_s", sample.network.sent_bytes,
              previous->network.sent_bytes, seconds);
  record_rate("process.net_received_bytes_per_s", sample.network.received_bytes,
              previous->network.received_bytes, seconds);
}

void record_gpu_sample(GpuSource& source) {
  for (uint32_t index = 0; index < source.device_count(); ++index) {
    GpuReading reading = source.read(index);
    auto record = [&](std::string_view quantity, double value) {
      opsight::counter(fmt::format("gpu{}.{}", reading.index, quantity), value);
    };
    if (reading.utilization_percent) record("utilization_percent", *reading.utilization_percent);
    if (reading.memory_utilization_percent)
      record("memory_utilization_percent", *reading.memory_utilization_percent);
    if (reading.memory_used_bytes)
      record("memory_used_bytes", static_cast<double>(*reading.memory_used_bytes));
    if (reading.power_watts) record("power_watts", *reading.power_watts);
    if (reading.temperature_celsius) record("temperature_celsius", *reading.temperature_celsius);
  }
}

Sampler::Sampler(SamplerOptions options) : options_(options) {
  if (options_.interval.count() <= 0) options_.interval = std::chrono::milliseconds(1);
  note_sampler_interval_ns(
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.interval).count());
  thread_ = std::thread([this] { run(); });
}

Sampler::~Sampler() {
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Sampler::run() {
  opsight::set_thread_name("opsight sampler");
  GpuSource* gpus = nullptr;
  if (options_.gpus) {
    gpus = shared_gpu_source();
    if (gpus == nullptr) note_gpu_unavailable(gpu_unavailable_reason());
  }
  std::optional<ProcessSample> previous;
  std::unique_lock lock(mutex_);
  while (!stop_requested_) {
    lock.unlock();
    uint64_t began = cost_clock_ticks();
    ProcessSample sample = take_process_sample();
    record_process_sample(sample, previous ? &*previous : nullptr);
    if (gpus != nullptr) record_gpu_sample(*gpus);
    previous = sample;
    ++samples_;
    add_metric_cost(CostGroup::kSampler, 1, cost_clock_ticks() - began);
    lock.lock();
    wake_.wait_for(lock, options_.interval, [this] { return stop_requested_; });
  }
}

}  // namespace opsight::collect
