#include "collect/gpu.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

namespace opsight::collect {

namespace {

using NvmlReturn = nvml::Return;
using NvmlDevice = nvml::Device;
using NvmlMemory = nvml::Memory;
using NvmlUtilization = nvml::Utilization;
constexpr NvmlReturn kNvmlSuccess = nvml::kSuccess;
constexpr NvmlReturn kNvmlErrorNotSupported = nvml::kErrorNotSupported;

// NVML's entry points, resolved once when the source opens.
struct NvmlFunctions {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*system_get_driver_version)(char*, unsigned int);
  NvmlReturn (*device_get_count)(unsigned int*);
  NvmlReturn (*device_get_handle_by_index)(unsigned int, NvmlDevice*);
  NvmlReturn (*device_get_name)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*device_get_uuid)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*device_get_memory_info)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*device_get_utilization_rates)(NvmlDevice, NvmlUtilization*);
  NvmlReturn (*device_get_temperature)(NvmlDevice, int, unsigned int*);
  NvmlReturn (*device_get_temperature_threshold)(NvmlDevice, int, unsigned int*);
  NvmlReturn (*device_get_power_usage)(NvmlDevice, unsigned int*);
  NvmlReturn (*device_get_enforced_power_limit)(NvmlDevice, unsigned int*);
};

constexpr const char* kInitName = "nvmlInit_v2";
constexpr const char* kGetCountName = "nvmlDeviceGetCount_v2";
constexpr const char* kGetHandleName = "nvmlDeviceGetHandleByIndex_v2";
constexpr const char* kDriverVersionName = "nvmlSystemGetDriverVersion";

// Fills `functions` from `lookup`; the name of the first missing function, or nullptr.
const char* resolve_functions(const NvmlSymbolLookup& lookup, NvmlFunctions* functions) {
  const char* missing = nullptr;
  auto resolve = [&](auto& pointer, const char* name) {
    void* address = lookup(name);
    if (address == nullptr && missing == nullptr) missing = name;
    pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(address);
  };
  resolve(functions->init, kInitName);
  resolve(functions->shutdown, "nvmlShutdown");
  resolve(functions->error_string, "nvmlErrorString");
  resolve(functions->system_get_driver_version, kDriverVersionName);
  resolve(functions->device_get_count, kGetCountName);
  resolve(functions->device_get_handle_by_index, kGetHandleName);
  resolve(functions->device_get_name, "nvmlDeviceGetName");
  resolve(functions->device_get_uuid, "nvmlDeviceGetUUID");
  resolve(functions->device_get_memory_info, "nvmlDeviceGetMemoryInfo");
  resolve(functions->device_get_utilization_rates, "nvmlDeviceGetUtilizationRates");
  resolve(functions->device_get_temperature, "nvmlDeviceGetTemperature");
  resolve(functions->device_get_temperature_threshold, "nvmlDeviceGetTemperatureThreshold");
  resolve(functions->device_get_power_usage, "nvmlDeviceGetPowerUsage");
  resolve(functions->device_get_enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  return missing;
}

std::string error_text(const NvmlFunctions& functions, NvmlReturn status) {
  const char* text = functions.error_string(status);
  if (text == nullptr || *text == '\0') return "NVML error " + std::to_string(status);
  return text;
}

// A string NVML wrote into a fixed buffer, cut at its terminator (or the buffer's end).
std::string from_buffer(const char* buffer, size_t capacity) {
  return std::string(buffer, strnlen(buffer, capacity));
}

double milliwatts_to_watts(unsigned int milliwatts) { return milliwatts / 1000.0; }

// GPUs read through NVML. Device handles are fetched once when it opens; a handle NVML
// would not give then is asked for again on each read (and its failure reported there).
//
// Thread-safety: any number of threads at once; nothing changes after construction and
// NVML's functions are thread-safe.
class NvmlGpuSource final : public GpuSource {
 public:
  NvmlGpuSource(const NvmlFunctions& functions, std::vector<NvmlDevice> handles)
      : functions_(functions), handles_(std::move(handles)) {}
  NvmlGpuSource(const NvmlGpuSource&) = delete;
  NvmlGpuSource& operator=(const NvmlGpuSource&) = delete;
  ~NvmlGpuSource() override { functions_.shutdown(); }

  std::string driver_version() override {
    char buffer[nvml::kDriverVersionLength] = {};
    if (functions_.system_get_driver_version(buffer, sizeof buffer) != kNvmlSuccess) return {};
    return from_buffer(buffer, sizeof buffer);
  }

  uint32_t device_count() override { return static_cast<uint32_t>(handles_.size()); }

  GpuReading read(uint32_t index) override {
    GpuReading reading;
    reading.index = index;
    std::vector<GpuReadFailure> failures;
    NvmlDevice device = nullptr;
    if (index >= handles_.size()) {
      failures.push_back({kGetHandleName, "no GPU with index " + std::to_string(index) +
                                              " (the driver reports " +
                                              std::to_string(handles_.size()) + ")"});
    } else if (NvmlReturn status = handle(index, &device); status != kNvmlSuccess) {
      failures.push_back({kGetHandleName, error_text(functions_, status)});
    }
    if (!failures.empty()) {
      reading.health = describe_gpu_health(reading, failures);
      return reading;
    }
    // Records a failed read unless NVML only says the GPU does not report that value.
    auto check = [&](GpuQuery query, NvmlReturn status) {
      if (status == kNvmlSuccess) return true;
      if (status != kNvmlErrorNotSupported)
        failures.push_back(
            {std::string(nvml_function_name(query)), error_text(functions_, status)});
      return false;
    };
    char name[nvml::kNameLength] = {};
    if (check(GpuQuery::kName, functions_.device_get_name(device, name, sizeof name)))
      reading.name = from_buffer(name, sizeof name);
    char uuid[nvml::kUuidLength] = {};
    if (check(GpuQuery::kUuid, functions_.device_get_uuid(device, uuid, sizeof uuid)))
      reading.uuid = from_buffer(uuid, sizeof uuid);
    NvmlMemory memory{};
    if (check(GpuQuery::kMemory, functions_.device_get_memory_info(device, &memory))) {
      reading.memory_used_bytes = memory.used;
      reading.memory_total_bytes = memory.total;
    }
    NvmlUtilization utilization{};
    if (check(GpuQuery::kUtilization,
              functions_.device_get_utilization_rates(device, &utilization))) {
      reading.utilization_percent = utilization.gpu;
      reading.memory_utilization_percent = utilization.memory;
    }
    unsigned int value = 0;
    if (check(GpuQuery::kTemperature,
              functions_.device_get_temperature(device, nvml::kTemperatureGpu, &value)))
      reading.temperature_celsius = value;
    if (check(GpuQuery::kSlowdownTemperature,
              functions_.device_get_temperature_threshold(
                  device, nvml::kTemperatureThresholdSlowdown, &value)))
      reading.slowdown_temperature_celsius = value;
    if (check(GpuQuery::kPower, functions_.device_get_power_usage(device, &value)))
      reading.power_watts = milliwatts_to_watts(value);
    if (check(GpuQuery::kPowerLimit, functions_.device_get_enforced_power_limit(device, &value)))
      reading.power_limit_watts = milliwatts_to_watts(value);
    reading.health = describe_gpu_health(reading, failures);
    return reading;
  }

  std::optional<uint64_t> memory_used_bytes(uint32_t index) override {
    NvmlDevice device = nullptr;
    if (index >= handles_.size() || handle(index, &device) != kNvmlSuccess) return std::nullopt;
    NvmlMemory memory{};
    if (functions_.device_get_memory_info(device, &memory) != kNvmlSuccess) return std::nullopt;
    return memory.used;
  }

 private:
  NvmlReturn handle(uint32_t index, NvmlDevice* device) const {
    *device = handles_[index];
    if (*device != nullptr) return kNvmlSuccess;
    return functions_.device_get_handle_by_index(index, device);
  }

  const NvmlFunctions functions_;
  const std::vector<NvmlDevice> handles_;  // nullptr where NVML gave none at open
};

// The process's shared source: NVML opened once, or a test's stand-in.
struct SharedGpuState {
  std::once_flag nvml_opened;
  GpuSource* nvml_source = nullptr;  // never deleted (see shared_gpu_source)
  std::string nvml_unavailable_reason;
  std::mutex override_mutex;
  std::unique_ptr<GpuSource> override_source;  // set_gpu_source_for_tests
  std::atomic<GpuSource*> override_pointer{nullptr};
};

SharedGpuState& shared_state() {
  static SharedGpuState* state = new SharedGpuState();  // outlives every thread's last read
  return *state;
}

void open_shared_nvml(SharedGpuState& state) {
  std::call_once(state.nvml_opened, [&state] {
    state.nvml_source = open_nvml(&state.nvml_unavailable_reason).release();
  });
}

}  // namespace

std::string_view nvml_function_name(GpuQuery query) {
  switch (query) {
    case GpuQuery::kName:
      return "nvmlDeviceGetName";
    case GpuQuery::kUuid:
      return "nvmlDeviceGetUUID";
    case GpuQuery::kMemory:
      return "nvmlDeviceGetMemoryInfo";
    case GpuQuery::kUtilization:
      return "nvmlDeviceGetUtilizationRates";
    case GpuQuery::kTemperature:
      return "nvmlDeviceGetTemperature";
    case GpuQuery::kSlowdownTemperature:
      return "nvmlDeviceGetTemperatureThreshold";
    case GpuQuery::kPower:
      return "nvmlDeviceGetPowerUsage";
    case GpuQuery::kPowerLimit:
      return "nvmlDeviceGetEnforcedPowerLimit";
  }
  return "nvml (unknown query)";
}

void clear_query_fields(GpuQuery query, GpuReading* reading) {
  switch (query) {
    case GpuQuery::kName:
      reading->name.clear();
      break;
    case GpuQuery::kUuid:
      reading->uuid.clear();
      break;
    case GpuQuery::kMemory:
      reading->memory_used_bytes.reset();
      reading->memory_total_bytes.reset();
      break;
    case GpuQuery::kUtilization:
      reading->utilization_percent.reset();
      reading->memory_utilization_percent.reset();
      break;
    case GpuQuery::kTemperature:
      reading->temperature_celsius.reset();
      break;
    case GpuQuery::kSlowdownTemperature:
      reading->slowdown_temperature_celsius.reset();
      break;
    case GpuQuery::kPower:
      reading->power_watts.reset();
      break;
    case GpuQuery::kPowerLimit:
      reading->power_limit_watts.reset();
      break;
  }
}

std::string describe_gpu_health(const GpuReading& reading,
                                const std::vector<GpuReadFailure>& failures) {
  if (!failures.empty()) {
    std::string text = "error: " + failures.front().function + ": " + failures.front().message;
    if (failures.size() == 2) text += " (and 1 other read failed)";
    if (failures.size() > 2)
      text += " (and " + std::to_string(failures.size() - 1) + " other reads failed)";
    return text;
  }
  if (reading.temperature_celsius && reading.slowdown_temperature_celsius) {
    uint32_t temperature = *reading.temperature_celsius;
    uint32_t slowdown = *reading.slowdown_temperature_celsius;
    // temperature >= slowdown - margin, without going below zero.
    if (temperature + kHotMarginCelsius >= slowdown)
      return "hot (" + std::to_string(temperature) + " °C, slows down at " +
             std::to_string(slowdown) + " °C)";
  }
  return "ok";
}

std::unique_ptr<GpuSource> open_nvml_with_symbols(const NvmlSymbolLookup& lookup,
                                                  std::string* why_not) {
  auto fail = [why_not](std::string reason) -> std::unique_ptr<GpuSource> {
    if (why_not != nullptr) *why_not = "no GPU: " + std::move(reason);
    return nullptr;
  };
  NvmlFunctions functions{};
  if (const char* missing = resolve_functions(lookup, &functions))
    return fail(std::string("libnvidia-ml.so.1 has no function ") + missing +
                " (is the NVIDIA driver too old?)");
  if (NvmlReturn status = functions.init(); status != kNvmlSuccess)
    return fail("nvmlInit failed: " + error_text(functions, status));
  unsigned int count = 0;
  if (NvmlReturn status = functions.device_get_count(&count); status != kNvmlSuccess) {
    std::string message = error_text(functions, status);
    functions.shutdown();
    return fail(std::string(kGetCountName) + " failed: " + message);
  }
  if (count == 0) {
    functions.shutdown();
    return fail("the NVIDIA driver reports 0 devices");
  }
  std::vector<NvmlDevice> handles(count, nullptr);
  for (unsigned int index = 0; index < count; ++index) {
    if (functions.device_get_handle_by_index(index, &handles[index]) != kNvmlSuccess)
      handles[index] = nullptr;  // asked again, and reported, when the GPU is read
  }
  if (why_not != nullptr) why_not->clear();
  return std::make_unique<NvmlGpuSource>(functions, std::move(handles));
}

std::unique_ptr<GpuSource> open_nvml(std::string* why_not) {
  // Kept loaded for the life of the process: never dlclose'd.
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    std::string detail = error != nullptr ? error : "";
    if (why_not != nullptr) {
      if (detail.empty() || detail.find("No such file") != std::string::npos)
        *why_not = "no GPU: libnvidia-ml.so.1 not found (no NVIDIA driver)";
      else
        *why_not = "no GPU: cannot load libnvidia-ml.so.1: " + detail;
    }
    return nullptr;
  }
  return open_nvml_with_symbols([library](const char* name) { return dlsym(library, name); },
                                why_not);
}

GpuSource* shared_gpu_source() {
  SharedGpuState& state = shared_state();
  if (GpuSource* replacement = state.override_pointer.load(std::memory_order_acquire))
    return replacement;
  open_shared_nvml(state);
  return state.nvml_source;
}

const std::string& gpu_unavailable_reason() {
  static const std::string kNone;
  SharedGpuState& state = shared_state();
  if (state.override_pointer.load(std::memory_order_acquire) != nullptr) return kNone;
  open_shared_nvml(state);
  return state.nvml_unavailable_reason;
}

void set_gpu_source_for_tests(std::unique_ptr<GpuSource> source) {
  SharedGpuState& state = shared_state();
  std::lock_guard<std::mutex> lock(state.override_mutex);
  state.override_pointer.store(source.get(), std::memory_order_release);
  state.override_source = std::move(source);  // destroys the one it replaces
}

}  // namespace opsight::collect
