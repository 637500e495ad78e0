// The per-inference breakdown (Qualcomm's system-level split): one row per phase of the
// span that marks an inference, with mean, min, p50, p75, p90, p95, p99 and max over the
// inferences, the share of the mean inference, and inferences per second; in a trace with
// GPU work, the host/device split of each inference after it (analyze/kernels.hpp).
#include <fmt/format.h>

#include <optional>

#include "analyze/breakdown.hpp"
#include "analyze/kernels.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

std::vector<std::string> percentile_cells(const analyze::Distribution& distribution) {
  return {format_duration(distribution.mean_ns),
          format_duration(static_cast<double>(distribution.min_ns)),
          format_duration(distribution.p50_ns),
          format_duration(distribution.p75_ns),
          format_duration(distribution.p90_ns),
          format_duration(distribution.p95_ns),
          format_duration(distribution.p99_ns),
          format_duration(static_cast<double>(distribution.max_ns))};
}

// The host/device split's figures in display order: the text label, the JSON key and the
// CSV phase name of each.
struct HostDeviceRow {
  std::string_view label;
  std::string_view key;
  std::string_view csv_phase;
  const analyze::HostDeviceFigure& figure;
};

std::vector<HostDeviceRow> host_device_rows(const analyze::HostDeviceSplit& split) {
  return {
      {"host (the span)", "host", "(host)", split.host},
      {"launch overhead (CUDA API)", "launch_overhead", "(launch overhead)", split.launch_overhead},
      {"synchronize (waiting for the GPU)", "synchronize", "(synchronize)", split.synchronize},
      {"GPU busy", "gpu_busy", "(GPU busy)", split.gpu_busy},
      {"GPU idle gaps", "gpu_idle", "(GPU idle gaps)", split.gpu_idle},
      {"HtoD copies", "host_to_device", "(HtoD copies)", split.host_to_device},
      {"DtoH copies", "device_to_host", "(DtoH copies)", split.device_to_host}};
}

double share_of_host(const analyze::HostDeviceSplit& split,
                     const analyze::HostDeviceFigure& figure) {
  const double host_mean = split.host.per_inference.mean_ns;
  return host_mean > 0 ? figure.per_inference.mean_ns / host_mean : 0.0;
}

// The host/device split of a trace with GPU work (docs/reports.md), after the phases.
void host_device_text(const analyze::HostDeviceSplit& split, std::string& out) {
  out += fmt::format(
      "\nhost and device per inference ({} of {} launched GPU work; GPU work counts for the "
      "inference its launch is nested in)\n",
      split.inferences_with_gpu_work, split.inference_count);
  using Align = internal::TextTable::Align;
  std::vector<Align> alignments(11, Align::kRight);
  alignments[0] = Align::kLeft;
  internal::TextTable table(std::move(alignments));
  table.add_row(
      {"figure", "in", "mean", "min", "p50", "p75", "p90", "p95", "p99", "max", "of host"});
  for (const HostDeviceRow& row : host_device_rows(split)) {
    std::vector<std::string> cells = {std::string(row.label),
                                      fmt::format("{}", row.figure.present_in)};
    for (std::string& cell : percentile_cells(row.figure.per_inference))
      cells.push_back(std::move(cell));
    cells.push_back(format_share(share_of_host(split, row.figure)));
    table.add_row(std::move(cells));
  }
  table.render(out);
}

std::string breakdown_text(const trace::Trace& trace, const ReportOptions& options,
                           const analyze::Breakdown& breakdown,
                           const std::optional<analyze::HostDeviceSplit>& split,
                           const internal::TraceExtent& extent) {
  std::string out = internal::format_header_line("breakdown", options, extent) + "\n";
  if (breakdown.inference_count == 0) {
    out +=
        fmt::format("no span named '{}' in this trace (see opsight report --summary for names)\n",
                    breakdown.span_name);
    out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
    return out;
  }
  out += fmt::format("{} inference{} of '{}', {:.1f} inferences/s over {}; phases by child {}\n",
                     breakdown.inference_count, breakdown.inference_count == 1 ? "" : "s",
                     breakdown.span_name, breakdown.inferences_per_second,
                     format_duration(static_cast<double>(breakdown.wall_ns)),
                     options.breakdown_by_category ? "category" : "name");
  using Align = internal::TextTable::Align;
  std::vector<Align> alignments(11, Align::kRight);
  alignments[0] = Align::kLeft;
  internal::TextTable table(std::move(alignments));
  table.add_row(
      {"phase", "in", "mean", "min", "p50", "p75", "p90", "p95", "p99", "max", "of mean"});
  auto add = [&table](std::string name, uint64_t present_in, const analyze::Distribution& values,
                      double share) {
    std::vector<std::string> cells = {std::move(name), fmt::format("{}", present_in)};
    for (std::string& cell : percentile_cells(values)) cells.push_back(std::move(cell));
    cells.push_back(format_share(share));
    table.add_row(std::move(cells));
  };
  for (const analyze::BreakdownPhase& phase : breakdown.phases)
    add(internal::truncate_to_width(phase.name, internal::kMaxNameWidth), phase.present_in,
        phase.per_inference, phase.share_of_total);
  add("total (" + internal::truncate_to_width(breakdown.span_name, internal::kMaxNameWidth) + ")",
      breakdown.inference_count, breakdown.total, 1.0);
  table.render(out);
  out +=
      "each phase: its time per inference (0 where an inference lacks it); the means add up "
      "to the total's\n";
  if (split) host_device_text(*split, out);
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

std::string breakdown_json(const trace::Trace& trace, const ReportOptions& options,
                           const analyze::Breakdown& breakdown,
                           const std::optional<analyze::HostDeviceSplit>& split) {
  Json document = Json::object();
  document["source"] = options.source_name;
  document["span"] = breakdown.span_name;
  document["grouping"] = options.breakdown_by_category ? "category" : "name";
  document["inference_count"] = breakdown.inference_count;
  document["inferences_per_second"] = breakdown.inferences_per_second;
  document["wall_ns"] = breakdown.wall_ns;
  Json total = Json::object();
  internal::add_distribution_fields(total, breakdown.total);
  document["total"] = std::move(total);
  Json phases = Json::array();
  for (const analyze::BreakdownPhase& phase : breakdown.phases) {
    Json entry = Json::object();
    entry["phase"] = phase.name;
    entry["uncovered"] = phase.uncovered;
    entry["present_in"] = phase.present_in;
    entry["slices"] = phase.slices;
    entry["share_of_mean"] = phase.share_of_total;
    internal::add_distribution_fields(entry, phase.per_inference);
    phases.push_back(std::move(entry));
  }
  document["phases"] = std::move(phases);
  if (split) {
    Json host_device = Json::object();
    host_device["inferences_with_gpu_work"] = split->inferences_with_gpu_work;
    for (const HostDeviceRow& row : host_device_rows(*split)) {
      Json entry = Json::object();
      entry["present_in"] = row.figure.present_in;
      entry["share_of_host"] = share_of_host(*split, row.figure);
      internal::add_distribution_fields(entry, row.figure.per_inference);
      host_device[std::string(row.key)] = std::move(entry);
    }
    document["host_device"] = std::move(host_device);
  }
  internal::add_overhead_fields(document, analyze::summarize_overhead(trace));
  return internal::dump_json(document);
}

std::string breakdown_csv(const analyze::Breakdown& breakdown,
                          const std::optional<analyze::HostDeviceSplit>& split) {
  std::string out =
      "phase,present_in,mean_ns,min_ns,p50_ns,p75_ns,p90_ns,p95_ns,p99_ns,max_ns,share_of_mean\r\n";
  auto add = [&out](std::string_view name, uint64_t present_in, const analyze::Distribution& d,
                    double share) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\r\n", csv_field(name), present_in,
                       internal::csv_number(d.mean_ns), d.min_ns, internal::csv_number(d.p50_ns),
                       internal::csv_number(d.p75_ns), internal::csv_number(d.p90_ns),
                       internal::csv_number(d.p95_ns), internal::csv_number(d.p99_ns), d.max_ns,
                       internal::csv_double(share));
  };
  for (const analyze::BreakdownPhase& phase : breakdown.phases)
    add(phase.name, phase.present_in, phase.per_inference, phase.share_of_total);
  if (breakdown.inference_count > 0)
    add("(total)", breakdown.inference_count, breakdown.total, 1.0);
  if (split)  // the host is the total, so the share column is still a share of the mean
    for (const HostDeviceRow& row : host_device_rows(*split))
      add(row.csv_phase, row.figure.present_in, row.figure.per_inference,
          share_of_host(*split, row.figure));
  return out;
}

}  // namespace

std::string render_breakdown(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    analyze::Breakdown breakdown = analyze::compute_breakdown(
        trace, options.breakdown_span,
        options.breakdown_by_category ? analyze::PhaseGrouping::kChildCategory
                                      : analyze::PhaseGrouping::kChildName);
    // Only a trace with GPU work gets the host/device split: a CPU trace's breakdown stays
    // exactly what it was.
    std::optional<analyze::HostDeviceSplit> split;
    if (breakdown.inference_count > 0 && analyze::has_gpu_work(trace))
      split = analyze::compute_host_device_split(
          trace, analyze::inference_slices(trace, options.breakdown_span));
    return internal::render_breakdown_result(trace, breakdown, split, options,
                                             internal::TraceExtent::of(trace));
  });
}

std::string internal::render_breakdown_result(const trace::Trace& context,
                                              const analyze::Breakdown& breakdown,
                                              const std::optional<analyze::HostDeviceSplit>& split,
                                              const ReportOptions& options,
                                              const TraceExtent& extent) {
  switch (options.format) {
    case OutputFormat::kJson:
      return breakdown_json(context, options, breakdown, split);
    case OutputFormat::kCsv:
      return breakdown_csv(breakdown, split);
    case OutputFormat::kText:
      break;
  }
  return breakdown_text(context, options, breakdown, split, extent);
}

}  // namespace opsight::report
