#include "collect/gpu.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collect/fake_gpu_for_tests.hpp"

namespace opsight::collect {
namespace {

// ---- Health rules ------------------------------------------------------------------------

GpuReading reading_at(std::optional<uint32_t> temperature, std::optional<uint32_t> slowdown) {
  GpuReading reading;
  reading.temperature_celsius = temperature;
  reading.slowdown_temperature_celsius = slowdown;
  return reading;
}

TEST(GpuHealth, OkWhenCoolerThanFiveDegreesBelowSlowdown) {
  EXPECT_EQ(describe_gpu_health(reading_at(45, 90), {}), "ok");
  EXPECT_EQ(describe_gpu_health(reading_at(84, 90), {}), "ok");
}

TEST(GpuHealth, HotFromFiveDegreesBelowSlowdown) {
  EXPECT_EQ(describe_gpu_health(reading_at(85, 90), {}), "hot (85 °C, slows down at 90 °C)");
  EXPECT_EQ(describe_gpu_health(reading_at(87, 90), {}), "hot (87 °C, slows down at 90 °C)");
  EXPECT_EQ(describe_gpu_health(reading_at(96, 90), {}), "hot (96 °C, slows down at 90 °C)");
}

TEST(GpuHealth, LowSlowdownThresholdDoesNotWrapAround) {
  EXPECT_EQ(describe_gpu_health(reading_at(0, 3), {}), "hot (0 °C, slows down at 3 °C)");
}

TEST(GpuHealth, OkWhenATemperatureIsUnknown) {
  EXPECT_EQ(describe_gpu_health(reading_at(99, std::nullopt), {}), "ok");
  EXPECT_EQ(describe_gpu_health(reading_at(std::nullopt, 90), {}), "ok");
  EXPECT_EQ(describe_gpu_health(GpuReading{}, {}), "ok");
}

TEST(GpuHealth, FailureNamesTheFunctionAndNvmlsWords) {
  EXPECT_EQ(describe_gpu_health(GpuReading{}, {{"nvmlDeviceGetMemoryInfo", "GPU is lost"}}),
            "error: nvmlDeviceGetMemoryInfo: GPU is lost");
}

TEST(GpuHealth, FailureWinsOverHotAndCountsTheOthers) {
  std::vector<GpuReadFailure> two = {{"nvmlDeviceGetPowerUsage", "Unknown Error"},
                                     {"nvmlDeviceGetEnforcedPowerLimit", "Unknown Error"}};
  EXPECT_EQ(describe_gpu_health(reading_at(95, 90), two),
            "error: nvmlDeviceGetPowerUsage: Unknown Error (and 1 other read failed)");
  two.push_back({"nvmlDeviceGetTemperature", "Timeout"});
  EXPECT_EQ(describe_gpu_health(GpuReading{}, two),
            "error: nvmlDeviceGetPowerUsage: Unknown Error (and 2 other reads failed)");
}

// ---- FakeGpuSource -----------------------------------------------------------------------

GpuReading full_reading(std::string name) {
  GpuReading reading;
  reading.name = std::move(name);
  reading.uuid = "GPU-00000000-1111-2222-3333-444444444444";
  reading.memory_used_bytes = 3ull << 30;
  reading.memory_total_bytes = 80ull << 30;
  reading.utilization_percent = 40;
  reading.memory_utilization_percent = 15;
  reading.temperature_celsius = 50;
  reading.slowdown_temperature_celsius = 90;
  reading.power_watts = 250.5;
  reading.power_limit_watts = 700;
  return reading;
}

TEST(FakeGpuSource, ReportsWhatWasSetWithComputedHealth) {
  FakeGpuSource source("550.54.15");
  GpuReading hot = full_reading("Hot GPU");
  hot.temperature_celsius = 88;
  hot.health = "ignored";
  EXPECT_EQ(source.add_gpu(full_reading("Cool GPU")), 0u);
  EXPECT_EQ(source.add_gpu(hot), 1u);
  EXPECT_EQ(source.driver_version(), "550.54.15");
  EXPECT_EQ(source.device_count(), 2u);
  GpuReading first = source.read(0);
  EXPECT_EQ(first.index, 0u);
  EXPECT_EQ(first.name, "Cool GPU");
  EXPECT_EQ(first.health, "ok");
  GpuReading second = source.read(1);
  EXPECT_EQ(second.index, 1u);
  EXPECT_EQ(second.health, "hot (88 °C, slows down at 90 °C)");
  EXPECT_EQ(source.memory_used_bytes(1), 3ull << 30);
  source.set_memory_used_bytes(1, 5ull << 30);
  EXPECT_EQ(source.memory_used_bytes(1), 5ull << 30);
  EXPECT_EQ(source.read_calls(), 2u);
  EXPECT_EQ(source.memory_used_calls(), 2u);
}

TEST(FakeGpuSource, FailedQueryEmptiesItsFieldsAndBecomesHealthError) {
  FakeGpuSource source;
  source.add_gpu(full_reading("GPU"));
  source.fail_query(0, GpuQuery::kMemory, "GPU is lost");
  GpuReading reading = source.read(0);
  EXPECT_EQ(reading.health, "error: nvmlDeviceGetMemoryInfo: GPU is lost");
  EXPECT_FALSE(reading.memory_used_bytes);
  EXPECT_FALSE(reading.memory_total_bytes);
  EXPECT_EQ(reading.utilization_percent, 40u);  // the other reads still count
  EXPECT_EQ(reading.power_watts, 250.5);
  EXPECT_FALSE(source.memory_used_bytes(0));

  source.clear_failures(0);
  EXPECT_EQ(source.read(0).health, "ok");
  EXPECT_EQ(source.memory_used_bytes(0), 3ull << 30);
}

TEST(FakeGpuSource, LostGpuFailsEveryRead) {
  FakeGpuSource source;
  source.add_gpu(full_reading("GPU"));
  source.fail_every_query(0, "GPU is lost");
  GpuReading reading = source.read(0);
  EXPECT_EQ(reading.health, "error: nvmlDeviceGetName: GPU is lost (and 7 other reads failed)");
  EXPECT_EQ(reading.name, "");
  EXPECT_FALSE(reading.temperature_celsius);
  EXPECT_FALSE(reading.power_limit_watts);
}

TEST(FakeGpuSource, UnsupportedValueIsJustEmpty) {
  FakeGpuSource source;
  GpuReading reading = full_reading("GPU");
  reading.power_watts.reset();
  reading.slowdown_temperature_celsius.reset();
  source.add_gpu(reading);
  EXPECT_EQ(source.read(0).health, "ok");
  EXPECT_FALSE(source.read(0).power_watts);
}

TEST(FakeGpuSource, IndexOutOfRangeIsAHealthErrorNotACrash) {
  FakeGpuSource source;
  source.add_gpu(full_reading("GPU"));
  GpuReading reading = source.read(3);
  EXPECT_EQ(reading.index, 3u);
  EXPECT_EQ(reading.health,
            "error: nvmlDeviceGetHandleByIndex_v2: no GPU with index 3 (the fake has 1)");
  EXPECT_FALSE(source.memory_used_bytes(3));
}

// ---- The NVML source, on stand-ins for NVML's functions ----------------------------------
// These run the code that talks to NVML (symbol lookup, initialization, unit conversion,
// error handling) on machines without a driver. The stand-ins follow NVML's API reference.

struct StubGpu {
  std::string name = "Stub H100", uuid = "GPU-5a1b0000-0000-0000-0000-000000000000";
  nvml::Memory memory{80ull << 30, 70ull << 30, 10ull << 30};
  nvml::Utilization utilization{35, 12};
  unsigned int temperature = 45, slowdown = 90;
  unsigned int power_milliwatts = 123456, limit_milliwatts = 700000;
  std::map<std::string, nvml::Return> failures;  // NVML function -> its status
  bool handle_fails = false;
};

struct StubNvml {
  nvml::Return init_status = nvml::kSuccess;
  std::vector<StubGpu> gpus;
  std::set<std::string> missing_functions;
  int init_calls = 0, shutdown_calls = 0, handle_calls = 0;
};

StubNvml* stub = nullptr;  // the state the stand-ins use; set by each test

StubGpu& stub_gpu(nvml::Device device) { return *reinterpret_cast<StubGpu*>(device); }
nvml::Return stub_status(nvml::Device device, const char* function) {
  auto found = stub_gpu(device).failures.find(function);
  return found == stub_gpu(device).failures.end() ? nvml::kSuccess : found->second;
}
nvml::Return copy_string(const std::string& text, char* buffer, unsigned int length) {
  if (text.size() + 1 > length) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return nvml::kSuccess;
}

nvml::Return stub_init() {
  ++stub->init_calls;
  return stub->init_status;
}
nvml::Return stub_shutdown() {
  ++stub->shutdown_calls;
  return nvml::kSuccess;
}
const char* stub_error_string(nvml::Return status) {
  switch (status) {
    case nvml::kErrorNotSupported:
      return "Not Supported";
    case 9:
      return "Driver Not Loaded";
    case nvml::kErrorGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}
nvml::Return stub_driver_version(char* buffer, unsigned int length) {
  return copy_string("550.54.15", buffer, length);
}
nvml::Return stub_count(unsigned int* count) {
  *count = static_cast<unsigned int>(stub->gpus.size());
  return nvml::kSuccess;
}
nvml::Return stub_handle(unsigned int index, nvml::Device* device) {
  ++stub->handle_calls;
  if (index >= stub->gpus.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  if (stub->gpus[index].handle_fails) return nvml::kErrorGpuIsLost;
  *device = reinterpret_cast<nvml::Device>(&stub->gpus[index]);
  return nvml::kSuccess;
}
nvml::Return stub_name(nvml::Device device, char* buffer, unsigned int length) {
  if (auto status = stub_status(device, "nvmlDeviceGetName")) return status;
  return copy_string(stub_gpu(device).name, buffer, length);
}
nvml::Return stub_uuid(nvml::Device device, char* buffer, unsigned int length) {
  if (auto status = stub_status(device, "nvmlDeviceGetUUID")) return status;
  return copy_string(stub_gpu(device).uuid, buffer, length);
}
nvml::Return stub_memory(nvml::Device device, nvml::Memory* memory) {
  if (auto status = stub_status(device, "nvmlDeviceGetMemoryInfo")) return status;
  *memory = stub_gpu(device).memory;
  return nvml::kSuccess;
}
nvml::Return stub_utilization(nvml::Device device, nvml::Utilization* utilization) {
  if (auto status = stub_status(device, "nvmlDeviceGetUtilizationRates")) return status;
  *utilization = stub_gpu(device).utilization;
  return nvml::kSuccess;
}
nvml::Return stub_temperature(nvml::Device device, int sensor, unsigned int* value) {
  if (sensor != nvml::kTemperatureGpu) return 2;
  if (auto status = stub_status(device, "nvmlDeviceGetTemperature")) return status;
  *value = stub_gpu(device).temperature;
  return nvml::kSuccess;
}
nvml::Return stub_threshold(nvml::Device device, int threshold, unsigned int* value) {
  if (threshold != nvml::kTemperatureThresholdSlowdown) return 2;
  if (auto status = stub_status(device, "nvmlDeviceGetTemperatureThreshold")) return status;
  *value = stub_gpu(device).slowdown;
  return nvml::kSuccess;
}
nvml::Return stub_power(nvml::Device device, unsigned int* milliwatts) {
  if (auto status = stub_status(device, "nvmlDeviceGetPowerUsage")) return status;
  *milliwatts = stub_gpu(device).power_milliwatts;
  return nvml::kSuccess;
}
nvml::Return stub_power_limit(nvml::Device device, unsigned int* milliwatts) {
  if (auto status = stub_status(device, "nvmlDeviceGetEnforcedPowerLimit")) return status;
  *milliwatts = stub_gpu(device).limit_milliwatts;
  return nvml::kSuccess;
}

void* stub_lookup(const char* name) {
  static const std::map<std::string, void*> kFunctions = {
      {"nvmlInit_v2", reinterpret_cast<void*>(&stub_init)},
      {"nvmlShutdown", reinterpret_cast<void*>(&stub_shutdown)},
      {"nvmlErrorString", reinterpret_cast<void*>(&stub_error_string)},
      {"nvmlSystemGetDriverVersion", reinterpret_cast<void*>(&stub_driver_version)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<void*>(&stub_count)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void*>(&stub_handle)},
      {"nvmlDeviceGetName", reinterpret_cast<void*>(&stub_name)},
      {"nvmlDeviceGetUUID", reinterpret_cast<void*>(&stub_uuid)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void*>(&stub_memory)},
      {"nvmlDeviceGetUtilizationRates", reinterpret_cast<void*>(&stub_utilization)},
      {"nvmlDeviceGetTemperature", reinterpret_cast<void*>(&stub_temperature)},
      {"nvmlDeviceGetTemperatureThreshold", reinterpret_cast<void*>(&stub_threshold)},
      {"nvmlDeviceGetPowerUsage", reinterpret_cast<void*>(&stub_power)},
      {"nvmlDeviceGetEnforcedPowerLimit", reinterpret_cast<void*>(&stub_power_limit)},
  };
  if (stub->missing_functions.count(name) != 0) return nullptr;
  auto found = kFunctions.find(name);
  return found == kFunctions.end() ? nullptr : found->second;
}

class NvmlSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { stub = &state_; }
  void TearDown() override { stub = nullptr; }
  std::unique_ptr<GpuSource> open(std::string* why_not) {
    return open_nvml_with_symbols(stub_lookup, why_not);
  }
  StubNvml state_;
};

TEST_F(NvmlSourceTest, ReadsEveryValueInOpsightsUnits) {
  state_.gpus.resize(2);
  state_.gpus[1].memory.used = 1234567;
  std::string why_not = "stale";
  {
    auto source = open(&why_not);
    ASSERT_NE(source, nullptr) << why_not;
    EXPECT_EQ(why_not, "");
    EXPECT_EQ(state_.init_calls, 1);
    EXPECT_EQ(source->driver_version(), "550.54.15");
    EXPECT_EQ(source->device_count(), 2u);
    GpuReading reading = source->read(0);
    EXPECT_EQ(reading.index, 0u);
    EXPECT_EQ(reading.name, "Stub H100");
    EXPECT_EQ(reading.uuid, "GPU-5a1b0000-0000-0000-0000-000000000000");
    EXPECT_EQ(reading.memory_used_bytes, 10ull << 30);
    EXPECT_EQ(reading.memory_total_bytes, 80ull << 30);
    EXPECT_EQ(reading.utilization_percent, 35u);
    EXPECT_EQ(reading.memory_utilization_percent, 12u);
    EXPECT_EQ(reading.temperature_celsius, 45u);
    EXPECT_EQ(reading.slowdown_temperature_celsius, 90u);
    ASSERT_TRUE(reading.power_watts);
    EXPECT_DOUBLE_EQ(*reading.power_watts, 123.456);
    EXPECT_EQ(reading.power_limit_watts, 700.0);
    EXPECT_EQ(reading.health, "ok");
    EXPECT_EQ(source->read(1).index, 1u);
    EXPECT_EQ(source->memory_used_bytes(1), 1234567u);
    EXPECT_EQ(state_.handle_calls, 2);  // once per GPU, at open
    EXPECT_EQ(state_.shutdown_calls, 0);
  }
  EXPECT_EQ(state_.shutdown_calls, 1);  // the source balances its nvmlInit
}

TEST_F(NvmlSourceTest, NotSupportedLeavesTheValueEmptyAndHealthOk) {
  state_.gpus.resize(1);
  state_.gpus[0].failures["nvmlDeviceGetPowerUsage"] = nvml::kErrorNotSupported;
  state_.gpus[0].failures["nvmlDeviceGetTemperatureThreshold"] = nvml::kErrorNotSupported;
  std::string why_not;
  auto source = open(&why_not);
  ASSERT_NE(source, nullptr) << why_not;
  GpuReading reading = source->read(0);
  EXPECT_FALSE(reading.power_watts);
  EXPECT_FALSE(reading.slowdown_temperature_celsius);
  EXPECT_EQ(reading.power_limit_watts, 700.0);
  EXPECT_EQ(reading.health, "ok");
}

TEST_F(NvmlSourceTest, FailedReadBecomesHealthError) {
  state_.gpus.resize(1);
  state_.gpus[0].failures["nvmlDeviceGetMemoryInfo"] = nvml::kErrorGpuIsLost;
  std::string why_not;
  auto source = open(&why_not);
  ASSERT_NE(source, nullptr) << why_not;
  GpuReading reading = source->read(0);
  EXPECT_EQ(reading.health, "error: nvmlDeviceGetMemoryInfo: GPU is lost");
  EXPECT_FALSE(reading.memory_used_bytes);
  EXPECT_FALSE(reading.memory_total_bytes);
  EXPECT_EQ(reading.temperature_celsius, 45u);
  EXPECT_FALSE(source->memory_used_bytes(0));
}

TEST_F(NvmlSourceTest, HotGpu) {
  state_.gpus.resize(1);
  state_.gpus[0].temperature = 87;
  std::string why_not;
  auto source = open(&why_not);
  ASSERT_NE(source, nullptr) << why_not;
  EXPECT_EQ(source->read(0).health, "hot (87 °C, slows down at 90 °C)");
}

TEST_F(NvmlSourceTest, GpuWithoutAHandleIsAskedAgainAndReportedOnRead) {
  state_.gpus.resize(2);
  state_.gpus[1].handle_fails = true;
  std::string why_not;
  auto source = open(&why_not);
  ASSERT_NE(source, nullptr) << why_not;
  EXPECT_EQ(source->device_count(), 2u);
  EXPECT_EQ(source->read(0).health, "ok");
  GpuReading lost = source->read(1);
  EXPECT_EQ(lost.health, "error: nvmlDeviceGetHandleByIndex_v2: GPU is lost");
  EXPECT_EQ(lost.name, "");
  EXPECT_FALSE(source->memory_used_bytes(1));
  state_.gpus[1].handle_fails = false;  // the GPU came back
  EXPECT_EQ(source->read(1).health, "ok");
}

TEST_F(NvmlSourceTest, IndexOutOfRange) {
  state_.gpus.resize(1);
  std::string why_not;
  auto source = open(&why_not);
  ASSERT_NE(source, nullptr) << why_not;
  EXPECT_EQ(source->read(5).health,
            "error: nvmlDeviceGetHandleByIndex_v2: no GPU with index 5 (the driver reports 1)");
  EXPECT_FALSE(source->memory_used_bytes(5));
}

TEST_F(NvmlSourceTest, InitFailureSaysWhy) {
  state_.gpus.resize(1);
  state_.init_status = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  std::string why_not;
  EXPECT_EQ(open(&why_not), nullptr);
  EXPECT_EQ(why_not, "no GPU: nvmlInit failed: Driver Not Loaded");
}

TEST_F(NvmlSourceTest, NoDevicesSaysSoAndShutsNvmlDown) {
  std::string why_not;
  EXPECT_EQ(open(&why_not), nullptr);
  EXPECT_EQ(why_not, "no GPU: the NVIDIA driver reports 0 devices");
  EXPECT_EQ(state_.init_calls, 1);
  EXPECT_EQ(state_.shutdown_calls, 1);
}

TEST_F(NvmlSourceTest, MissingFunctionIsNamedAndNvmlIsNotStarted) {
  state_.gpus.resize(1);
  state_.missing_functions.insert("nvmlDeviceGetPowerUsage");
  std::string why_not;
  EXPECT_EQ(open(&why_not), nullptr);
  EXPECT_EQ(why_not,
            "no GPU: libnvidia-ml.so.1 has no function nvmlDeviceGetPowerUsage (is the NVIDIA "
            "driver too old?)");
  EXPECT_EQ(state_.init_calls, 0);
}

TEST_F(NvmlSourceTest, NullReasonPointerIsAllowed) {
  EXPECT_EQ(open(nullptr), nullptr);
  state_.gpus.resize(1);
  EXPECT_NE(open(nullptr), nullptr);
}

// ---- The real NVML on this machine ---------------------------------------------------------

TEST(OpenNvml, OnThisMachineGivesGpusOrSaysWhyNot) {
  std::string why_not;
  std::unique_ptr<GpuSource> source = open_nvml(&why_not);
  if (source == nullptr) {
    std::printf("[   NVML   ] no NVIDIA driver branch: open_nvml said \"%s\"\n", why_not.c_str());
    EXPECT_TRUE(why_not.starts_with("no GPU")) << why_not;
    std::string again;
    EXPECT_EQ(open_nvml(&again), nullptr);  // asking twice is harmless
    EXPECT_EQ(again, why_not);
    return;
  }
  std::printf("[   NVML   ] NVIDIA driver branch: driver %s, %u GPU(s)\n",
              source->driver_version().c_str(), source->device_count());
  EXPECT_EQ(why_not, "");
  EXPECT_FALSE(source->driver_version().empty());
  ASSERT_GT(source->device_count(), 0u);
  for (uint32_t index = 0; index < source->device_count(); ++index) {
    GpuReading reading = source->read(index);
    std::printf("[   NVML   ] GPU %u: %s, health %s\n", index, reading.name.c_str(),
                reading.health.c_str());
    EXPECT_EQ(reading.index, index);
    EXPECT_FALSE(reading.name.empty());
    EXPECT_FALSE(reading.health.starts_with("error")) << reading.health;
    ASSERT_TRUE(reading.memory_total_bytes);
    EXPECT_GT(*reading.memory_total_bytes, 0u);
    EXPECT_TRUE(source->memory_used_bytes(index));
  }
}

// ---- The shared source ---------------------------------------------------------------------

TEST(SharedGpuSource, TestSourceReplacesNvmlUntilReset) {
  auto fake = std::make_unique<FakeGpuSource>();
  fake->add_gpu(full_reading("Shared fake"));
  FakeGpuSource* fake_pointer = fake.get();
  set_gpu_source_for_tests(std::move(fake));
  EXPECT_EQ(shared_gpu_source(), fake_pointer);
  EXPECT_EQ(gpu_unavailable_reason(), "");
  EXPECT_EQ(shared_gpu_source()->read(0).name, "Shared fake");

  set_gpu_source_for_tests(nullptr);  // back to NVML
  GpuSource* nvml_source = shared_gpu_source();
  std::string why_not;
  bool machine_has_gpu = open_nvml(&why_not) != nullptr;
  if (machine_has_gpu) {
    std::printf("[   NVML   ] shared source: NVIDIA driver branch\n");
    ASSERT_NE(nvml_source, nullptr);
    EXPECT_EQ(gpu_unavailable_reason(), "");
    EXPECT_GT(nvml_source->device_count(), 0u);
  } else {
    std::printf("[   NVML   ] shared source: no NVIDIA driver branch (%s)\n",
                gpu_unavailable_reason().c_str());
    EXPECT_EQ(nvml_source, nullptr);
    EXPECT_EQ(gpu_unavailable_reason(), why_not);
  }
  EXPECT_EQ(shared_gpu_source(), nvml_source);  // opened once
}

TEST(SharedGpuSource, FirstUseFromManyThreadsOpensOnce) {
  std::vector<GpuSource*> seen(8, reinterpret_cast<GpuSource*>(1));
  std::vector<std::thread> threads;
  for (size_t index = 0; index < seen.size(); ++index)
    threads.emplace_back([&seen, index] { seen[index] = shared_gpu_source(); });
  for (std::thread& thread : threads) thread.join();
  for (GpuSource* source : seen) EXPECT_EQ(source, seen.front());
}

}  // namespace
}  // namespace opsight::collect
