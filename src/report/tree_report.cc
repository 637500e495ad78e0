// The call tree: every root span and its descendants, box-drawn (HiQ's tree). A root on an
// async lane (an asyncio task...) is labelled with the lane's name: "handle [Task-3]".
// Spans that carry metrics show them: a last text column ("cpu 10.1 ms · rss +12.0 MiB"),
// a "metrics" object in JSON, a column per metric in CSV; a trace without metrics renders
// as it did before metrics existed. Flows (a task, a pool job, a child process handed work
// by a span) are shown on the span that received them; a root of another process than the
// recording's own says its pid ("child_main (pid 4242)"): "⇠ from submit_jobs [thread 12]",
// and in JSON as "from" (and "handed_off", the count of flows leaving a span); a last line
// counts the hand-offs and the ends whose other half is not in the trace.
#include <fmt/format.h>

#include "analyze/call_tree.hpp"
#include "analyze/metrics.hpp"
#include "analyze/statistics.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"
#include "schema/metric_names.hpp"

namespace opsight::report {

namespace {

using internal::Json;

// The roots the report shows and how many it leaves out.
struct ShownRoots {
  std::span<const trace::RowIndex> rows;
  size_t omitted = 0;
};

ShownRoots shown_roots(const analyze::CallForest& forest, size_t max_roots) {
  std::span<const trace::RowIndex> roots = forest.roots();
  if (max_roots == 0 || roots.size() <= max_roots) return {roots, 0};
  return {roots.first(max_roots), roots.size() - max_roots};
}

// A root's nodes in pre-order, cut at options.max_depth: each node kept says how many
// descendants were left out under it (those deeper than the cut).
struct ShownNode {
  analyze::CallTreeNode node;
  size_t descendants_omitted = 0;
};

std::vector<ShownNode> shown_nodes(const analyze::CallForest& forest, const trace::Trace& trace,
                                   trace::RowIndex root, size_t max_depth) {
  std::vector<ShownNode> shown;
  for (const analyze::CallTreeNode& node : forest.flatten(trace, root)) {
    if (max_depth != 0 && node.depth > max_depth) {
      if (!shown.empty()) ++shown.back().descendants_omitted;
      continue;
    }
    shown.push_back({node, 0});
    if (max_depth != 0 && node.depth == max_depth) shown.back().node.child_count = 0;
  }
  return shown;
}

// For each slice, the slice its first incoming flow came from, and how many flows leave it.
struct FlowIndex {
  std::vector<trace::RowIndex> from;
  std::vector<uint32_t> handed_off;

  explicit FlowIndex(const trace::Trace& trace) {
    if (trace.flows.size() == 0) return;
    from.assign(trace.slices.size(), trace::kNoRow);
    handed_off.assign(trace.slices.size(), 0);
    for (size_t row = 0; row < trace.flows.size(); ++row) {
      trace::RowIndex in = trace.flows.slice_in[row];
      if (from[in] == trace::kNoRow) from[in] = trace.flows.slice_out[row];
      ++handed_off[trace.flows.slice_out[row]];
    }
  }
  trace::RowIndex source_of(trace::RowIndex row) const {
    return row < from.size() ? from[row] : trace::kNoRow;
  }
  uint32_t handed_off_by(trace::RowIndex row) const {
    return row < handed_off.size() ? handed_off[row] : 0;
  }
};

std::string flow_source_label(const trace::Trace& trace, trace::RowIndex source) {
  trace::TrackId track = trace.slices.track[source];
  std::string label =
      internal::truncate_to_width(trace.str(trace.slices.name[source]), internal::kMaxNameWidth) +
      " [" + trace.track_label(track);
  if (track < trace.tracks.size() && trace.tracks[track].pid != trace.run.pid && trace.run.pid != 0)
    label += fmt::format(", pid {}", trace.tracks[track].pid);
  return label + "]";
}

std::string flows_line(const trace::Trace& trace) {
  const size_t open_ends = trace.unjoined_flow_ends();
  if (trace.flows.size() == 0 && open_ends == 0) return {};
  std::string line = fmt::format("links: {} hand-off{} (⇠ from the span that started the work)",
                                 trace.flows.size(), trace.flows.size() == 1 ? "" : "s");
  if (open_ends > 0) line += fmt::format(", {} without the other end in this trace", open_ends);
  return line + "\n";
}

std::string tree_text(const trace::Trace& trace, const ReportOptions& options) {
  std::string out = format_header_line("tree", trace, options) + "\n";
  analyze::CallForest forest = analyze::CallForest::build(trace);
  ShownRoots roots = shown_roots(forest, options.max_roots);
  if (roots.rows.empty()) {
    out += "no spans in this trace\n";
  } else {
    const int64_t trace_start = trace.time_bounds().first;
    const analyze::SliceMetricIndex metrics(trace);
    const FlowIndex flows(trace);
    using Align = internal::TextTable::Align;
    internal::TextTable table(
        {Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kLeft});
    if (metrics.empty())
      table.add_row({"span", "duration", "of parent", "start", "end"});
    else
      table.add_row({"span", "duration", "of parent", "start", "end", "metrics"});
    for (trace::RowIndex root : roots.rows) {
      internal::TreePrefixes prefixes;
      for (const ShownNode& shown : shown_nodes(forest, trace, root, options.max_depth)) {
        const analyze::CallTreeNode& node = shown.node;
        std::string label = prefixes.next(node.depth, node.child_count);
        label += internal::truncate_to_width(trace.str(trace.slices.name[node.row]),
                                             internal::kMaxNameWidth);
        if (shown.descendants_omitted > 0)
          label += fmt::format(" (+{} nested)", shown.descendants_omitted);
        trace::TrackId track = trace.slices.track[node.row];
        if (node.depth == 0 && track < trace.tracks.size() && trace.tracks[track].is_async())
          label += " [" +
                   internal::truncate_to_width(trace.track_label(track), internal::kMaxNameWidth) +
                   "]";
        if (node.depth == 0 && track < trace.tracks.size() && trace.run.pid != 0 &&
            trace.tracks[track].pid != trace.run.pid)
          label += fmt::format(" (pid {})", trace.tracks[track].pid);
        if (trace::RowIndex source = flows.source_of(node.row); source != trace::kNoRow)
          label += " ⇠ from " + flow_source_label(trace, source);
        table.add_row({std::move(label), format_duration(static_cast<double>(node.duration_ns)),
                       node.depth == 0 ? std::string() : format_share(node.share_of_parent),
                       format_duration(static_cast<double>(node.start_ns - trace_start)),
                       format_duration(static_cast<double>(node.end_ns - trace_start)),
                       internal::compact_metrics(metrics, metrics.readings_of(node.row))});
      }
    }
    table.render(out);
    if (roots.omitted > 0)
      out += fmt::format("… {} more root{}\n", roots.omitted, roots.omitted == 1 ? "" : "s");
    out += flows_line(trace);
  }
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

std::string tree_json(const trace::Trace& trace, const ReportOptions& options) {
  analyze::CallForest forest = analyze::CallForest::build(trace);
  ShownRoots roots = shown_roots(forest, options.max_roots);
  const int64_t trace_start = trace.time_bounds().first;
  Json document = Json::object();
  document["source"] = options.source_name;
  document["slice_count"] = trace.slices.size();
  document["trace_start_ns"] = trace_start;
  document["roots"] = Json::array();
  const analyze::SliceMetricIndex metrics(trace);
  const FlowIndex flows(trace);
  // Built iteratively from the pre-order sequence: arrays_by_depth[d] is the array that
  // receives nodes of depth d (the roots array, or the last node's "children").
  std::vector<Json*> arrays_by_depth;
  for (trace::RowIndex root : roots.rows) {
    arrays_by_depth.assign(1, &document["roots"]);
    for (const ShownNode& shown : shown_nodes(forest, trace, root, options.max_depth)) {
      const analyze::CallTreeNode& node = shown.node;
      Json entry = Json::object();
      entry["name"] = std::string(trace.str(trace.slices.name[node.row]));
      if (node.depth == 0) {
        trace::TrackId track = trace.slices.track[node.row];
        entry["track"] = trace.track_label(track);
        entry["async"] = track < trace.tracks.size() && trace.tracks[track].is_async();
      }
      if (trace::RowIndex source = flows.source_of(node.row); source != trace::kNoRow) {
        trace::TrackId track = trace.slices.track[source];
        entry["from"] = Json{{"name", std::string(trace.str(trace.slices.name[source]))},
                             {"track", trace.track_label(track)},
                             {"pid", track < trace.tracks.size() ? trace.tracks[track].pid : 0},
                             {"span_id", trace::span_id_to_hex(trace.slices.span_id[source])}};
      }
      if (uint32_t count = flows.handed_off_by(node.row); count > 0) entry["handed_off"] = count;
      entry["start_ns"] = node.start_ns - trace_start;
      entry["end_ns"] = node.end_ns - trace_start;
      entry["dur_ns"] = node.duration_ns;
      entry["self_ns"] = node.self_ns;
      if (node.depth == 0)
        entry["share_of_parent"] = nullptr;
      else
        entry["share_of_parent"] = node.share_of_parent;
      std::vector<analyze::MetricReading> readings = metrics.readings_of(node.row);
      if (!readings.empty()) {
        Json& values = entry["metrics"] = Json::object();
        for (const analyze::MetricReading& reading : readings)
          values[metrics.names()[reading.metric]] = internal::metric_json_value(reading);
      }
      entry["children"] = Json::array();
      if (shown.descendants_omitted > 0) entry["descendants_omitted"] = shown.descendants_omitted;
      Json& array = *arrays_by_depth[node.depth];
      array.push_back(std::move(entry));
      arrays_by_depth.resize(node.depth + 2);
      arrays_by_depth[node.depth + 1] = &array.back()["children"];
    }
  }
  document["roots_omitted"] = roots.omitted;
  document["flows"] = trace.flows.size();
  document["open_flow_ends"] = trace.unjoined_flow_ends();
  internal::add_overhead_fields(document, analyze::summarize_overhead(trace));
  return internal::dump_json(document);
}

std::string tree_csv(const trace::Trace& trace, const ReportOptions& options) {
  analyze::CallForest forest = analyze::CallForest::build(trace);
  ShownRoots roots = shown_roots(forest, options.max_roots);
  const int64_t trace_start = trace.time_bounds().first;
  const analyze::SliceMetricIndex metrics(trace);
  std::string out = "depth,path,start_ns,end_ns,dur_ns,self_ns,share_of_parent";
  for (const std::string& name : metrics.names())
    out += "," + csv_field(std::string(schema::kMetricArgPrefix) + name);
  out += "\r\n";
  std::vector<std::string> metric_cells(metrics.names().size());
  std::vector<std::string_view> path;
  for (trace::RowIndex root : roots.rows) {
    for (const ShownNode& shown : shown_nodes(forest, trace, root, options.max_depth)) {
      const analyze::CallTreeNode& node = shown.node;
      path.resize(node.depth);
      path.push_back(trace.str(trace.slices.name[node.row]));
      // The path names at most the last kMaxPathNames levels ("…/" before them), so the
      // output stays linear in the number of nodes however deep a broken trace nests.
      constexpr size_t kMaxPathNames = 32;
      std::string joined = path.size() > kMaxPathNames ? "…/" : "";
      joined += fmt::format(
          "{}", fmt::join(path.end() - static_cast<ptrdiff_t>(std::min(path.size(), kMaxPathNames)),
                          path.end(), "/"));
      out += fmt::format(
          "{},{},{},{},{},{},{}", node.depth, csv_field(joined), node.start_ns - trace_start,
          node.end_ns - trace_start, node.duration_ns, node.self_ns,
          node.depth == 0 ? std::string() : internal::csv_double(node.share_of_parent));
      if (!metric_cells.empty()) {
        std::fill(metric_cells.begin(), metric_cells.end(), std::string());
        for (const analyze::MetricReading& reading : metrics.readings_of(node.row))
          metric_cells[reading.metric] = internal::metric_csv_value(reading);
        out += fmt::format(",{}", fmt::join(metric_cells, ","));
      }
      out += "\r\n";
    }
  }
  return out;
}

}  // namespace

std::string render_tree(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    switch (options.format) {
      case OutputFormat::kJson:
        return tree_json(trace, options);
      case OutputFormat::kCsv:
        return tree_csv(trace, options);
      case OutputFormat::kText:
        break;
    }
    return tree_text(trace, options);
  });
}

}  // namespace opsight::report
