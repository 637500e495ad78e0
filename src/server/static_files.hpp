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

}  // namespace opsight::server
