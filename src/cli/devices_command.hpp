// `opsight devices`: the machine's GPUs as NVML reports them (index, name, driver version,
// memory used/total, utilization, temperature, power and its limit, health), as a text
// table or, with --format json, one JSON object (docs/devices.md). Without a GPU it says
// why ("no GPU found (libnvidia-ml.so.1 not found (no NVIDIA driver))") and exits 0.
//
// Where the GPUs come from is given to the command (DevicesSourceOpener): NVML in the
// installed CLI; the build-tree test program opsight_with_fake_gpus passes the
// OPSIGHT_FAKE_GPUS hook of fake_gpus_for_tests.hpp, which the installed CLI never reads.
//
// Exit status: 0 listed (GPUs, or none and why); 1 stdout cannot be written (or, in the
// test program, the OPSIGHT_FAKE_GPUS file is unusable); 64 bad usage.
//
// Thread-safety: none; one per process, used by main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
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

// The GPU source `opsight devices` reads, opened when the command runs.
struct DevicesSource {
  std::unique_ptr<collect::GpuSource> source;  // nullptr: no GPU source
  std::string no_gpu_reason;                   // why there is none ("no GPU: ...")
  std::optional<int> exit_status;              // set: the command ends with it (error said)
};
using DevicesSourceOpener = std::function<DevicesSource()>;

// NVML (collect::open_nvml): the installed CLI's source.
DevicesSource open_nvml_devices_source();

// The opener main() gives the command. Chosen at link time: open_nvml_devices_source in
// the installed `opsight` (devices_source_nvml.cc), the OPSIGHT_FAKE_GPUS hook in the
// build-tree test program opsight_with_fake_gpus (fake_gpus_for_tests.cc).
DevicesSourceOpener devices_source_of_this_build();

class DevicesCommand {
 public:
  // Adds `devices` to `app`; its options are parsed into this object. The GPUs come from
  // what `open_source` opens when the command runs.
  DevicesCommand(CLI::App& app, DevicesSourceOpener open_source = open_nvml_devices_source);
  DevicesCommand(const DevicesCommand&) = delete;
  DevicesCommand& operator=(const DevicesCommand&) = delete;

  // The exit status when `devices` was the parsed command; nullopt otherwise.
  std::optional<int> run();

 private:
  CLI::App* command_ = nullptr;
  DevicesSourceOpener open_source_;
  std::string format_ = "text";
};

}  // namespace opsight::cli
