// The OPSIGHT_FAKE_GPUS test hook of `opsight devices`, linked only into the test build of
// the command (opsight_with_fake_gpus, never the installed `opsight`): the GPUs come from
// a JSON file instead of NVML, so that the command's output is tested end to end on
// machines without a GPU.
#include "cli/fake_gpus_for_tests.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "cli/output.hpp"
#include "collect/fake_gpu_for_tests.hpp"
#include "opsight/exit_codes.hpp"

namespace opsight::cli {

namespace {

// Reads the optional unsigned integer `key` of `object` (null or absent: empty). Throws
// std::runtime_error naming `where`.key when it is something else.
template <typename Unsigned>
std::optional<Unsigned> optional_unsigned(const nlohmann::json& object, const char* key,
                                          const std::string& where) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return std::nullopt;
  if (!found->is_number_unsigned() || found->get<uint64_t>() > std::numeric_limits<Unsigned>::max())
    throw std::runtime_error(fmt::format("{}.{}: expected a non-negative integer up to {}, got {}",
                                         where, key, std::numeric_limits<Unsigned>::max(),
                                         found->dump()));
  return found->get<Unsigned>();
}

std::optional<double> optional_number(const nlohmann::json& object, const char* key,
                                      const std::string& where) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return std::nullopt;
  if (!found->is_number())
    throw std::runtime_error(
        fmt::format("{}.{}: expected a number, got {}", where, key, found->dump()));
  return found->get<double>();
}

std::string optional_string(const nlohmann::json& object, const char* key,
                            const std::string& where) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return {};
  if (!found->is_string())
    throw std::runtime_error(
        fmt::format("{}.{}: expected a string, got {}", where, key, found->dump()));
  return found->get<std::string>();
}

std::optional<collect::GpuQuery> query_named(const std::string& function) {
  for (collect::GpuQuery query : collect::kAllGpuQueries)
    if (collect::nvml_function_name(query) == function) return query;
  return std::nullopt;
}

std::string known_functions() {
  std::string names;
  for (collect::GpuQuery query : collect::kAllGpuQueries) {
    if (!names.empty()) names += ", ";
    names += collect::nvml_function_name(query);
  }
  return names;
}

std::unique_ptr<collect::GpuSource> parse_fake_gpus_or_throw(const std::string& json_text) {
  nlohmann::json document = nlohmann::json::parse(json_text);
  if (!document.is_object()) throw std::runtime_error("expected a JSON object at the top");
  auto fake = std::make_unique<collect::FakeGpuSource>(
      optional_string(document, "driver_version", "(top)"));
  auto gpus = document.find("gpus");
  if (gpus == document.end() || !gpus->is_array())
    throw std::runtime_error("expected \"gpus\": [...], a list of GPUs");
  for (size_t position = 0; position < gpus->size(); ++position) {
    const nlohmann::json& gpu = (*gpus)[position];
    std::string where = fmt::format("gpus[{}]", position);
    if (!gpu.is_object()) throw std::runtime_error(where + ": expected an object");
    collect::GpuReading reading;
    reading.name = optional_string(gpu, "name", where);
    reading.uuid = optional_string(gpu, "uuid", where);
    reading.memory_used_bytes = optional_unsigned<uint64_t>(gpu, "memory_used_bytes", where);
    reading.memory_total_bytes = optional_unsigned<uint64_t>(gpu, "memory_total_bytes", where);
    reading.utilization_percent = optional_unsigned<uint32_t>(gpu, "utilization_percent", where);
    reading.memory_utilization_percent =
        optional_unsigned<uint32_t>(gpu, "memory_utilization_percent", where);
    reading.temperature_celsius = optional_unsigned<uint32_t>(gpu, "temperature_celsius", where);
    reading.slowdown_temperature_celsius =
        optional_unsigned<uint32_t>(gpu, "slowdown_temperature_celsius", where);
    reading.power_watts = optional_number(gpu, "power_watts", where);
    reading.power_limit_watts = optional_number(gpu, "power_limit_watts", where);
    uint32_t index = fake->add_gpu(std::move(reading));
    auto failed = gpu.find("failed_reads");
    if (failed == gpu.end() || failed->is_null()) continue;
    if (!failed->is_object())
      throw std::runtime_error(where +
                               ".failed_reads: expected {\"<NVML function>\": \"<error>\", ...}");
    for (const auto& [function, message] : failed->items()) {
      auto query = query_named(function);
      if (!query)
        throw std::runtime_error(
            fmt::format("{}.failed_reads: unknown NVML function \"{}\" "
                        "(known: {})",
                        where, function, known_functions()));
      if (!message.is_string())
        throw std::runtime_error(
            fmt::format("{}.failed_reads.{}: expected NVML's error text", where, function));
      fake->fail_query(index, *query, message.get<std::string>());
    }
  }
  return fake;
}

std::optional<std::string> read_file(const std::string& path, std::string* error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) {
    *error = "read failed";
    return std::nullopt;
  }
  return text.str();
}

}  // namespace

std::unique_ptr<collect::GpuSource> parse_fake_gpus(const std::string& json_text,
                                                    std::string* error) {
  try {
    return parse_fake_gpus_or_throw(json_text);
  } catch (const std::exception& failure) {
    *error = failure.what();
    return nullptr;
  }
}

DevicesSource open_fake_gpus_or_nvml() {
  const char* fake_path = std::getenv(kFakeGpusVariable);
  if (fake_path == nullptr || *fake_path == '\0') return open_nvml_devices_source();
  DevicesSource opened;
  std::string error;
  auto text = read_file(fake_path, &error);
  if (!text) {
    print_error(fmt::format("{}={}: cannot read: {}", kFakeGpusVariable, fake_path, error));
    opened.exit_status = kExitError;
    return opened;
  }
  opened.source = parse_fake_gpus(*text, &error);
  if (!opened.source) {
    print_error(fmt::format("{}={}: {}", kFakeGpusVariable, fake_path, error));
    opened.exit_status = kExitError;
    return opened;
  }
  std::fprintf(stderr, "opsight: devices: fake GPUs from %s=%s (a test hook), not NVML\n",
               kFakeGpusVariable, fake_path);
  if (opened.source->device_count() == 0)
    opened.no_gpu_reason = fmt::format("no GPU: {}={} lists 0 GPUs", kFakeGpusVariable, fake_path);
  return opened;
}

DevicesSourceOpener devices_source_of_this_build() { return open_fake_gpus_or_nvml; }

}  // namespace opsight::cli
