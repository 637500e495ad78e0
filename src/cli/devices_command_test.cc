// `opsight devices` rendering on fake GPUs, without a GPU and without the command line:
// the fake source (directly and from an OPSIGHT_FAKE_GPUS file's JSON) through
// list_devices and the text and JSON renderers.
#include "cli/devices_command.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/fake_gpus_for_tests.hpp"
#include "collect/fake_gpu_for_tests.hpp"

namespace opsight::cli {
namespace {

collect::GpuReading h100() {
  collect::GpuReading gpu;
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.uuid = "GPU-11111111-2222-3333-4444-555555555555";
  gpu.memory_used_bytes = 1288490188;    // 1.2 GiB
  gpu.memory_total_bytes = 85520809984;  // 79.6 GiB
  gpu.utilization_percent = 35;
  gpu.memory_utilization_percent = 12;
  gpu.temperature_celsius = 87;  // within 5 °C of slowing down: hot
  gpu.slowdown_temperature_celsius = 90;
  gpu.power_watts = 312.5;
  gpu.power_limit_watts = 700;
  return gpu;
}

collect::GpuReading a10() {
  collect::GpuReading gpu;
  gpu.name = "NVIDIA A10";
  gpu.uuid = "GPU-66666666-7777-8888-9999-000000000000";
  gpu.memory_used_bytes = 524288000;     // 500 MiB
  gpu.memory_total_bytes = 24146608128;  // 22.5 GiB
  gpu.utilization_percent = 0;
  gpu.memory_utilization_percent = 0;
  gpu.temperature_celsius = 41;
  gpu.slowdown_temperature_celsius = 95;
  gpu.power_watts = 22.1;  // its read fails below: not reported
  gpu.power_limit_watts = 150;
  return gpu;
}

// One hot GPU and one whose power read failed, as the integration test's file describes.
std::unique_ptr<collect::FakeGpuSource> two_fake_gpus() {
  auto source = std::make_unique<collect::FakeGpuSource>("550.54.15");
  source->add_gpu(h100());
  uint32_t a10_index = source->add_gpu(a10());
  source->fail_query(a10_index, collect::GpuQuery::kPower, "Unknown Error");
  return source;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

TEST(DevicesCommand, TextTableOfFakeGpus) {
  auto source = two_fake_gpus();
  std::string text = render_devices_text(list_devices(source.get(), ""));
  EXPECT_EQ(lines_of(text),
            (std::vector<std::string>{
                "NVIDIA driver 550.54.15, 2 GPUs",
                "",
                "GPU  name                   memory used / total  util  mem busy  temp   power / "
                "limit  health",
                "  0  NVIDIA H100 80GB HBM3  1.2 GiB / 79.6 GiB   35 %  12 %      87 °C  312 W / "
                "700 W  hot (87 °C, slows down at 90 °C)",
                "  1  NVIDIA A10             500 MiB / 22.5 GiB   0 %   0 %       41 °C  - / 150 "
                "W      error: nvmlDeviceGetPowerUsage: Unknown Error",
            }));
}

TEST(DevicesCommand, JsonOfFakeGpus) {
  auto source = two_fake_gpus();
  nlohmann::ordered_json document =
      nlohmann::ordered_json::parse(render_devices_json(list_devices(source.get(), "")));
  EXPECT_EQ(document["driver_version"], "550.54.15");
  EXPECT_TRUE(document["no_gpu_reason"].is_null());
  ASSERT_EQ(document["gpus"].size(), 2u);
  std::vector<std::string> keys;
  for (const auto& [key, value] : document["gpus"][0].items()) keys.push_back(key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{
                "index", "name", "uuid", "memory_used_bytes", "memory_total_bytes",
                "utilization_percent", "memory_utilization_percent", "temperature_celsius",
                "slowdown_temperature_celsius", "power_watts", "power_limit_watts", "health"}));
  const auto& hot = document["gpus"][0];
  EXPECT_EQ(hot["index"], 0);
  EXPECT_EQ(hot["memory_used_bytes"], 1288490188u);
  EXPECT_EQ(hot["power_watts"], 312.5);
  EXPECT_EQ(hot["health"], "hot (87 °C, slows down at 90 °C)");
  const auto& failed = document["gpus"][1];
  EXPECT_EQ(failed["index"], 1);
  EXPECT_TRUE(failed["power_watts"].is_null());
  EXPECT_EQ(failed["power_limit_watts"], 150);
  EXPECT_EQ(failed["health"], "error: nvmlDeviceGetPowerUsage: Unknown Error");
}

TEST(DevicesCommand, MissingValuesPrintAsDashAndNull) {
  std::string error;
  std::unique_ptr<collect::GpuSource> source = parse_fake_gpus(
      R"({"driver_version": "550.54.15", "gpus": [{"name": "Sparse GPU", "temperature_celsius": 30}]})",
      &error);
  ASSERT_TRUE(source) << error;
  DeviceListing listing = list_devices(source.get(), "");
  std::vector<std::string> lines = lines_of(render_devices_text(listing));
  ASSERT_EQ(lines.size(), 4u);
  std::istringstream row(lines[3]);
  std::vector<std::string> cells;
  for (std::string cell; row >> cell;) cells.push_back(cell);
  EXPECT_EQ(cells,
            (std::vector<std::string>{"0", "Sparse", "GPU", "-", "-", "-", "30", "°C", "-", "ok"}));
  auto gpu = nlohmann::json::parse(render_devices_json(listing))["gpus"][0];
  EXPECT_TRUE(gpu["memory_used_bytes"].is_null());
  EXPECT_TRUE(gpu["power_limit_watts"].is_null());
  EXPECT_TRUE(gpu["uuid"].is_null());
  EXPECT_EQ(gpu["health"], "ok");
}

TEST(DevicesCommand, AFakeGpuFileFromTheJsonOutputsFieldsWithFailedReads) {
  std::string error;
  std::unique_ptr<collect::GpuSource> source = parse_fake_gpus(
      R"({"driver_version": "550.54.15", "gpus": [{"name": "NVIDIA A10",
          "power_watts": 22.1, "power_limit_watts": 150,
          "failed_reads": {"nvmlDeviceGetPowerUsage": "Unknown Error"}}]})",
      &error);
  ASSERT_TRUE(source) << error;
  DeviceListing listing = list_devices(source.get(), "");
  ASSERT_EQ(listing.gpus.size(), 1u);
  EXPECT_EQ(listing.driver_version, "550.54.15");
  EXPECT_FALSE(listing.gpus[0].power_watts);
  EXPECT_EQ(listing.gpus[0].health, "error: nvmlDeviceGetPowerUsage: Unknown Error");
}

TEST(DevicesCommand, ABadFakeGpuFileNamesTheField) {
  std::string error;
  EXPECT_FALSE(parse_fake_gpus(R"({"gpus": [{"temperature_celsius": -3}]})", &error));
  EXPECT_NE(error.find("gpus[0].temperature_celsius"), std::string::npos) << error;
  EXPECT_FALSE(parse_fake_gpus(R"({"gpus": [{"failed_reads": {"nvmlNoSuch": "x"}}]})", &error));
  EXPECT_NE(error.find("unknown NVML function \"nvmlNoSuch\""), std::string::npos) << error;
  EXPECT_FALSE(parse_fake_gpus("[]", &error));
}

TEST(DevicesCommand, NoGpuSaysWhy) {
  DeviceListing listing =
      list_devices(nullptr, "no GPU: libnvidia-ml.so.1 not found (no NVIDIA driver)");
  EXPECT_EQ(render_devices_text(listing),
            "no GPU found: libnvidia-ml.so.1 not found (no NVIDIA driver)\n");
  auto document = nlohmann::json::parse(render_devices_json(listing));
  EXPECT_TRUE(document["gpus"].empty());
  EXPECT_EQ(document["no_gpu_reason"], "no GPU: libnvidia-ml.so.1 not found (no NVIDIA driver)");
}

}  // namespace
}  // namespace opsight::cli
