#include "server/static_files.hpp"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "server/ascii_text.hpp"

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

std::string gzip_compress(std::string_view bytes) {
  z_stream stream{};
  // 15 window bits + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return {};
  std::string out(deflateBound(&stream, static_cast<uLong>(bytes.size())) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int status = deflate(&stream, Z_FINISH);
  size_t written = stream.total_out;
  deflateEnd(&stream);
  if (status != Z_STREAM_END) return {};
  out.resize(written);
  return out;
}

bool accepts_gzip(std::string_view accept_encoding) {
  const std::string lower = ascii_lowercase(accept_encoding);
  size_t begin = 0;
  while (begin <= lower.size()) {
    size_t end = lower.find(',', begin);
    if (end == std::string::npos) end = lower.size();
    std::string item = lower.substr(begin, end - begin);
    begin = end + 1;
    std::string coding = item.substr(0, item.find(';'));
    coding.erase(0, coding.find_first_not_of(" \t"));
    coding.erase(coding.find_last_not_of(" \t") + 1);
    if (coding != "gzip" && coding != "*") continue;
    size_t q = item.find("q=");
    if (q != std::string::npos && std::strtod(item.c_str() + q + 2, nullptr) <= 0.0) continue;
    return true;
  }
  return false;
}

std::shared_ptr<const StaticFileCache::Entry> StaticFileCache::get(
    const std::filesystem::path& file) {
  std::error_code error;
  auto modified = std::filesystem::last_write_time(file, error);
  if (error) return nullptr;
  uintmax_t size = std::filesystem::file_size(file, error);
  if (error) return nullptr;
  {
    std::lock_guard lock(mutex_);
    auto found = held_.find(file);
    if (found != held_.end() && found->second.modified == modified && found->second.size == size)
      return found->second.entry;
  }
  std::ifstream input(file, std::ios::binary);
  if (!input) return nullptr;
  std::ostringstream bytes;
  bytes << input.rdbuf();
  auto entry = std::make_shared<Entry>();
  entry->bytes = bytes.str();
  entry->content_type = content_type_of(file);
  const std::string& type = entry->content_type;
  bool text = type.starts_with("text/") || type.starts_with("application/json") ||
              type.starts_with("image/svg+xml") || type.starts_with("application/javascript");
  if (text && entry->bytes.size() >= 256) entry->gzip = gzip_compress(entry->bytes);
  std::lock_guard lock(mutex_);
  held_[file] = {modified, size, entry};
  return entry;
}

}  // namespace opsight::server
