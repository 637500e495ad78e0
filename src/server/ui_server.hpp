// `opsight ui`'s HTTP server: the REST API (api.hpp) under /api/, and the built
// single-page app (static_files.hpp) everywhere else, on cpp-httplib (Debian's
// libcpp-httplib-dev, which the exporters already use: one HTTP library in the project).
//
// Security (docs/ui.md): binds 127.0.0.1 unless told otherwise; on a loopback address a
// request must name a loopback Host (no DNS rebinding); on any other address a random
// token is made at start (access_token()), every /api/ request must carry it, and the
// Host must be an address, this machine's name or an allowed one (access_control.hpp).
// Every answer carries nosniff, a Content-Security-Policy and no-referrer (a token in a
// URL never leaks through a Referer). Requests are limited to 8 KiB of request line and
// 64 KiB of body; errors are JSON ({"error": "..."}) with a 4xx status that names the
// cause (405 with Allow for a method a path does not take, 413, 414), and a handler that
// fails answers 500, never crashing the server.
//
// Thread-safety: start() and stop() from one thread; requests are served on the
// server's own threads.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/api.hpp"
#include "server/static_files.hpp"

namespace opsight::server {

struct UiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  // The built app's folder; nullopt: / answers a page saying how to build it.
  std::optional<std::filesystem::path> web_root;
  // On a non-loopback host: DNS names a browser may use in the Host header besides the
  // bound name, this machine's names, loopback names and address literals.
  std::vector<std::string> allowed_hosts;
  ApiOptions api;
};

class UiServer {
 public:
  explicit UiServer(UiServerOptions options);
  ~UiServer();
  UiServer(const UiServer&) = delete;
  UiServer& operator=(const UiServer&) = delete;

  // Binds and starts serving on a thread of its own; returns an error message or "".
  std::string start();
  // Blocks until stop() is called from elsewhere (a signal handler's thread).
  void wait();
  void stop();

  int port() const { return port_; }
  // Empty on a loopback address; else the token every API call must carry.
  const std::string& access_token() const { return token_; }
  // The URL to open: http://HOST:PORT/ (with ?token=... when a token is needed) and an
  // optional "#/..." route.
  std::string url(const std::string& route = "") const;

 private:
  struct Http;
  UiServerOptions options_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<Http> http_;
  StaticFileCache static_files_;
  std::thread thread_;
  std::string token_;
  std::vector<std::string> allowed_host_names_;  // for a non-loopback host
  int port_ = 0;
  bool loopback_ = true;
};

}  // namespace opsight::server
