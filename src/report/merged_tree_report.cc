// The merged (aggregated) call tree: one node per code path, with its call count, calls per
// call of its parent, total and self time, share of its parent and duration percentiles.
#include <fmt/format.h>

#include "analyze/aggregate_tree.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

// Nodes shown: all, or those of the first options.max_roots roots.
size_t shown_node_count(const analyze::AggregateTree& tree, size_t max_roots, size_t* omitted) {
  *omitted = 0;
  if (max_roots == 0 || tree.roots().size() <= max_roots) return tree.nodes().size();
  *omitted = tree.roots().size() - max_roots;
  return tree.roots()[max_roots];  // pre-order: the next root's index ends the shown part
}

std::string merged_tree_text(const trace::Trace& trace, const ReportOptions& options,
                             const analyze::AggregateTree& tree,
                             const internal::TraceExtent& extent) {
  std::string out = internal::format_header_line("merged tree", options, extent);
  out +=
      fmt::format(", {} code path{}\n", tree.nodes().size(), tree.nodes().size() == 1 ? "" : "s");
  size_t omitted = 0;
  const size_t shown = shown_node_count(tree, options.max_roots, &omitted);
  if (shown == 0) {
    out += "no spans in this trace\n";
  } else {
    using Align = internal::TextTable::Align;
    std::vector<Align> alignments(11, Align::kRight);
    alignments[0] = Align::kLeft;
    internal::TextTable table(std::move(alignments));
    table.add_row({"span", "calls", "per parent", "total", "of parent", "self", "mean", "p50",
                   "p90", "p99", "max"});
    internal::TreePrefixes prefixes;
    for (size_t index = 0; index < shown; ++index) {
      const analyze::AggregateNode& node = tree.nodes()[index];
      std::string label =
          prefixes.next(node.depth, node.child_count) +
          internal::truncate_to_width(trace.str(node.name), internal::kMaxNameWidth);
      const bool root = node.parent == analyze::kNoNode;
      table.add_row({std::move(label), fmt::format("{}", node.duration.count),
                     root ? std::string() : fmt::format("{:.3g}", node.calls_per_parent_call),
                     format_duration(static_cast<double>(node.duration.total_ns)),
                     root ? std::string() : format_share(node.share_of_parent),
                     format_duration(static_cast<double>(node.self_ns)),
                     format_duration(node.duration.mean_ns), format_duration(node.duration.p50_ns),
                     format_duration(node.duration.p90_ns), format_duration(node.duration.p99_ns),
                     format_duration(static_cast<double>(node.duration.max_ns))});
    }
    table.render(out);
    if (omitted > 0) out += fmt::format("… {} more root{}\n", omitted, omitted == 1 ? "" : "s");
  }
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

// A flat list in pre-order: each node has its index's parent and depth, so consumers
// rebuild the tree without deep nesting in the document.
std::string merged_tree_json(const trace::Trace& trace, const ReportOptions& options,
                             const analyze::AggregateTree& tree,
                             const internal::TraceExtent& extent) {
  size_t omitted = 0;
  const size_t shown = shown_node_count(tree, options.max_roots, &omitted);
  Json document = Json::object();
  document["source"] = options.source_name;
  document["slice_count"] = extent.slice_count;
  Json nodes = Json::array();
  for (size_t index = 0; index < shown; ++index) {
    const analyze::AggregateNode& node = tree.nodes()[index];
    Json entry = Json::object();
    entry["name"] = std::string(trace.str(node.name));
    entry["category"] = std::string(trace.str(node.category));
    entry["depth"] = node.depth;
    if (node.parent == analyze::kNoNode)
      entry["parent"] = nullptr;
    else
      entry["parent"] = node.parent;
    entry["calls_per_parent_call"] = node.calls_per_parent_call;
    entry["share_of_parent"] = node.share_of_parent;
    entry["self_ns"] = node.self_ns;
    internal::add_distribution_fields(entry, node.duration);
    nodes.push_back(std::move(entry));
  }
  document["nodes"] = std::move(nodes);
  document["roots_omitted"] = omitted;
  internal::add_overhead_fields(document, analyze::summarize_overhead(trace));
  return internal::dump_json(document);
}

std::string merged_tree_csv(const trace::Trace& trace, const ReportOptions& options,
                            const analyze::AggregateTree& tree) {
  size_t omitted = 0;
  const size_t shown = shown_node_count(tree, options.max_roots, &omitted);
  std::string out =
      "index,parent,depth,name,count,calls_per_parent_call,total_ns,self_ns,share_of_parent,"
      "min_ns,mean_ns,p50_ns,p90_ns,p99_ns,max_ns\r\n";
  for (size_t index = 0; index < shown; ++index) {
    const analyze::AggregateNode& node = tree.nodes()[index];
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", index,
        node.parent == analyze::kNoNode ? std::string() : fmt::format("{}", node.parent),
        node.depth, csv_field(trace.str(node.name)), node.duration.count,
        internal::csv_double(node.calls_per_parent_call), node.duration.total_ns, node.self_ns,
        internal::csv_double(node.share_of_parent), node.duration.min_ns,
        internal::csv_number(node.duration.mean_ns), internal::csv_number(node.duration.p50_ns),
        internal::csv_number(node.duration.p90_ns), internal::csv_number(node.duration.p99_ns),
        node.duration.max_ns);
  }
  return out;
}

}  // namespace

std::string render_merged_tree(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    return internal::render_merged_tree_nodes(trace, analyze::AggregateTree::build(trace), options,
                                              internal::TraceExtent::of(trace));
  });
}

std::string internal::render_merged_tree_nodes(const trace::Trace& context,
                                               const analyze::AggregateTree& tree,
                                               const ReportOptions& options,
                                               const TraceExtent& extent) {
  switch (options.format) {
    case OutputFormat::kJson:
      return merged_tree_json(context, options, tree, extent);
    case OutputFormat::kCsv:
      return merged_tree_csv(context, options, tree);
    case OutputFormat::kText:
      break;
  }
  return merged_tree_text(context, options, tree, extent);
}

}  // namespace opsight::report
