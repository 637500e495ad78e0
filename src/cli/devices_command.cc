#include "cli/devices_command.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "cli/output.hpp"
#include "opsight/exit_codes.hpp"

namespace opsight::cli {

namespace {

constexpr const char* kMissing = "-";

// ---- Text -------------------------------------------------------------------------------

// Columns on a terminal: UTF-8 code points ("°" is one column, two bytes).
size_t display_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char byte : text)
    if ((byte & 0xC0) != 0x80) ++width;
  return width;
}

// "812 MiB" below 1 GiB, "79.6 GiB" from there.
std::string human_bytes(uint64_t bytes) {
  constexpr double kMebibyte = 1024.0 * 1024.0;
  constexpr double kGibibyte = kMebibyte * 1024.0;
  const auto value = static_cast<double>(bytes);
  if (value < kGibibyte) return fmt::format("{:.0f} MiB", value / kMebibyte);
  return fmt::format("{:.1f} GiB", value / kGibibyte);
}

template <typename Value, typename Format>
std::string or_missing(const std::optional<Value>& value, Format format) {
  return value ? format(*value) : std::string(kMissing);
}

std::string memory_text(const collect::GpuReading& gpu) {
  if (!gpu.memory_used_bytes && !gpu.memory_total_bytes) return kMissing;
  return or_missing(gpu.memory_used_bytes, human_bytes) + " / " +
         or_missing(gpu.memory_total_bytes, human_bytes);
}

std::string percent_text(const std::optional<uint32_t>& percent) {
  return or_missing(percent, [](uint32_t value) { return fmt::format("{} %", value); });
}

std::string watts_text(const std::optional<double>& watts) {
  return or_missing(watts, [](double value) { return fmt::format("{:.0f} W", value); });
}

std::string power_text(const collect::GpuReading& gpu) {
  if (!gpu.power_watts && !gpu.power_limit_watts) return kMissing;
  return watts_text(gpu.power_watts) + " / " + watts_text(gpu.power_limit_watts);
}

std::string temperature_text(const collect::GpuReading& gpu) {
  return or_missing(gpu.temperature_celsius,
                    [](uint32_t value) { return fmt::format("{} °C", value); });
}

// The reason without its "no GPU: " lead, for "no GPU found: <reason>".
std::string bare_reason(const std::string& reason) {
  constexpr std::string_view kLead = "no GPU: ";
  if (reason.starts_with(kLead)) return reason.substr(kLead.size());
  return reason.empty() ? "no reason given" : reason;
}

// ---- JSON --------------------------------------------------------------------------------

template <typename Value>
nlohmann::ordered_json or_null(const std::optional<Value>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

}  // namespace

DeviceListing list_devices(collect::GpuSource* source, const std::string& no_gpu_reason) {
  DeviceListing listing;
  if (source == nullptr) {
    listing.no_gpu_reason = no_gpu_reason;
    return listing;
  }
  listing.driver_version = source->driver_version();
  uint32_t count = source->device_count();
  for (uint32_t index = 0; index < count; ++index) listing.gpus.push_back(source->read(index));
  if (listing.gpus.empty()) listing.no_gpu_reason = "no GPU: the GPU source lists 0 devices";
  return listing;
}

std::string render_devices_text(const DeviceListing& listing) {
  if (listing.gpus.empty()) return "no GPU found: " + bare_reason(listing.no_gpu_reason) + "\n";
  const std::vector<std::string> header = {"GPU",      "name", "memory used / total", "util",
                                           "mem busy", "temp", "power / limit",       "health"};
  std::vector<std::vector<std::string>> rows = {header};
  for (const collect::GpuReading& gpu : listing.gpus) {
    rows.push_back({std::to_string(gpu.index), gpu.name.empty() ? kMissing : gpu.name,
                    memory_text(gpu), percent_text(gpu.utilization_percent),
                    percent_text(gpu.memory_utilization_percent), temperature_text(gpu),
                    power_text(gpu), gpu.health});
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto& row : rows)
    for (size_t column = 0; column < row.size(); ++column)
      widths[column] = std::max(widths[column], display_width(row[column]));

  std::string text =
      fmt::format("NVIDIA driver {}, {} GPU{}\n\n",
                  listing.driver_version.empty() ? "version unknown" : listing.driver_version,
                  listing.gpus.size(), listing.gpus.size() == 1 ? "" : "s");
  for (const auto& row : rows) {
    std::string line;
    for (size_t column = 0; column < row.size(); ++column) {
      size_t padding = widths[column] - display_width(row[column]);
      if (column == 0) {  // the index, right-aligned
        line += std::string(padding, ' ') + row[column];
      } else if (column + 1 == row.size()) {  // the last column: no trailing blanks
        line += row[column];
      } else {
        line += row[column] + std::string(padding, ' ');
      }
      if (column + 1 != row.size()) line += "  ";
    }
    text += line + "\n";
  }
  return text;
}

std::string render_devices_json(const DeviceListing& listing) {
  nlohmann::ordered_json document;
  document["driver_version"] = text_or_null(listing.driver_version);
  document["gpus"] = nlohmann::ordered_json::array();
  for (const collect::GpuReading& gpu : listing.gpus) {
    nlohmann::ordered_json entry;
    entry["index"] = gpu.index;
    entry["name"] = text_or_null(gpu.name);
    entry["uuid"] = text_or_null(gpu.uuid);
    entry["memory_used_bytes"] = or_null(gpu.memory_used_bytes);
    entry["memory_total_bytes"] = or_null(gpu.memory_total_bytes);
    entry["utilization_percent"] = or_null(gpu.utilization_percent);
    entry["memory_utilization_percent"] = or_null(gpu.memory_utilization_percent);
    entry["temperature_celsius"] = or_null(gpu.temperature_celsius);
    entry["slowdown_temperature_celsius"] = or_null(gpu.slowdown_temperature_celsius);
    entry["power_watts"] = or_null(gpu.power_watts);
    entry["power_limit_watts"] = or_null(gpu.power_limit_watts);
    entry["health"] = gpu.health;
    document["gpus"].push_back(std::move(entry));
  }
  document["no_gpu_reason"] =
      listing.gpus.empty() ? nlohmann::ordered_json(listing.no_gpu_reason) : nullptr;
  return document.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

DevicesCommand::DevicesCommand(CLI::App& app, DevicesSourceOpener open_source)
    : open_source_(std::move(open_source)) {
  command_ = app.add_subcommand(
      "devices",
      "List the GPUs (NVML): name, driver, memory used/total, utilization, temperature, "
      "power and its limit, health");
  command_->add_option("--format", format_, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

std::optional<int> DevicesCommand::run() {
  if (!*command_) return std::nullopt;
  DevicesSource opened = open_source_();
  if (opened.exit_status) return *opened.exit_status;
  collect::GpuSource* source = opened.source.get();
  DeviceListing listing =
      list_devices(source && source->device_count() > 0 ? source : nullptr, opened.no_gpu_reason);
  std::string out = format_ == "json" ? render_devices_json(listing) : render_devices_text(listing);
  return write_stdout(out) ? 0 : kExitError;
}

DevicesSource open_nvml_devices_source() {
  DevicesSource opened;
  opened.source = collect::open_nvml(&opened.no_gpu_reason);
  return opened;
}

}  // namespace opsight::cli
