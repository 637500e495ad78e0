// The OPSIGHT_FAKE_GPUS test hook of `opsight devices` (docs/devices.md), for test builds
// only: the installed `opsight` never reads the variable. The build-tree program
// opsight_with_fake_gpus is the real CLI with this opener in place of NVML's, and the
// devices command's unit tests use parse_fake_gpus directly.
#pragma once

#include <memory>
#include <string>

#include "cli/devices_command.hpp"
#include "collect/gpu.hpp"

namespace opsight::cli {

inline constexpr const char* kFakeGpusVariable = "OPSIGHT_FAKE_GPUS";

// A FakeGpuSource from the JSON text of an OPSIGHT_FAKE_GPUS file: {"driver_version": "...",
// "gpus": [{"name": ..., "memory_used_bytes": ..., ..., "failed_reads":
// {"nvmlDeviceGetPowerUsage": "Unknown Error"}}]}, with the field names of the JSON output
// (null or absent: not reported). nullptr with *error naming the field when it is not so.
std::unique_ptr<collect::GpuSource> parse_fake_gpus(const std::string& json_text,
                                                    std::string* error);

// The GPUs of the file OPSIGHT_FAKE_GPUS names (saying on stderr that they are fakes), or
// NVML's when the variable is unset or empty. An unreadable or malformed file is a
// one-line error and exit status 1.
DevicesSource open_fake_gpus_or_nvml();

}  // namespace opsight::cli
