// The API's timeline: /api/runs/{run}/timeline (processes, their tracks and counter
// tracks), /tiles and /counters (a window at a resolution, from the TimelineIndex),
// /slices/{row} (one slice: args, parent chain, flows), /search (slices by name or arg:
// timeline_search.hpp), /range (per-name statistics of the slices inside a time range) and
// /area (a time range on a set of tracks, per track and per name: timeline_area.hpp).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "analyze/distribution.hpp"
#include "analyze/kernels.hpp"
#include "server/api_internal.hpp"
#include "server/timeline_area.hpp"
#include "server/timeline_search.hpp"
#include "trace/categories.hpp"
#include "trace/trace_membership.hpp"

namespace opsight::server {
namespace {

// The most pixels a tile may span: a window wider than this at its resolution is refused.
constexpr int64_t kMaxTilePixels = 1 << 16;

struct Window {
  int64_t start_ns, end_ns, ns_per_pixel;
};

Window window_of(const QueryParams& query) {
  const auto [start, end] = query.required_time_range();
  Window window{start, end, query.required_int("resolution", 1, kQueryTimeMax)};
  if ((window.end_ns - window.start_ns) / window.ns_per_pixel > kMaxTilePixels)
    throw ApiError(400, "the window spans more than " + std::to_string(kMaxTilePixels) +
                            " pixels at this resolution: ask for a coarser 'resolution'");
  return window;
}

const char* track_kind_name(trace::TrackKind kind) {
  switch (kind) {
    case trace::TrackKind::kThread:
      return "thread";
    case trace::TrackKind::kThreadLane:
      return "lane";
    case trace::TrackKind::kAsync:
      return "async";
  }
  return "thread";
}

nlohmann::json arg_value_json(const trace::Trace& trace, const trace::ArgValue& value) {
  switch (value.type) {
    case trace::ArgType::kInt:
      return value.int_value;
    case trace::ArgType::kDouble:
      return std::isfinite(value.double_value) ? nlohmann::json(value.double_value)
                                               : nlohmann::json(std::to_string(value.double_value));
    case trace::ArgType::kString:
      return std::string(trace.str(value.string_value));
    case trace::ArgType::kBool:
      return value.int_value != 0;
  }
  return nullptr;
}

nlohmann::json slice_summary_json(const trace::Trace& trace, trace::RowIndex row) {
  return {{"row", row},
          {"name", trace.str(trace.slices.name[row])},
          {"ts", trace.slices.ts[row]},
          {"dur", trace.slices.dur[row]},
          {"track", trace.slices.track[row]},
          {"depth", trace.slices.depth[row]}};
}

}  // namespace

ApiResponse handle_timeline(ApiContext& context, const PathParams& path, const QueryParams&) {
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  const TimelineIndex& timeline = run->timeline();
  std::vector<size_t> process_order(trace.processes.size());
  for (size_t i = 0; i < process_order.size(); ++i) process_order[i] = i;
  std::stable_sort(process_order.begin(), process_order.end(), [&](size_t a, size_t b) {
    const auto &pa = trace.processes[a], &pb = trace.processes[b];
    return pa.sort_index != pb.sort_index ? pa.sort_index < pb.sort_index : pa.pid < pb.pid;
  });
  std::unordered_map<int64_t, size_t> position_of_pid;
  nlohmann::json processes = nlohmann::json::array();
  for (size_t index : process_order) {
    const trace::Process& process = trace.processes[index];
    nlohmann::json labels = nlohmann::json::array();
    for (trace::StringId label : process.labels) labels.push_back(trace.str(label));
    position_of_pid[process.pid] = processes.size();
    processes.push_back({{"pid", process.pid},
                         {"name", trace.str(process.name)},
                         {"labels", labels},
                         {"tracks", nlohmann::json::array()},
                         {"counters", nlohmann::json::array()}});
  }
  auto process_entry = [&](int64_t pid) -> nlohmann::json& {
    auto found = position_of_pid.find(pid);
    if (found == position_of_pid.end()) {  // a track of a process without an entry
      position_of_pid[pid] = processes.size();
      processes.push_back({{"pid", pid},
                           {"name", ""},
                           {"labels", nlohmann::json::array()},
                           {"tracks", nlohmann::json::array()},
                           {"counters", nlohmann::json::array()}});
      return processes.back();
    }
    return processes[found->second];
  };
  std::vector<trace::TrackId> track_order(trace.tracks.size());
  for (trace::TrackId i = 0; i < track_order.size(); ++i) track_order[i] = i;
  std::stable_sort(track_order.begin(), track_order.end(), [&](auto a, auto b) {
    const auto &ta = trace.tracks[a], &tb = trace.tracks[b];
    if (ta.sort_index != tb.sort_index) return ta.sort_index < tb.sort_index;
    return ta.tid < tb.tid;
  });
  for (trace::TrackId id : track_order) {
    const trace::Track& track = trace.tracks[id];
    if (timeline.slice_count(id) == 0) continue;
    process_entry(track.pid)["tracks"].push_back({{"id", id},
                                                  {"tid", track.tid},
                                                  {"name", trace.track_label(id)},
                                                  {"kind", track_kind_name(track.kind)},
                                                  {"depth_count", timeline.depth_count(id)},
                                                  {"slice_count", timeline.slice_count(id)}});
  }
  std::vector<double> minimum(trace.counter_tracks.size(), std::numeric_limits<double>::infinity());
  std::vector<double> maximum(trace.counter_tracks.size(),
                              -std::numeric_limits<double>::infinity());
  for (size_t row = 0; row < trace.counters.size(); ++row) {
    uint32_t counter = trace.counters.counter_track[row];
    if (counter >= minimum.size() || !std::isfinite(trace.counters.value[row])) continue;
    minimum[counter] = std::min(minimum[counter], trace.counters.value[row]);
    maximum[counter] = std::max(maximum[counter], trace.counters.value[row]);
  }
  for (uint32_t id = 0; id < trace.counter_tracks.size(); ++id) {
    const trace::CounterTrack& counter = trace.counter_tracks[id];
    if (timeline.sample_count(id) == 0) continue;
    process_entry(counter.pid)["counters"].push_back(
        {{"id", id},
         {"name", trace.str(counter.name)},
         {"unit", trace.str(counter.unit)},
         {"sample_count", timeline.sample_count(id)},
         {"min", std::isfinite(minimum[id]) ? minimum[id] : 0.0},
         {"max", std::isfinite(maximum[id]) ? maximum[id] : 0.0}});
  }
  auto [first_ns, last_ns] = trace.time_bounds();
  return json_response({{"label", run->label()},
                        {"start_ns", first_ns},
                        {"end_ns", last_ns},
                        {"processes", processes},
                        {"instant_count", trace.instants.size()},
                        {"flow_count", trace.flows.size()}});
}

ApiResponse handle_tiles(ApiContext& context, const PathParams& path, const QueryParams& query) {
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  const auto track = query.required_int("track", 0, std::numeric_limits<uint32_t>::max());
  if (static_cast<size_t>(track) >= run->timeline().track_count())
    throw ApiError(404, "no track " + std::to_string(track) + " in " + run->label() + " (it has " +
                            std::to_string(run->timeline().track_count()) + ")");
  Window window = window_of(query);
  Tile tile = run->timeline().tile(
      {static_cast<trace::TrackId>(track), window.start_ns, window.end_ns, window.ns_per_pixel});
  // Names once per tile: items give an index into "names".
  std::unordered_map<trace::StringId, size_t> name_index;
  nlohmann::json names = nlohmann::json::array();
  nlohmann::json depths = nlohmann::json::array();
  for (const auto& blocks : tile.blocks) {
    nlohmann::json items = nlohmann::json::array();
    for (const TimelineBlock& block : blocks) {
      trace::StringId name = trace.slices.name[block.row];
      auto [found, added] = name_index.try_emplace(name, names.size());
      if (added) names.push_back(trace.str(name));
      items.push_back(
          {block.start_ns, block.end_ns - block.start_ns, block.count, block.row, found->second});
    }
    depths.push_back(std::move(items));
  }
  return json_response({{"track", track},
                        {"start", window.start_ns},
                        {"end", window.end_ns},
                        {"resolution", window.ns_per_pixel},
                        {"level_width_ns", tile.level_width_ns},
                        {"items_scanned", tile.items_scanned},
                        {"names", names},
                        {"depths", depths}});
}

ApiResponse handle_counters(ApiContext& context, const PathParams& path, const QueryParams& query) {
  auto run = context.load_run(path.at(0));
  const auto track = query.required_int("track", 0, std::numeric_limits<uint32_t>::max());
  if (static_cast<size_t>(track) >= run->timeline().counter_track_count())
    throw ApiError(404, "no counter track " + std::to_string(track) + " in " + run->label());
  Window window = window_of(query);
  auto points = run->timeline().counter_points(
      {static_cast<uint32_t>(track), window.start_ns, window.end_ns, window.ns_per_pixel});
  nlohmann::json items = nlohmann::json::array();
  for (const CounterPoint& point : points)
    items.push_back({point.ts, point.first, point.min, point.max, point.last});
  return json_response({{"track", track}, {"points", items}});
}

ApiResponse handle_slice(ApiContext& context, const PathParams& path, const QueryParams&) {
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  const std::string& row_text = path.at(1);
  uint64_t parsed = 0;
  bool digits =
      !row_text.empty() && row_text.size() <= 10 &&
      std::all_of(row_text.begin(), row_text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) parsed = std::stoull(row_text);
  if (!digits || parsed >= trace.slices.size())
    throw ApiError(404, "no slice row '" + row_text + "' in " + run->label() + " (rows 0 to " +
                            std::to_string(trace.slices.size()) + " exclusive)");
  const auto row = static_cast<trace::RowIndex>(parsed);
  nlohmann::json body = slice_summary_json(trace, row);
  const trace::Track& track = trace.tracks[trace.slices.track[row]];
  body["category"] = trace.str(trace.slices.category[row]);
  body["track_label"] = trace.track_label(trace.slices.track[row]);
  body["pid"] = track.pid;
  body["tid"] = track.tid;
  body["span_id"] = trace::span_id_to_hex(trace.slices.span_id[row]);
  // Its trace, as the exporters send it (trace::TraceMembership: a root's own, or the one
  // it or an ancestor joined or began); the parent is the remote one for a joined span.
  const trace::RowTraceIdentity identity = trace::TraceMembership::of_row(trace, row);
  body["trace_id"] = identity.trace_id.to_hex();
  body["parent_span_id"] = identity.parent_span_id == 0
                               ? nlohmann::json(nullptr)
                               : nlohmann::json(trace::span_id_to_hex(identity.parent_span_id));
  body["unfinished"] = (trace.slices.flags[row] & trace::kSliceUnfinished) != 0;
  nlohmann::json args = nlohmann::json::object();
  if (row + 1 < trace.slices.args_begin.size())
    for (auto arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1]; ++arg)
      args[std::string(trace.str(trace.slice_args.key[arg]))] =
          arg_value_json(trace, trace.slice_args.value[arg]);
  body["args"] = args;
  int64_t children_ns = 0;
  size_t children = 0;
  // Children follow their parent on its track: scan forward while inside it.
  for (trace::RowIndex next = row + 1; next < trace.slices.size(); ++next) {
    if (trace.slices.track[next] != trace.slices.track[row]) continue;
    if (trace.slices.ts[next] > trace.slices.end(row)) break;
    if (trace.slices.parent[next] == row) {
      children_ns += trace.slices.dur[next];
      ++children;
    }
  }
  body["self_ns"] = std::max<int64_t>(0, trace.slices.dur[row] - children_ns);
  body["child_count"] = children;
  nlohmann::json parents = nlohmann::json::array();
  for (trace::RowIndex parent = trace.slices.parent[row]; parent != trace::kNoRow;
       parent = trace.slices.parent[parent])
    parents.push_back(slice_summary_json(trace, parent));
  body["parents"] = parents;
  nlohmann::json flows_out = nlohmann::json::array(), flows_in = nlohmann::json::array();
  for (size_t flow = 0; flow < trace.flows.size(); ++flow) {
    if (trace.flows.slice_out[flow] == row)
      flows_out.push_back(slice_summary_json(trace, trace.flows.slice_in[flow]));
    if (trace.flows.slice_in[flow] == row)
      flows_in.push_back(slice_summary_json(trace, trace.flows.slice_out[flow]));
  }
  body["flows_out"] = flows_out;
  body["flows_in"] = flows_in;
  // GPU work: the call that launched it and the code open there (docs/gpu.md).
  const std::string_view category = trace.str(trace.slices.category[row]);
  if (category == trace::kCategoryGpuKernel || category == trace::kCategoryGpuMemcpy ||
      category == trace::kCategoryGpuMemset || category == trace::kCategoryGpuGraph) {
    if (auto launch = analyze::find_gpu_launch(trace, row)) {
      nlohmann::json launched_by = slice_summary_json(trace, launch->call);
      launched_by["operator"] = launch->site.operator_name;
      launched_by["module"] = launch->site.module_name;
      launched_by["python"] = launch->site.python_function;
      launched_by["source"] = launch->site.source;
      body["launched_by"] = launched_by;
    }
  }
  return json_response(body);
}

ApiResponse handle_search(ApiContext& context, const PathParams& path, const QueryParams& query) {
  const std::string text = query.required_string("q");
  if (text.size() > 1000) throw ApiError(400, "query parameter 'q' is longer than 1000 bytes");
  const auto limit = static_cast<size_t>(query.int_or("limit", 1000, 1, 100'000));
  const auto offset = static_cast<uint64_t>(query.int_or("offset", 0, 0, kQueryTimeMax));
  std::string problem;
  auto parsed = parse_slice_search(text, problem);
  if (!parsed) throw ApiError(400, "query parameter 'q': " + problem);
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  SliceSearchResult result = search_slices(trace, *parsed, offset, limit);
  nlohmann::json matches = nlohmann::json::array();
  for (trace::RowIndex row : result.rows) matches.push_back(slice_summary_json(trace, row));
  return json_response(
      {{"q", text}, {"total", result.total}, {"offset", offset}, {"matches", matches}});
}

}  // namespace opsight::server

namespace opsight::server {

ApiResponse handle_range(ApiContext& context, const PathParams& path, const QueryParams& query) {
  const auto [start, end] = query.required_time_range();
  const auto limit = static_cast<size_t>(query.int_or("limit", 50, 1, 100'000));
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  // Durations per name of the slices that lie wholly inside the range.
  std::unordered_map<trace::StringId, std::vector<int64_t>> durations;
  uint64_t inside = 0;
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row) {
    if (trace.slices.ts[row] < start || trace.slices.end(row) > end) continue;
    durations[trace.slices.name[row]].push_back(trace.slices.dur[row]);
    ++inside;
  }
  struct Row {
    trace::StringId name;
    analyze::Distribution distribution;
  };
  std::vector<Row> rows;
  for (auto& [name, values] : durations)
    rows.push_back({name, analyze::summarize_distribution(values)});
  std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (a.distribution.total_ns != b.distribution.total_ns)
      return a.distribution.total_ns > b.distribution.total_ns;
    return trace.str(a.name) < trace.str(b.name);
  });
  const size_t name_count = rows.size();
  if (rows.size() > limit) rows.resize(limit);
  nlohmann::json names = nlohmann::json::array();
  for (const Row& row : rows)
    names.push_back({{"name", trace.str(row.name)},
                     {"count", row.distribution.count},
                     {"total_ns", row.distribution.total_ns},
                     {"min_ns", row.distribution.min_ns},
                     {"mean_ns", row.distribution.mean_ns},
                     {"p50_ns", row.distribution.p50_ns},
                     {"p99_ns", row.distribution.p99_ns},
                     {"max_ns", row.distribution.max_ns}});
  return json_response({{"start", start},
                        {"end", end},
                        {"duration_ns", end - start},
                        {"slice_count", inside},
                        {"name_count", name_count},
                        {"names", names}});
}

namespace {

// tracks=ID,ID,...: the area's tracks (absent or empty: every track with slices).
std::vector<trace::TrackId> area_tracks(const QueryParams& query, const TimelineIndex& timeline,
                                        const std::string& run_label) {
  std::vector<trace::TrackId> tracks;
  const std::string text = query.optional_string("tracks").value_or("");
  if (text.empty()) {
    for (trace::TrackId track = 0; track < timeline.track_count(); ++track)
      if (timeline.slice_count(track) > 0) tracks.push_back(track);
    return tracks;
  }
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t comma = text.find(',', begin);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(begin, comma - begin);
    uint64_t track = 0;
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), track);
    if (item.empty() || error != std::errc() || end != item.data() + item.size())
      throw ApiError(400, "query parameter 'tracks': '" + item +
                              "' is not a track id (give ids separated by commas)");
    if (track >= timeline.track_count())
      throw ApiError(404, "query parameter 'tracks': no track " + item + " in " + run_label +
                              " (it has " + std::to_string(timeline.track_count()) + ")");
    tracks.push_back(static_cast<trace::TrackId>(track));
    begin = comma + 1;
  }
  return tracks;
}

}  // namespace

ApiResponse handle_area(ApiContext& context, const PathParams& path, const QueryParams& query) {
  const auto [start, end] = query.required_time_range();
  const auto limit = static_cast<size_t>(query.int_or("limit", 100, 1, 100'000));
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  AreaQuery area{start, end, area_tracks(query, run->timeline(), run->label())};
  AreaSummary summary = summarize_area(trace, run->timeline(), area);
  nlohmann::json tracks = nlohmann::json::array();
  for (const AreaTrackRow& row : summary.tracks) {
    const trace::Track& track = trace.tracks[row.track];
    tracks.push_back({{"track", row.track},
                      {"name", trace.track_label(row.track)},
                      {"pid", track.pid},
                      {"tid", track.tid},
                      {"slice_count", row.slice_count},
                      {"busy_ns", row.busy_ns}});
  }
  const size_t name_count = summary.names.size();
  if (summary.names.size() > limit) summary.names.resize(limit);
  nlohmann::json names = nlohmann::json::array();
  for (const AreaNameRow& row : summary.names)
    names.push_back({{"name", trace.str(row.name)},
                     {"count", row.count},
                     {"wall_ns", row.wall_ns},
                     {"self_ns", row.self_ns},
                     {"average_ns", static_cast<double>(row.wall_ns) /
                                        static_cast<double>(std::max<uint64_t>(1, row.count))}});
  return json_response({{"start", start},
                        {"end", end},
                        {"duration_ns", end - start},
                        {"slice_count", summary.slice_count},
                        {"track_count", summary.tracks.size()},
                        {"tracks", tracks},
                        {"name_count", name_count},
                        {"names", names}});
}

}  // namespace opsight::server
