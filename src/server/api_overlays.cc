// What the UI draws over and beside the timeline's tiles: /api/runs/{run}/marks (the flows
// and instants of a time window, for arrows and markers), /critical_path_slices (the slices
// on the critical path, analyze::compute_critical_path's steps, to outline them) and
// /inferences (each single inference of a breakdown with its phases' times, through
// analyze::compute_breakdown, so the bars add up to the report's means).
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "analyze/breakdown.hpp"
#include "analyze/critical_path.hpp"
#include "server/api_internal.hpp"

namespace opsight::server {
namespace {

const char* scope_name(trace::InstantScope scope) {
  switch (scope) {
    case trace::InstantScope::kThread:
      return "thread";
    case trace::InstantScope::kProcess:
      return "process";
    case trace::InstantScope::kGlobal:
      return "global";
  }
  return "thread";
}

}  // namespace

ApiResponse handle_marks(ApiContext& context, const PathParams& path, const QueryParams& query) {
  const auto [start, end] = query.required_time_range();
  const auto limit = static_cast<size_t>(query.int_or("limit", 5000, 1, 100'000));
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  const trace::SliceTable& slices = trace.slices;

  // Instants inside the window, in time order: [ts, name index, track, scope, pid].
  std::vector<trace::RowIndex> instants;
  for (trace::RowIndex row = 0; row < trace.instants.size(); ++row)
    if (trace.instants.ts[row] >= start && trace.instants.ts[row] <= end) instants.push_back(row);
  std::stable_sort(instants.begin(), instants.end(),
                   [&](auto a, auto b) { return trace.instants.ts[a] < trace.instants.ts[b]; });
  const size_t instant_total = instants.size();
  if (instants.size() > limit) instants.resize(limit);
  std::unordered_map<trace::StringId, size_t> name_index;
  nlohmann::json names = nlohmann::json::array();
  auto name_of = [&](trace::StringId name) {
    auto [found, added] = name_index.try_emplace(name, names.size());
    if (added) names.push_back(trace.str(name));
    return found->second;
  };
  nlohmann::json instant_items = nlohmann::json::array();
  for (trace::RowIndex row : instants) {
    trace::TrackId track = trace.instants.track[row];
    int64_t pid = track < trace.tracks.size() ? trace.tracks[track].pid : 0;
    instant_items.push_back({trace.instants.ts[row], name_of(trace.instants.name[row]), track,
                             scope_name(trace.instants.scope[row]), pid});
  }

  // Flows whose arrow crosses the window (it leaves the end of its source slice and
  // arrives at the start of its destination):
  // [from row, from ts, from track, from depth, to row, to ts, to track, to depth, name index].
  nlohmann::json flow_items = nlohmann::json::array();
  size_t flow_total = 0;
  for (size_t flow = 0; flow < trace.flows.size(); ++flow) {
    const trace::RowIndex from = trace.flows.slice_out[flow], to = trace.flows.slice_in[flow];
    if (from >= slices.size() || to >= slices.size()) continue;
    const int64_t from_ts = slices.end(from), to_ts = slices.ts[to];
    if (std::max(from_ts, to_ts) < start || std::min(from_ts, to_ts) > end) continue;
    ++flow_total;
    if (flow_items.size() >= limit) continue;
    flow_items.push_back({from, from_ts, slices.track[from], slices.depth[from], to, to_ts,
                          slices.track[to], slices.depth[to], name_of(trace.flows.name[flow])});
  }
  return json_response({{"start", start},
                        {"end", end},
                        {"names", names},
                        {"instants", instant_items},
                        {"instant_total", instant_total},
                        {"flows", flow_items},
                        {"flow_total", flow_total}});
}

ApiResponse handle_critical_path_slices(ApiContext& context, const PathParams& path,
                                        const QueryParams& query) {
  const auto limit = static_cast<size_t>(query.int_or("limit", 100'000, 1, 1'000'000));
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  analyze::CriticalPath critical = analyze::compute_critical_path(trace);
  // [row, ts, dur, track, depth, on path ns] per step, depth-first in time order.
  nlohmann::json steps = nlohmann::json::array();
  for (const analyze::CriticalStep& step : critical.steps) {
    if (steps.size() >= limit) break;
    steps.push_back({step.row, trace.slices.ts[step.row], trace.slices.dur[step.row],
                     trace.slices.track[step.row], trace.slices.depth[step.row], step.on_path_ns});
  }
  nlohmann::json roots = nlohmann::json::array();
  for (trace::RowIndex row : critical.roots) roots.push_back(row);
  return json_response({{"start_ns", critical.start_ns},
                        {"end_ns", critical.end_ns},
                        {"length_ns", critical.length_ns},
                        {"idle_ns", critical.idle_ns},
                        {"roots", roots},
                        {"step_count", critical.steps.size()},
                        {"steps", steps}});
}

ApiResponse handle_inferences(ApiContext& context, const PathParams& path,
                              const QueryParams& query) {
  const std::string span = query.required_string("span");
  const std::string by = query.string_or("by", "name");
  if (by != "name" && by != "category")
    throw ApiError(400, "query parameter 'by': '" + by + "' is not name or category");
  const auto limit = static_cast<size_t>(query.int_or("limit", 2000, 1, 100'000));
  auto run = context.load_run(path.at(0));
  const trace::Trace& trace = run->trace();
  analyze::BreakdownSamples samples;
  analyze::Breakdown breakdown = analyze::compute_breakdown(
      trace, span,
      by == "name" ? analyze::PhaseGrouping::kChildName : analyze::PhaseGrouping::kChildCategory,
      &samples);
  if (breakdown.inference_count == 0)
    throw ApiError(404, "no span named '" + span + "' in " + run->label());
  nlohmann::json phases = nlohmann::json::array();
  for (const analyze::BreakdownPhase& phase : breakdown.phases) phases.push_back(phase.name);
  // [row, ts, dur, phase values...] per inference, in time order.
  nlohmann::json inferences = nlohmann::json::array();
  for (size_t index = 0; index < samples.inferences.size() && index < limit; ++index) {
    const trace::RowIndex row = samples.inferences[index];
    nlohmann::json values = nlohmann::json::array();
    for (const auto& phase_values : samples.phase_values) values.push_back(phase_values[index]);
    inferences.push_back({{"row", row},
                          {"ts", trace.slices.ts[row]},
                          {"dur", trace.slices.dur[row]},
                          {"phases", values}});
  }
  return json_response({{"span", span},
                        {"grouping", by},
                        {"inference_count", breakdown.inference_count},
                        {"phases", phases},
                        {"inferences", inferences}});
}

}  // namespace opsight::server
