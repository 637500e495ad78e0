#include "server/static_files.hpp"

#include <cstdlib>
#include <vector>

namespace opsight::server {

std::optional<std::filesystem::path> resolve_static_path(const std::filesystem::path& root,
                                                         std::string_view url_path) {
  if (!url_path.starts_with("/")) return std::nullopt;
  std::string_view relative = url_path.substr(1);
  if (relative.empty()) relative = "index.html";
  for (char c : relative)
    if (c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
  size_t begin = 0;
  while (begin <= relative.size()) {
    size_t end = relative.find('/', begin);
    if (end == std::string_view::npos) end = relative.size();
    std::string_view segment = relative.substr(begin, end - begin);
    if (segment.empty() || segment == "." || segment == "..") return std::nullopt;
    begin = end + 1;
  }
  std::error_code error;
  std::filesystem::path canonical_root = std::filesystem::canonical(root, error);
  if (error) return std::nullopt;
  std::filesystem::path file = std::filesystem::canonical(canonical_root / relative, error);
  if (error || !std::filesystem::is_regular_file(file, error)) return std::nullopt;
  auto [root_end, file_position] =
      std::mismatch(canonical_root.begin(), canonical_root.end(), file.begin(), file.end());
  if (root_end != canonical_root.end()) return std::nullopt;  // outside the root
  return file;
}

std::string content_type_of(const std::filesystem::path& file) {
  std::string extension = file.extension().string();
  if (extension == ".html") return "text/html; charset=utf-8";
  if (extension == ".js" || extension == ".mjs") return "text/javascript; charset=utf-8";
  if (extension == ".css") return "text/css; charset=utf-8";
  if (extension == ".json") return "application/json";
  if (extension == ".svg") return "image/svg+xml";
  if (extension == ".png") return "image/png";
  if (extension == ".ico") return "image/x-icon";
  if (extension == ".woff2") return "font/woff2";
  if (extension == ".txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

std::optional<std::filesystem::path> find_web_root(const std::string& build_tree_fallback) {
  std::vector<std::filesystem::path> candidates;
  if (const char* configured = std::getenv("OPSIGHT_WEB_ROOT"); configured && *configured)
    return std::filesystem::exists(std::filesystem::path(configured) / "index.html")
               ? std::optional<std::filesystem::path>(configured)
               : std::nullopt;
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(self.parent_path() / "../web");
    candidates.push_back(self.parent_path() / "../share/opsight/web");
  }
  if (!build_tree_fallback.empty()) candidates.emplace_back(build_tree_fallback);
  for (const auto& candidate : candidates)
    if (std::filesystem::exists(candidate / "index.html", error))
      return candidate.lexically_normal();
  return std::nullopt;
}

}  // namespace opsight::server
