// The API's list of a run's traces: /api/runs/{run}/traces (trace_list.hpp), one row per
// trace with its root span (the row the timeline opens), time range, span and error
// counts and process, sorted and paged, filtered by the root's name.
#include <algorithm>
#include <cctype>
#include <limits>

#include "server/api_internal.hpp"
#include "server/trace_list.hpp"

namespace opsight::server {

ApiResponse handle_traces(ApiContext& context, const PathParams& path, const QueryParams& query) {
  TraceListQuery list_query;
  const std::string sort_text = query.string_or("sort", "duration");
  const auto sort = parse_trace_sort(sort_text);
  if (!sort)
    throw ApiError(400, "query parameter 'sort': '" + sort_text +
                            "' is not one of duration, start, spans, errors, name");
  list_query.sort = *sort;
  list_query.descending = trace_sort_descends_by_default(*sort);
  if (auto order = query.optional_string("order")) {
    if (*order != "asc" && *order != "desc")
      throw ApiError(400, "query parameter 'order': '" + *order + "' is not asc or desc");
    list_query.descending = *order == "desc";
  }
  list_query.limit = static_cast<size_t>(query.int_or("limit", 100, 1, 10'000));
  list_query.offset = static_cast<uint64_t>(query.int_or("offset", 0, 0, kQueryTimeMax));
  std::string name = query.string_or("q", "");
  if (name.size() > 1000) throw ApiError(400, "query parameter 'q' is longer than 1000 bytes");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  list_query.root_name = name;

  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  const TraceList& traces = run->traces();
  const TraceListPage page = traces.page(list_query);
  nlohmann::json rows = nlohmann::json::array();
  for (const TraceListRow* row : page.rows) {
    const trace::RowIndex root = row->root;
    const trace::Track& track = trace.tracks[trace.slices.track[root]];
    std::string process_name;
    for (const trace::Process& process : trace.processes)
      if (process.pid == track.pid) process_name = trace.str(process.name);
    rows.push_back({{"trace_id", row->trace_id.to_hex()},
                    {"root_row", root},
                    {"root_name", trace.str(trace.slices.name[root])},
                    {"root_ts", trace.slices.ts[root]},
                    {"root_dur", trace.slices.dur[root]},
                    {"track", trace.slices.track[root]},
                    {"pid", track.pid},
                    {"process", process_name},
                    {"start_ns", row->start_ns},
                    {"end_ns", row->end_ns},
                    {"duration_ns", row->duration_ns()},
                    {"span_count", row->span_count},
                    {"error_count", row->error_count},
                    {"root_count", row->root_count},
                    {"process_count", row->process_count},
                    {"remote_parent_span_id",
                     row->remote_parent_span_id == 0
                         ? nlohmann::json(nullptr)
                         : nlohmann::json(trace::span_id_to_hex(row->remote_parent_span_id))}});
  }
  return json_response({{"total", traces.size()},
                        {"matched", page.matched},
                        {"offset", list_query.offset},
                        {"sort", trace_sort_name(list_query.sort)},
                        {"order", list_query.descending ? "desc" : "asc"},
                        {"q", query.string_or("q", "")},
                        {"traces", rows}});
}

}  // namespace opsight::server
