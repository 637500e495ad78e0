#include "server/api.hpp"

#include <charconv>
#include <filesystem>
#include <new>

#include "server/api_internal.hpp"
#include "store/run_json.hpp"

namespace opsight::server {
namespace {

using Handler = ApiResponse (*)(ApiContext&, const PathParams&, const QueryParams&);

struct RouteEntry {
  ApiRoute route;
  Handler handler;
};

const std::vector<RouteEntry>& route_entries() {
  static const std::vector<RouteEntry> entries = {
      {{"GET", "/api/info"}, handle_info},
      {{"GET", "/api/runs"}, handle_runs},
      {{"GET", "/api/runs/{run}"}, handle_run},
      {{"DELETE", "/api/runs/{run}"}, handle_delete_run},
      {{"GET", "/api/runs/{run}/report/{view}"}, handle_report},
      {{"GET", "/api/runs/{run}/latency"}, handle_latency},
      {{"GET", "/api/runs/{run}/timeline"}, handle_timeline},
      {{"GET", "/api/runs/{run}/tiles"}, handle_tiles},
      {{"GET", "/api/runs/{run}/counters"}, handle_counters},
      {{"GET", "/api/runs/{run}/slices/{row}"}, handle_slice},
      {{"GET", "/api/runs/{run}/search"}, handle_search},
      {{"GET", "/api/runs/{run}/range"}, handle_range},
      {{"GET", "/api/runs/{run}/area"}, handle_area},
      {{"GET", "/api/runs/{run}/marks"}, handle_marks},
      {{"GET", "/api/runs/{run}/critical_path_slices"}, handle_critical_path_slices},
      {{"GET", "/api/runs/{run}/inferences"}, handle_inferences},
      {{"GET", "/api/runs/{run}/traces"}, handle_traces},
      {{"PUT", "/api/runs/{run}/tags/{key}"}, handle_put_tag},
      {{"DELETE", "/api/runs/{run}/tags/{key}"}, handle_delete_tag},
      {{"GET", "/api/compare"}, handle_compare},
      {{"GET", "/api/explain"}, handle_explain_runs},
  };
  return entries;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t begin = 1;  // after the leading '/'
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string_view::npos) end = path.size();
    segments.push_back(path.substr(begin, end - begin));
    begin = end + 1;
  }
  return segments;
}

// Whether `path` fits the route's template; fills the parameters' values.
bool matches(std::string_view route_path, std::string_view path, PathParams& values) {
  auto route_segments = split_path(route_path);
  auto segments = split_path(path);
  if (route_segments.size() != segments.size()) return false;
  PathParams found;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (route_segments[i].starts_with("{")) {
      if (segments[i].empty()) return false;
      found.emplace_back(segments[i]);
    } else if (route_segments[i] != segments[i]) {
      return false;
    }
  }
  values = std::move(found);
  return true;
}

nlohmann::json error_body(const std::string& message) { return {{"error", message}}; }

}  // namespace

const std::vector<ApiRoute>& api_routes() {
  static const std::vector<ApiRoute> routes = [] {
    std::vector<ApiRoute> list;
    for (const auto& entry : route_entries()) list.push_back(entry.route);
    return list;
  }();
  return routes;
}

ApiResponse json_response(const nlohmann::json& value, int status) {
  ApiResponse response;
  response.status = status;
  response.body = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

// ---- QueryParams ---------------------------------------------------------------------

std::optional<std::string> QueryParams::optional_string(const std::string& name) const {
  auto found = params_.find(name);
  if (found == params_.end() || found->second.empty()) return std::nullopt;
  return found->second;
}

std::string QueryParams::string_or(const std::string& name, const std::string& fallback) const {
  return optional_string(name).value_or(fallback);
}

std::string QueryParams::required_string(const std::string& name) const {
  auto value = optional_string(name);
  if (!value) throw ApiError(400, "missing query parameter '" + name + "'");
  return *value;
}

int64_t QueryParams::parse_int(const std::string& name, const std::string& text, int64_t min,
                               int64_t max) const {
  int64_t value = 0;
  auto [end, problem] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (problem != std::errc() || end != text.data() + text.size())
    throw ApiError(400, "query parameter '" + name + "': '" + text + "' is not an integer");
  if (value < min || value > max)
    throw ApiError(400, "query parameter '" + name + "': " + text + " is out of range [" +
                            std::to_string(min) + ", " + std::to_string(max) + "]");
  return value;
}

int64_t QueryParams::required_int(const std::string& name, int64_t min, int64_t max) const {
  return parse_int(name, required_string(name), min, max);
}

TimeRange QueryParams::required_time_range() const {
  TimeRange range{required_int("start", kQueryTimeMin, kQueryTimeMax),
                  required_int("end", kQueryTimeMin, kQueryTimeMax)};
  if (range.end_ns < range.start_ns)
    throw ApiError(400, "query parameters 'start' and 'end': end " + std::to_string(range.end_ns) +
                            " is before start " + std::to_string(range.start_ns));
  return range;
}

int64_t QueryParams::int_or(const std::string& name, int64_t fallback, int64_t min,
                            int64_t max) const {
  auto value = optional_string(name);
  return value ? parse_int(name, *value, min, max) : fallback;
}

// ---- ApiContext ----------------------------------------------------------------------

ApiContext::ApiContext(const ApiOptions& options)
    : options_(options), cache_(options.max_loaded_runs) {}

std::string ApiContext::store_path() const {
  return options_.store_path.empty() ? store::RunStore::default_path() : options_.store_path;
}

store::RunStore* ApiContext::store() {
  std::lock_guard lock(store_mutex_);
  if (store_) return store_.get();
  std::string path = store_path();
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    store_problem_ = "no run store at " + path + " (opsight run and opsight save create it)";
    return nullptr;
  }
  store::OpenOptions open_options;
  open_options.create = false;
  auto opened = store::RunStore::open(path, open_options);
  if (!opened.ok()) {
    store_problem_ = opened.error();
    return nullptr;
  }
  store_ = std::move(opened.value());
  store_problem_.clear();
  return store_.get();
}

std::string ApiContext::store_problem() {
  std::lock_guard lock(store_mutex_);
  return store_problem_;
}

std::optional<size_t> ApiContext::file_index(const std::string& reference) const {
  if (!reference.starts_with("file:")) return std::nullopt;
  std::string digits = reference.substr(5);
  size_t index = 0;
  auto [end, problem] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || problem != std::errc() || end != digits.data() + digits.size() ||
      index >= options_.files.size())
    throw ApiError(404, "no trace file '" + reference + "': the server was started with " +
                            std::to_string(options_.files.size()) + " file(s)");
  return index;
}

std::optional<store::RunRecord> ApiContext::resolve_record(const std::string& reference) {
  if (file_index(reference)) return std::nullopt;
  store::RunStore* runs = store();
  if (runs == nullptr) throw ApiError(404, "no run '" + reference + "': " + store_problem());
  auto resolved = runs->resolve(reference);
  if (!resolved.ok()) throw ApiError(404, resolved.error());
  return resolved.value();
}

std::shared_ptr<const LoadedRun> ApiContext::load_run(const std::string& reference) {
  LoadOutcome outcome;
  if (auto index = file_index(reference)) {
    const std::string& path = options_.files[*index];
    outcome = cache_.get(reference, [&]() -> LoadOutcome {
      io::ReadResult read = io::read_trace_file(path);
      if (!read.ok()) return {nullptr, read.error->to_string(path), 422};
      std::vector<std::string> damage;
      if (read.damage) damage.push_back(read.damage->to_string(path));
      return {std::make_shared<const LoadedRun>(std::move(read.trace),
                                                std::filesystem::path(path).filename().string(),
                                                std::move(damage)),
              {},
              200};
    });
  } else {
    store::RunRecord record = *resolve_record(reference);
    outcome = cache_.get("run:" + std::to_string(record.id), [&]() -> LoadOutcome {
      store::RunStore* runs = store();
      if (runs == nullptr) return {nullptr, store_problem(), 404};
      io::ReadResult read = runs->load_trace(record.id);
      if (!read.ok()) return {nullptr, read.error->message, 422};
      std::vector<std::string> damage;
      if (read.damage) damage.push_back(read.damage->message);
      return {std::make_shared<const LoadedRun>(std::move(read.trace), store::run_label(record),
                                                std::move(damage)),
              {},
              200};
    });
  }
  if (!outcome.run) throw ApiError(outcome.status, outcome.error);
  return outcome.run;
}

// ---- Api -----------------------------------------------------------------------------

struct Api::Context {
  explicit Context(const ApiOptions& options) : api(options) {}
  ApiContext api;
};

Api::Api(ApiOptions options)
    : context_(std::make_unique<Context>(options)), options_(std::move(options)) {}

Api::~Api() = default;

ApiResponse Api::handle(const ApiRequest& request) {
  try {
    bool path_known = false;
    for (const auto& entry : route_entries()) {
      PathParams path_params;
      if (!matches(entry.route.path, request.path, path_params)) continue;
      path_known = true;
      if (entry.route.method != request.method) continue;
      QueryParams query(request.params);
      return entry.handler(context_->api, path_params, query);
    }
    if (path_known)
      return json_response(
          error_body("method " + request.method + " is not allowed on " + request.path), 405);
    return json_response(error_body("no API route " + request.path + " (see docs/ui.md)"), 404);
  } catch (const ApiError& error) {
    return json_response(error_body(error.what()), error.status());
  } catch (const std::bad_alloc&) {
    return json_response(error_body("out of memory"), 500);
  } catch (const std::exception& failure) {
    return json_response(error_body(std::string("internal error: ") + failure.what()), 500);
  }
}

}  // namespace opsight::server
