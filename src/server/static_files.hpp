// The built single-page app's files (web/dist, installed as opsight/web/): which file a
// URL path names, refusing every path that could leave the folder, and its content type.
//
// Rules of resolve_static_path(root, url_path): the path must start with '/'; "/" is
// "/index.html"; a segment "." or "..", an empty segment, a backslash, a NUL or a control
// character is refused; the file must be a regular file whose canonical path lies inside
// the canonical root (a symbolic link out of the folder is refused too).
//
// Thread-safety: pure functions over the file system.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace opsight::server {

std::optional<std::filesystem::path> resolve_static_path(const std::filesystem::path& root,
                                                         std::string_view url_path);

// "text/html; charset=utf-8", "text/javascript; charset=utf-8", ... by extension;
// "application/octet-stream" when unknown.
std::string content_type_of(const std::filesystem::path& file);

// Where the built app is: $OPSIGHT_WEB_ROOT when set; else, beside the running program,
// ../web (the Python package: opsight/bin/opsight and opsight/web) or ../share/opsight/web;
// else `build_tree_fallback` (the source tree's web/dist). nullopt when none holds an
// index.html.
std::optional<std::filesystem::path> find_web_root(const std::string& build_tree_fallback);

// The app's files as they are served: read once, and for text (HTML, JavaScript, CSS,
// JSON, SVG) gzip-compressed once, so a page load neither reads nor compresses again.
// (cpp-httplib would compress every text answer with Brotli at its slowest quality: about
// 100 ms per page load for the app's script.) An entry is read again when the file's size
// or modification time changed.
//
// Thread-safety: get() may be called from any number of threads at once.
class StaticFileCache {
 public:
  struct Entry {
    std::string bytes;
    std::string gzip;  // empty when the type is not worth compressing (or it failed)
    std::string content_type;
  };

  // The file's entry; nullptr when it cannot be read.
  std::shared_ptr<const Entry> get(const std::filesystem::path& file);

 private:
  struct Held {
    std::filesystem::file_time_type modified;
    uintmax_t size = 0;
    std::shared_ptr<const Entry> entry;
  };
  std::mutex mutex_;
  std::map<std::filesystem::path, Held> held_;
};

// `bytes` gzip-compressed (RFC 1952) at zlib's default level; empty on failure.
std::string gzip_compress(std::string_view bytes);

// Whether an Accept-Encoding header value accepts gzip (a q=0 refuses it).
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace opsight::server
