// The UI server's REST API, apart from HTTP: a request (method, path, query parameters)
// in, a status and a JSON body out, so that unit tests call it directly and the HTTP
// server (ui_server.hpp) only forwards. Every route is in api_routes(); docs/ui-openapi.json
// documents the same list (a test holds them equal).
//
// What it answers comes from the code `opsight report` and `opsight compare` run: a
// report view's JSON is report::find_report_view(view)->render(trace, {kJson}), byte for
// byte what `opsight report RUN --VIEW --format json` prints; a comparison is
// render_comparison's JSON. Runs are the run store's (by id, "latest", a name... as on the
// command line) and the trace files named when the server started ("file:0", "file:1"...;
// the API never opens a path a request names). Loaded traces sit in a TraceCache.
//
// Errors: a bad parameter is 400, an unknown run, row or route 404, a method a route does
// not take 405, a trace that cannot be read 422; the body is {"error": "what and where"}.
// Nothing a request holds makes handle() throw or crash.
//
// Thread-safety: handle() may be called from any number of threads at once.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/trace_cache.hpp"
#include "store/run_store.hpp"

namespace opsight::server {

struct ApiRequest {
  std::string method = "GET";
  std::string path;                           // "/api/runs/12/tiles", already URL-decoded
  std::map<std::string, std::string> params;  // query parameters, decoded
};

struct ApiResponse {
  int status = 200;
  std::string body;
  // With the charset, Debian's cpp-httplib (0.11) does not compress the body: its Brotli
  // at quality 11 cost more per tile than computing it (a local UI needs no compression).
  std::string content_type = "application/json; charset=utf-8";
};

struct ApiOptions {
  std::string store_path;          // empty: RunStore::default_path()
  std::vector<std::string> files;  // trace files the command line named ("file:N")
  size_t max_loaded_runs = 4;      // the TraceCache's capacity
  bool token_required = false;     // reported by /api/info
};

// A route: "GET" and "/api/runs/{run}/tiles" (segments in braces are parameters).
struct ApiRoute {
  std::string_view method;
  std::string_view path;
};
const std::vector<ApiRoute>& api_routes();

class Api {
 public:
  explicit Api(ApiOptions options);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  ApiResponse handle(const ApiRequest& request);

  const ApiOptions& options() const { return options_; }

 private:
  struct Context;
  std::unique_ptr<Context> context_;
  ApiOptions options_;
};

}  // namespace opsight::server
