#include "store/run_json.hpp"

#include <ctime>

namespace opsight::store {
namespace {

nlohmann::ordered_json key_values_json(const KeyValues& rows) {
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const auto& [key, value] : rows) object[key] = value;
  return object;
}

}  // namespace

std::string utc_time_text(int64_t unix_ns) {
  std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

std::string run_label(const RunRecord& run) {
  std::string label = "run " + std::to_string(run.id);
  if (!run.metadata.name.empty()) label += " (" + run.metadata.name + ")";
  return label;
}

nlohmann::ordered_json run_record_json(const RunRecord& run) {
  const RunMetadata& metadata = run.metadata;
  nlohmann::ordered_json object;
  object["id"] = run.id;
  object["uuid"] = run.uuid;
  object["name"] = metadata.name;
  object["created"] = utc_time_text(run.created_unix_ns);
  object["created_unix_ns"] = run.created_unix_ns;
  object["trace_start_unix_ns"] = run.trace_start_unix_ns;
  object["command"] = metadata.command;
  object["working_directory"] = metadata.working_directory;
  object["git_commit"] = metadata.git_commit;
  object["host"] = metadata.host;
  object["cpu"] = metadata.cpu;
  object["gpu"] = metadata.gpu;
  object["versions"] = key_values_json(metadata.versions);
  object["tags"] = key_values_json(metadata.tags);
  object["extra"] = key_values_json(metadata.extra);
  object["slices"] = run.slice_count;
  object["duration_ns"] = run.duration_ns;
  object["source_format"] = run.source_format;
  object["trace_bytes"] = run.trace_bytes;
  object["stored_bytes"] = run.stored_bytes;
  return object;
}

}  // namespace opsight::store
