// GPU readings: memory, utilization, temperature and power per GPU, from NVIDIA's
// management library (NVML), which is loaded at run time with dlopen("libnvidia-ml.so.1").
// Nothing links against NVML or includes CUDA headers, so the same build runs on machines
// with and without an NVIDIA driver; without one, open_nvml() says why and returns nullptr.
//
// Users: the sampler (counter tracks "gpu<N>.<quantity>"), per-span GPU metrics
// (memory_used_bytes() at span ends) and `opsight devices`. Tests use FakeGpuSource
// (fake_gpu_for_tests.hpp) or hand open_nvml_with_symbols() stand-ins for NVML's functions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opsight::collect {

// One GPU at one moment. An empty optional is a value the GPU does not report (NVML says
// "not supported") or whose read failed (then `health` names the failure).
struct GpuReading {
  uint32_t index = 0;
  std::string name, uuid;
  std::optional<uint64_t> memory_used_bytes, memory_total_bytes;
  std::optional<uint32_t> utilization_percent, memory_utilization_percent;
  std::optional<uint32_t> temperature_celsius, slowdown_temperature_celsius;
  std::optional<double> power_watts, power_limit_watts;
  // "ok"; "hot (87 °C, slows down at 90 °C)"; or "error: nvmlDeviceGetMemoryInfo: GPU is
  // lost" when a read failed (see describe_gpu_health).
  std::string health;
};

// A source of GPU readings.
//
// Thread-safety: one thread at a time per object, unless the implementation says more
// (the NVML source and FakeGpuSource may be used from any number of threads at once).
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // The NVIDIA driver's version ("550.54.15"); empty when it cannot be read.
  virtual std::string driver_version() = 0;
  virtual uint32_t device_count() = 0;
  // Every field it can get for GPU `index`; failures go into `health`, never thrown.
  virtual GpuReading read(uint32_t index) = 0;
  // The cheap read used per span: memory in use on GPU `index`; nullopt if it fails.
  virtual std::optional<uint64_t> memory_used_bytes(uint32_t index) = 0;
};

// The reads behind a GpuReading, each one NVML call; a failed one empties its fields.
enum class GpuQuery {
  kName,                 // name
  kUuid,                 // uuid
  kMemory,               // memory_used_bytes, memory_total_bytes
  kUtilization,          // utilization_percent, memory_utilization_percent
  kTemperature,          // temperature_celsius
  kSlowdownTemperature,  // slowdown_temperature_celsius
  kPower,                // power_watts
  kPowerLimit,           // power_limit_watts
};
inline constexpr GpuQuery kAllGpuQueries[] = {
    GpuQuery::kName,        GpuQuery::kUuid,        GpuQuery::kMemory,
    GpuQuery::kUtilization, GpuQuery::kTemperature, GpuQuery::kSlowdownTemperature,
    GpuQuery::kPower,       GpuQuery::kPowerLimit};

// The NVML function a query calls ("nvmlDeviceGetMemoryInfo"): the name health errors use.
std::string_view nvml_function_name(GpuQuery query);
// Empties the fields of `reading` that `query` fills.
void clear_query_fields(GpuQuery query, GpuReading* reading);

// A read that failed: the NVML function and NVML's words for the error.
struct GpuReadFailure {
  std::string function;  // "nvmlDeviceGetMemoryInfo"
  std::string message;   // "GPU is lost"
};

// A GPU is "hot" from this many degrees below its slowdown temperature.
inline constexpr uint32_t kHotMarginCelsius = 5;

// The health text of a reading: "error: <function>: <message>" for the first failure
// (" (and N other reads failed)" when there are more); otherwise "hot (T °C, slows down at
// S °C)" when both temperatures are known and T >= S - kHotMarginCelsius; otherwise "ok".
std::string describe_gpu_health(const GpuReading& reading,
                                const std::vector<GpuReadFailure>& failures);

// The part of NVML's C API that open_nvml uses, declared here from NVML's API reference (no
// NVIDIA header is needed to build), and shared with tests that stand in for NVML.
namespace nvml {
using Return = int;  // nvmlReturn_t, a C enum
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorGpuIsLost = 15;
struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t
struct Memory {                // nvmlMemory_t
  unsigned long long total, free, used;
};
struct Utilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};
inline constexpr int kTemperatureGpu = 0;                 // NVML_TEMPERATURE_GPU
inline constexpr int kTemperatureThresholdSlowdown = 1;   // NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
inline constexpr unsigned int kDriverVersionLength = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
inline constexpr unsigned int kNameLength = 96;           // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kUuidLength = 96;           // NVML_DEVICE_UUID_V2_BUFFER_SIZE
}  // namespace nvml

// NVML through dlopen("libnvidia-ml.so.1"). Returns nullptr with *why_not set when there is
// no usable GPU: "no GPU: libnvidia-ml.so.1 not found (no NVIDIA driver)", "no GPU: nvmlInit
// failed: <NVML's error>", "no GPU: the NVIDIA driver reports 0 devices", ... Never throws,
// never prints. The library stays loaded for the life of the process (never dlclose'd, so
// nothing can call into an unloaded library during shutdown); each returned source calls
// nvmlShutdown when destroyed, balancing its nvmlInit. The source may be used from any
// number of threads at once (NVML is thread-safe; the source is immutable once open).
std::unique_ptr<GpuSource> open_nvml(std::string* why_not);

// For tests: like open_nvml, with NVML's functions found by `lookup(name)` (nullptr: not
// there) instead of in libnvidia-ml.so.1, so the NVML code path runs without a driver.
// `lookup` is called only during this call; the functions must outlive the source.
using NvmlSymbolLookup = std::function<void*(const char* symbol_name)>;
std::unique_ptr<GpuSource> open_nvml_with_symbols(const NvmlSymbolLookup& lookup,
                                                  std::string* why_not);

// The process's shared GPU source, opened on first use (thread-safe); nullptr when there
// is none, with the reason in gpu_unavailable_reason(). Never logs: the caller reports "no
// GPU" once. The shared NVML source is never destroyed (threads may still read it while the
// process exits).
GpuSource* shared_gpu_source();
// Why shared_gpu_source() is nullptr ("no GPU: ..."); empty when it is not.
const std::string& gpu_unavailable_reason();

// For tests: make shared_gpu_source() return `source` (nullptr restores NVML). The source
// it replaces is destroyed: nothing may still be using it.
void set_gpu_source_for_tests(std::unique_ptr<GpuSource> source);

}  // namespace opsight::collect
