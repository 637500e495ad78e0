// What the API's route handlers share (api.cc routes, api_runs.cc, api_analyses.cc,
// api_timeline.cc and api_traces.cc answer): the context (the run store, the loaded
// traces), the errors a handler raises, and the reading of parameters. Private to src/server.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/api.hpp"
#include "server/trace_cache.hpp"
#include "store/run_store.hpp"

namespace opsight::server {

// A request the API refuses: its HTTP status (4xx) and the message of the JSON body.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// Times a query may name (ns on the trace's clock): a quarter of int64's range each way,
// so that differences and sums of two of them never overflow.
inline constexpr int64_t kQueryTimeMin = std::numeric_limits<int64_t>::min() / 4;
inline constexpr int64_t kQueryTimeMax = std::numeric_limits<int64_t>::max() / 4;

// A time range a request names by "start" and "end".
struct TimeRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// The query parameters of one request, read with checks: a missing required parameter or
// a value of the wrong form raises ApiError 400 naming the parameter and the value.
class QueryParams {
 public:
  explicit QueryParams(const std::map<std::string, std::string>& params) : params_(params) {}
  std::optional<std::string> optional_string(const std::string& name) const;
  std::string string_or(const std::string& name, const std::string& fallback) const;
  std::string required_string(const std::string& name) const;
  int64_t required_int(const std::string& name, int64_t min, int64_t max) const;
  int64_t int_or(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  // "start" and "end", both required, within kQueryTime{Min,Max}, end not before start.
  TimeRange required_time_range() const;

 private:
  int64_t parse_int(const std::string& name, const std::string& text, int64_t min,
                    int64_t max) const;
  const std::map<std::string, std::string>& params_;
};

// The run store and the loaded runs behind the API.
class ApiContext {
 public:
  explicit ApiContext(const ApiOptions& options);

  const ApiOptions& options() const { return options_; }
  TraceCache& cache() { return cache_; }
  std::string store_path() const;
  // The store, opened on first use (never created: a missing store has no runs); nullptr
  // when there is none, with store_problem() saying why.
  store::RunStore* store();
  std::string store_problem();

  // The run a reference names ("file:N" or a run reference of the store), loaded through
  // the cache. ApiError 404 when there is no such run, 422 when its trace is unusable.
  std::shared_ptr<const LoadedRun> load_run(const std::string& reference);
  // The store's record of a run reference (ApiError 404 when it names none); for "file:N"
  // references, nullopt.
  std::optional<store::RunRecord> resolve_record(const std::string& reference);
  // The index N of a "file:N" reference; nullopt for any other reference.
  std::optional<size_t> file_index(const std::string& reference) const;

 private:
  ApiOptions options_;
  TraceCache cache_;
  std::mutex store_mutex_;
  std::unique_ptr<store::RunStore> store_;
  std::string store_problem_;
};

using PathParams = std::vector<std::string>;

// A JSON answer; invalid UTF-8 in trace strings becomes U+FFFD instead of an error.
ApiResponse json_response(const nlohmann::json& value, int status = 200);

// The route handlers.
ApiResponse handle_info(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_runs(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_run(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_delete_run(ApiContext& context, const PathParams& path,
                              const QueryParams& query);
ApiResponse handle_report(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_latency(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_compare(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_timeline(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_tiles(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_counters(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_slice(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_search(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_range(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_area(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_marks(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_critical_path_slices(ApiContext& context, const PathParams& path,
                                        const QueryParams& query);
ApiResponse handle_inferences(ApiContext& context, const PathParams& path,
                              const QueryParams& query);
ApiResponse handle_traces(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_put_tag(ApiContext& context, const PathParams& path, const QueryParams& query);
ApiResponse handle_delete_tag(ApiContext& context, const PathParams& path,
                              const QueryParams& query);
ApiResponse handle_explain_runs(ApiContext& context, const PathParams& path,
                                const QueryParams& query);

}  // namespace opsight::server
