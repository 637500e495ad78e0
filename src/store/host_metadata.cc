// collect_host_metadata and git_commit_of (run_store.hpp): what a stored run says about
// the machine and the source tree it ran on, read from /proc and .git without running
// other programs.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "store/run_store.hpp"

namespace opsight::store {

namespace {

std::string trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

std::optional<std::string> read_small_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

// The value after the first "key<tabs/spaces>:" line of a /proc-style file.
std::string field_of(std::string_view text, std::string_view key) {
  size_t position = 0;
  while (position < text.size()) {
    size_t end = text.find('\n', position);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(position, end - position);
    size_t colon = line.find(':');
    if (colon != std::string_view::npos && trim(line.substr(0, colon)) == key)
      return trim(line.substr(colon + 1));
    position = end + 1;
  }
  return {};
}

bool is_commit_hash(std::string_view text) {
  return (text.size() == 40 || text.size() == 64) &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string cpu_description() {
  std::string model;
  if (auto cpuinfo = read_small_file("/proc/cpuinfo")) {
    model = field_of(*cpuinfo, "model name");
    if (model.empty()) model = field_of(*cpuinfo, "Model");  // some ARM kernels
  }
  if (model.empty()) {
    struct utsname names {};
    if (::uname(&names) == 0) model = names.machine;
  }
  long count = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (count > 0)
    model += (model.empty() ? "" : ", ") + std::to_string(count) + " logical CPU" +
             (count == 1 ? "" : "s");
  return model;
}

std::string gpu_description() {
  std::error_code error;
  std::map<std::string, int> models;
  std::filesystem::directory_iterator gpus("/proc/driver/nvidia/gpus", error);
  if (!error) {
    for (const auto& gpu : gpus) {
      auto information = read_small_file(gpu.path() / "information");
      if (!information) continue;
      std::string model = field_of(*information, "Model");
      if (!model.empty()) ++models[model];
    }
  }
  if (models.empty()) return "none";
  std::string text;
  for (const auto& [model, count] : models) {
    if (!text.empty()) text += ", ";
    text += count > 1 ? std::to_string(count) + "x " + model : model;
  }
  return text;
}

// The commit `reference` ("refs/heads/main") names, following symbolic refs.
std::string resolve_reference(const std::filesystem::path& git_directory,
                              const std::filesystem::path& common_directory,
                              std::string reference) {
  for (int depth = 0; depth < 8; ++depth) {
    std::optional<std::string> content = read_small_file(git_directory / reference);
    if (!content) content = read_small_file(common_directory / reference);
    if (content) {
      std::string value = trim(*content);
      if (value.starts_with("ref:")) {
        reference = trim(std::string_view(value).substr(4));
        continue;
      }
      return is_commit_hash(value) ? value : std::string();
    }
    // Not a loose file: look it up among the packed refs ("HASH refs/heads/main").
    auto packed = read_small_file(common_directory / "packed-refs");
    if (!packed) return {};
    std::istringstream lines(*packed);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#' || line[0] == '^') continue;
      size_t space = line.find(' ');
      if (space == std::string::npos) continue;
      if (trim(std::string_view(line).substr(space + 1)) == reference) {
        std::string hash = line.substr(0, space);
        return is_commit_hash(hash) ? hash : std::string();
      }
    }
    return {};
  }
  return {};
}

}  // namespace

std::string git_commit_of(const std::string& directory) {
  std::error_code error;
  std::filesystem::path current = std::filesystem::absolute(directory, error);
  if (error) return {};
  std::filesystem::path git_directory;
  while (true) {
    std::filesystem::path candidate = current / ".git";
    if (std::filesystem::is_directory(candidate, error)) {
      git_directory = candidate;
      break;
    }
    if (std::filesystem::is_regular_file(candidate, error)) {
      // A worktree or submodule: ".git" is a file "gitdir: PATH" (relative to here).
      auto content = read_small_file(candidate);
      if (!content) return {};
      std::string value = trim(*content);
      if (!value.starts_with("gitdir:")) return {};
      std::filesystem::path target = trim(std::string_view(value).substr(7));
      git_directory = target.is_absolute() ? target : current / target;
      break;
    }
    if (!current.has_parent_path() || current.parent_path() == current) return {};
    current = current.parent_path();
  }
  std::filesystem::path common_directory = git_directory;
  if (auto common = read_small_file(git_directory / "commondir")) {
    std::filesystem::path target = trim(*common);
    common_directory = target.is_absolute() ? target : git_directory / target;
  }
  auto head = read_small_file(git_directory / "HEAD");
  if (!head) return {};
  std::string value = trim(*head);
  if (value.starts_with("ref:"))
    return resolve_reference(git_directory, common_directory,
                             trim(std::string_view(value).substr(4)));
  return is_commit_hash(value) ? value : std::string();
}

RunMetadata collect_host_metadata(const std::string& working_directory) {
  RunMetadata metadata;
  metadata.working_directory = working_directory;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) metadata.host = host;
  metadata.cpu = cpu_description();
  metadata.gpu = gpu_description();
  metadata.git_commit = git_commit_of(working_directory);
  metadata.versions.emplace_back("opsight", OPSIGHT_VERSION_STRING);
  struct utsname names {};
  if (::uname(&names) == 0)
    metadata.extra.emplace_back("os", std::string(names.sysname) + " " + names.release);
  return metadata;
}

}  // namespace opsight::store
