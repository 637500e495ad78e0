#include "server/ui_server.hpp"

#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/access_control.hpp"
#include "server/static_files.hpp"

namespace opsight::server {
namespace {

void set_json_error(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_content(nlohmann::json{{"error", message}}.dump(
                           -1, ' ', false, nlohmann::json::error_handler_t::replace),
                       "application/json; charset=utf-8");
}

constexpr size_t kWorkerThreads = 32;
constexpr size_t kMaxBodyBytes = 64 * 1024;

// The response to a method a path does not take: 405, the methods it does take in Allow.
void refuse_method(const httplib::Request& request, httplib::Response& response,
                   const std::string& allowed) {
  response.set_header("Allow", allowed);
  set_json_error(response, 405,
                 "method " + request.method + " is not allowed on " + request.path +
                     " (allowed: " + allowed + "; cross-origin requests are never granted)");
}

// What an error that no handler explained means: the cause, named.
std::string reason_of(const httplib::Request& request, int status) {
  bool parsed = !request.method.empty() && !request.path.empty();
  std::string target = parsed ? ": " + request.method + " " + request.path : "";
  switch (status) {
    case 404:
      return "not found" + target;
    case 405:
      return "method not allowed" + target;
    case 413:
      return "request body larger than " + std::to_string(kMaxBodyBytes) +
             " bytes, this server's limit" + target;
    case 414:
      return "request line longer than " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) +
             " bytes, this server's limit";
    case 400:
      if (!parsed)
        return "malformed request: its request line or a header cannot be parsed (or the "
               "method is not an HTTP method)";
      return "bad request" + target;
    default:
      return "request refused (" + std::to_string(status) + ")" + target;
  }
}

const char* kNoAppPage =
    "<!doctype html><meta charset=utf-8><title>opsight ui</title>"
    "<p>The opsight web app is not built. Run <code>make install</code> in the opsight "
    "source tree (it runs <code>npm ci</code> and <code>vite build</code> in web/), or set "
    "OPSIGHT_WEB_ROOT to a folder holding the built app. The API answers under /api/.";

}  // namespace

struct UiServer::Http {
  httplib::Server server;
};

UiServer::UiServer(UiServerOptions options) : options_(std::move(options)) {}

UiServer::~UiServer() { stop(); }

std::string UiServer::url(const std::string& route) const {
  std::string host = options_.host;
  if (host == "0.0.0.0" || host == "::") host = "127.0.0.1";
  if (host.find(':') != std::string::npos && !host.starts_with("[")) host = "[" + host + "]";
  std::string text = "http://" + host + ":" + std::to_string(port_) + "/";
  if (!token_.empty()) text += "?token=" + token_;
  if (!route.empty()) text += "#" + route;
  return text;
}

std::string UiServer::start() {
  if (http_) return "already serving";
  loopback_ = is_loopback_host(options_.host);
  if (!loopback_) {
    token_ = make_access_token();
    allowed_host_names_ = options_.allowed_hosts;
    std::string bound = host_of_host_header(options_.host);
    if (!bound.empty() && !is_address_literal(bound) && bound != "0.0.0.0")
      allowed_host_names_.push_back(bound);
    for (std::string& name : machine_host_names()) allowed_host_names_.push_back(std::move(name));
  }
  options_.api.token_required = !loopback_;
  api_ = std::make_unique<Api>(options_.api);
  http_ = std::make_unique<Http>();
  httplib::Server& server = http_->server;
  server.set_payload_max_length(kMaxBodyBytes);
  server.set_default_headers(
      {{"X-Content-Type-Options", "nosniff"},
       {"Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "object-src 'none'; frame-ancestors 'none'"},
       {"Referrer-Policy", "no-referrer"}});
  // A browser keeps up to six connections open per server, and each idle one holds a
  // worker thread until its keep-alive timeout: with httplib's default pool (8 threads)
  // a timeline's burst of tile requests waited seconds for threads held by idle
  // connections. Threads are cheap here; idle connections are let go after 2 s.
  server.new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  server.set_keep_alive_timeout(2);
  server.set_tcp_nodelay(true);
  server.set_pre_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        if (loopback_ && !loopback_host_header_allowed(request.get_header_value("Host"))) {
          set_json_error(response, 403,
                         "this server answers requests to 127.0.0.1 or localhost only (Host: " +
                             request.get_header_value("Host") + ")");
          return httplib::Server::HandlerResponse::Handled;
        }
        if (!loopback_ &&
            !remote_host_header_allowed(request.get_header_value("Host"), allowed_host_names_)) {
          set_json_error(response, 403,
                         "this server does not answer to the host name in 'Host: " +
                             request.get_header_value("Host") +
                             "' (use its address, this machine's name, or start it with "
                             "opsight ui --allow-host NAME)");
          return httplib::Server::HandlerResponse::Handled;
        }
        if (!token_.empty() && request.path.starts_with("/api/")) {
          auto given = token_of_request(request.get_header_value("Authorization"),
                                        request.get_header_value("X-Opsight-Token"),
                                        request.get_param_value("token"));
          if (!given || !tokens_equal(token_, *given)) {
            set_json_error(response, 401,
                           "this server needs its access token (printed by opsight ui at start): "
                           "send 'Authorization: Bearer TOKEN' or ?token=TOKEN");
            return httplib::Server::HandlerResponse::Handled;
          }
        }
        return httplib::Server::HandlerResponse::Unhandled;
      });
  auto api_handler = [this](const httplib::Request& request, httplib::Response& response) {
    ApiRequest api_request;
    api_request.method = request.method;
    api_request.path = request.path;
    for (const auto& [key, value] : request.params) api_request.params[key] = value;
    ApiResponse answer = api_->handle(api_request);
    response.status = answer.status;
    response.set_header("Cache-Control", "no-store");
    response.set_content(answer.body, answer.content_type);
  };
  const char* kApiPattern = R"(/api/.*)";
  server.Get(kApiPattern, api_handler);
  server.Delete(kApiPattern, api_handler);
  server.Post(kApiPattern, api_handler);
  server.Put(kApiPattern, api_handler);
  server.Patch(kApiPattern, api_handler);
  // The app's files answer GET and HEAD only; no path answers OPTIONS (no CORS preflight
  // is ever granted).
  auto not_a_file_method = [](const httplib::Request& request, httplib::Response& response) {
    refuse_method(request, response,
                  request.path.starts_with("/api/") ? "see docs/ui.md" : "GET, HEAD");
  };
  server.Options(R"(/.*)", not_a_file_method);
  server.Post(R"(/.*)", not_a_file_method);
  server.Put(R"(/.*)", not_a_file_method);
  server.Delete(R"(/.*)", not_a_file_method);
  server.Patch(R"(/.*)", not_a_file_method);
  server.Get(R"(/.*)", [this](const httplib::Request& request, httplib::Response& response) {
    if (!options_.web_root) {
      if (request.path == "/" || request.path == "/index.html") {
        response.set_content(kNoAppPage, "text/html; charset=utf-8");
      } else {
        set_json_error(response, 404, "no file " + request.path + " (the web app is not built)");
      }
      return;
    }
    auto file = resolve_static_path(*options_.web_root, request.path);
    if (!file) {
      set_json_error(response, 404, "no file " + request.path + " in the web app");
      return;
    }
    auto entry = static_files_.get(*file);
    if (!entry) {
      set_json_error(response, 404, "cannot read " + request.path + " in the web app");
      return;
    }
    response.set_header("Vary", "Accept-Encoding");
    // Served through a content provider of known length, which cpp-httplib sends as it is:
    // the gzip bytes compressed once (StaticFileCache), or the file's bytes.
    bool gzip = !entry->gzip.empty() && accepts_gzip(request.get_header_value("Accept-Encoding"));
    if (gzip) response.set_header("Content-Encoding", "gzip");
    const std::string* body = gzip ? &entry->gzip : &entry->bytes;
    response.set_content_provider(
        body->size(), entry->content_type,
        [entry, body](size_t offset, size_t length, httplib::DataSink& sink) {
          return sink.write(body->data() + offset, length);
        });
  });
  server.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;  // a handler already explained
    if (response.status == 400 && (request.method == "TRACE" || request.method == "CONNECT")) {
      refuse_method(request, response, "GET, HEAD");  // methods httplib parses, never routes
      return;
    }
    set_json_error(response, response.status, reason_of(request, response.status));
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr failure) {
        std::string message = "internal error";
        try {
          if (failure) std::rethrow_exception(failure);
        } catch (const std::exception& exception) {
          message += std::string(": ") + exception.what();
        } catch (...) {
        }
        set_json_error(response, 500, message);
      });
  bool bound = options_.port == 0 ? (port_ = server.bind_to_any_port(options_.host)) > 0
                                  : server.bind_to_port(options_.host, options_.port);
  if (!bound) {
    http_.reset();
    return "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
           " (in use, or not an address of this machine)";
  }
  if (options_.port != 0) port_ = options_.port;
  thread_ = std::thread([this] { http_->server.listen_after_bind(); });
  return "";
}

void UiServer::wait() {
  if (thread_.joinable()) thread_.join();
}

void UiServer::stop() {
  if (http_) http_->server.stop();
  if (thread_.joinable()) thread_.join();
  http_.reset();
}

}  // namespace opsight::server
