// `opsight devices`: the machine's GPUs as NVML reports them (index, name, driver version,
// memory used/total, utilization, temperature, power and its limit, health), as a text
// table or, with --format json, one JSON object (docs/devices.md). Without a GPU it says
// why ("no GPU found (libnvidia-ml.so.1 not found (no NVIDIA driver))") and exits 0.
//
// Test hook: OPSIGHT_FAKE_GPUS=PATH makes it list the fake GPUs that JSON file describes
// instead of asking NVML, so the rendering is tested on machines without a GPU.
//
// Exit status: 0 listed (GPUs, or none and why); 1 the OPSIGHT_FAKE_GPUS file is unusable
// or stdout cannot be written; 64 bad usage.
//
// Thread-safety: none; one per process, used by main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collect/gpu.hpp"

namespace opsight::cli {

// What `opsight devices` shows: every GPU of a source read once, or why there is none.
struct DeviceListing {
  std::string driver_version;             // empty: unknown, or no GPU
  std::vector<collect::GpuReading> gpus;  // empty when there is no GPU
  std::string no_gpu_reason;              // "no GPU: ..." when gpus is empty
};

// Reads every GPU of `source`; with no source, a listing that carries `no_gpu_reason`.
DeviceListing list_devices(collect::GpuSource* source, const std::string& no_gpu_reason);
std::string render_devices_text(const DeviceListing& listing);
std::string render_devices_json(const DeviceListing& listing);

// A FakeGpuSource from the JSON text of an OPSIGHT_FAKE_GPUS file: {"driver_version": "...",
// "gpus": [{"name": ..., "memory_used_bytes": ..., ..., "failed_reads":
// {"nvmlDeviceGetPowerUsage": "Unknown Error"}}]}, with the field names of the JSON output
// (null or absent: not reported). nullptr with *error naming the field when it is not so.
std::unique_ptr<collect::GpuSource> parse_fake_gpus(const std::string& json_text,
                                                    std::string* error);

class DevicesCommand {
 public:
  // Adds `devices` to `app`; its options are parsed into this object.
  explicit DevicesCommand(CLI::App& app);
  DevicesCommand(const DevicesCommand&) = delete;
  DevicesCommand& operator=(const DevicesCommand&) = delete;

  // The exit status when `devices` was the parsed command; nullopt otherwise.
  std::optional<int> run();

 private:
  CLI::App* command_ = nullptr;
  std::string format_ = "text";
};

}  // namespace opsight::cli
