// The kernel table (`opsight report --kernels`; the TensorBoard kernel pane and Qualcomm's
// op stats in one view): per GPU kernel name count, total, share of kernel time, mean,
// p50, p99, grid and block, and the operators that launch it; then copies and memsets by
// kind, the launch sites (kernel <- operator <- module <- source line), and a GPU summary
// (busy time, utilisation from the kernels, CUDA API time, unlinked launches and kernels).
// The figures are analyze::compute_kernel_table's (src/analyze/kernels.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "analyze/kernels.hpp"
#include "report/report.hpp"
#include "report/report_internal.hpp"

namespace opsight::report {

namespace {

using internal::Json;

// Launch sites shown per kernel in the text; JSON has them all.
constexpr size_t kTextLaunchSitesPerKernel = 5;

// A kernel's name as the text tables show it. The demangled names of templated kernels run
// to hundreds of characters and differ deep inside ("void at::native::
// vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(int, ...)"), so the
// text drops the return type "void ", the parameter list and the namespace qualifiers
// ("vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1> >") before it cuts
// the name to the column. JSON and CSV keep the full name.
std::string display_kernel_name(std::string_view name) {
  constexpr std::string_view kVoid = "void ";
  if (name.substr(0, kVoid.size()) == kVoid) name.remove_prefix(kVoid.size());
  if (!name.empty() && name.back() == ')') {
    int depth = 0;
    for (size_t index = name.size(); index-- > 0;) {
      if (name[index] == ')') ++depth;
      if (name[index] == '(' && --depth == 0) {
        if (index > 0) name = name.substr(0, index);
        break;
      }
    }
  }
  auto is_identifier = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  constexpr std::string_view kAnonymous = "(anonymous namespace)::";
  std::string shown;
  size_t index = 0;
  while (index < name.size()) {
    if (name.substr(index, kAnonymous.size()) == kAnonymous) {
      index += kAnonymous.size();
      continue;
    }
    if (!is_identifier(name[index])) {
      shown += name[index++];
      continue;
    }
    size_t end = index;
    while (end < name.size() && is_identifier(name[end])) ++end;
    const bool qualifier = name.substr(end, 2) == "::";
    if (!qualifier) shown += name.substr(index, end - index);
    index = qualifier ? end + 2 : end;
  }
  return shown.empty() ? std::string(name) : shown;
}

// Orders kernel rows by the report's sort key: total (default; also for "self", which a
// kernel does not have), count, mean, p99 (descending) or name (ascending); ties by name.
void sort_kernel_rows(std::vector<analyze::KernelRow>& rows, std::string_view key) {
  auto figure = [key](const analyze::KernelRow& row) -> double {
    if (key == "count") return static_cast<double>(row.duration.count);
    if (key == "mean") return row.duration.mean_ns;
    if (key == "p99") return row.duration.p99_ns;
    return static_cast<double>(row.duration.total_ns);
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const analyze::KernelRow& a, const analyze::KernelRow& b) {
                     if (key != "name" && figure(a) != figure(b)) return figure(a) > figure(b);
                     return a.name < b.name;
                   });
}

// "[128,1,1]", "[128,1,1] (+2 more)" when the kernel ran with several, "-" when unknown.
std::string launch_dimensions_cell(const std::string& most_common, uint64_t variants) {
  if (most_common.empty()) return "-";
  if (variants <= 1) return most_common;
  return fmt::format("{} (+{} more)", most_common, variants - 1);
}

// "aten::addmm (4)", "aten::addmm (4) +1 more", "(no operator) (2)", "-" with no launch.
std::string launched_by_cell(const analyze::KernelRow& row) {
  if (row.launched_by.empty()) return "-";
  // Sites differ by module and source too; the cell is about operators.
  std::vector<std::pair<std::string, uint64_t>> operators;
  for (const analyze::LaunchSite& site : row.launched_by) {
    auto found = std::find_if(operators.begin(), operators.end(),
                              [&](const auto& entry) { return entry.first == site.operator_name; });
    if (found == operators.end())
      operators.emplace_back(site.operator_name, site.count);
    else
      found->second += site.count;
  }
  std::stable_sort(operators.begin(), operators.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const std::string& top = operators[0].first;
  std::string cell =
      fmt::format("{} ({})", top.empty() ? "(no operator)" : internal::truncate_to_width(top, 40),
                  operators[0].second);
  if (operators.size() > 1) cell += fmt::format(" +{} more", operators.size() - 1);
  return cell;
}

std::string gigabytes_per_second_text(double value) {
  if (value >= 100.0) return fmt::format("{:.0f} GB/s", value);
  if (value >= 10.0) return fmt::format("{:.1f} GB/s", value);
  return fmt::format("{:.2f} GB/s", value);
}

// The GPU summary in two lines: busy time and utilisation per device, then the CUDA API's
// cost and the links that found no partner.
void gpu_summary_text(const analyze::KernelTable& table, std::string& out) {
  const analyze::GpuSummary& gpu = table.gpu;
  std::string devices;
  for (const analyze::GpuDeviceUsage& device : gpu.devices)
    devices +=
        fmt::format("{}GPU {}: busy {}, kernels {} ({} utilisation)", devices.empty() ? "" : "; ",
                    device.device, format_duration(static_cast<double>(device.busy_ns)),
                    format_duration(static_cast<double>(device.kernel_busy_ns)),
                    format_share(device.utilisation));
  out +=
      fmt::format("{} of {} traced\n", devices, format_duration(static_cast<double>(gpu.span_ns)));
  out += fmt::format(
      "CUDA API {} in {} call{} ({} kernel launch{} {}, {} synchronize {}); {} launch{} with no "
      "kernel, {} kernel{} with no launch\n",
      format_duration(static_cast<double>(gpu.cuda_api_ns)), gpu.cuda_api_calls,
      gpu.cuda_api_calls == 1 ? "" : "s", gpu.kernel_launches, gpu.kernel_launches == 1 ? "" : "es",
      format_duration(static_cast<double>(gpu.kernel_launch_ns)), gpu.synchronize_calls,
      format_duration(static_cast<double>(gpu.synchronize_ns)), gpu.launches_without_kernel,
      gpu.launches_without_kernel == 1 ? "" : "es", gpu.kernels_without_launch,
      gpu.kernels_without_launch == 1 ? "" : "s");
}

std::string kernels_text(const trace::Trace& trace, const ReportOptions& options,
                         const analyze::KernelTable& table, size_t shown) {
  std::string out = format_header_line("kernels", trace, options) + "\n";
  if (table.kernels.empty() && table.copies.empty()) {
    out += "no GPU kernels in this trace: record with a GPU session (docs/gpu.md)\n";
    out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
    return out;
  }
  out += fmt::format("{} kernel{}, {} name{}, {} of kernel time\n", table.kernel_slices,
                     table.kernel_slices == 1 ? "" : "s", table.kernels.size(),
                     table.kernels.size() == 1 ? "" : "s",
                     format_duration(static_cast<double>(table.kernel_ns)));
  gpu_summary_text(table, out);
  using Align = internal::TextTable::Align;

  if (!table.kernels.empty()) {
    std::vector<Align> alignments(10, Align::kRight);
    alignments[0] = Align::kLeft;
    alignments[7] = alignments[8] = alignments[9] = Align::kLeft;
    internal::TextTable kernel_table(std::move(alignments));
    kernel_table.add_row({"kernel", "count", "total", "share", "mean", "p50", "p99", "grid",
                          "block", "launched by"});
    for (size_t index = 0; index < shown; ++index) {
      const analyze::KernelRow& row = table.kernels[index];
      kernel_table.add_row(
          {internal::truncate_to_width(display_kernel_name(row.name), internal::kMaxNameWidth),
           fmt::format("{}", row.duration.count),
           format_duration(static_cast<double>(row.duration.total_ns)), format_share(row.share),
           format_duration(row.duration.mean_ns), format_duration(row.duration.p50_ns),
           format_duration(row.duration.p99_ns),
           launch_dimensions_cell(row.grid, row.grid_variants),
           launch_dimensions_cell(row.block, row.block_variants), launched_by_cell(row)});
    }
    kernel_table.render(out);
    if (shown < table.kernels.size())
      out += fmt::format("… {} more kernels\n", table.kernels.size() - shown);
  }

  if (!table.copies.empty()) {
    out += "\ncopies and memsets\n";
    std::vector<Align> alignments(5, Align::kRight);
    alignments[0] = Align::kLeft;
    internal::TextTable copy_table(std::move(alignments));
    copy_table.add_row({"kind", "count", "bytes", "total", "bandwidth"});
    for (const analyze::CopyRow& copy : table.copies)
      copy_table.add_row({copy.kind, fmt::format("{}", copy.count),
                          format_bytes(static_cast<double>(copy.bytes)),
                          format_duration(static_cast<double>(copy.total_ns)),
                          gigabytes_per_second_text(copy.gigabytes_per_second)});
    copy_table.render(out);
  }

  bool any_site = false;
  for (size_t index = 0; index < shown; ++index)
    any_site = any_site || !table.kernels[index].launched_by.empty();
  if (any_site) {
    out += "\nlaunch sites (kernel <- operator <- module <- Python source)\n";
    std::vector<Align> alignments(6, Align::kLeft);
    alignments[1] = alignments[2] = Align::kRight;
    internal::TextTable site_table(std::move(alignments));
    site_table.add_row({"kernel", "count", "total", "operator", "module", "source"});
    for (size_t index = 0; index < shown; ++index) {
      const analyze::KernelRow& row = table.kernels[index];
      const size_t sites = std::min(row.launched_by.size(), kTextLaunchSitesPerKernel);
      for (size_t site_index = 0; site_index < sites; ++site_index) {
        const analyze::LaunchSite& site = row.launched_by[site_index];
        const std::string& source = !site.source.empty() ? site.source : site.python_function;
        site_table.add_row(
            {site_index == 0 ? internal::truncate_to_width(display_kernel_name(row.name),
                                                           internal::kMaxNameWidth)
                             : "",
             fmt::format("{}", site.count), format_duration(static_cast<double>(site.total_ns)),
             site.operator_name.empty() ? "-" : internal::truncate_to_width(site.operator_name, 40),
             site.module_name.empty() ? "-" : internal::truncate_to_width(site.module_name, 40),
             source.empty() ? "-" : internal::truncate_to_width(source, internal::kMaxNameWidth)});
      }
      if (row.launched_by.size() > sites)
        site_table.add_row(
            {"", "", "", fmt::format("… {} more sites", row.launched_by.size() - sites), "", ""});
    }
    site_table.render(out);
  }
  out += format_overhead_line(analyze::summarize_overhead(trace)) + "\n";
  return out;
}

Json gpu_summary_json(const analyze::GpuSummary& gpu) {
  Json summary = Json::object();
  Json devices = Json::array();
  for (const analyze::GpuDeviceUsage& device : gpu.devices) {
    Json entry = Json::object();
    entry["device"] = device.device;
    entry["kernels"] = device.kernels;
    entry["kernel_busy_ns"] = device.kernel_busy_ns;
    entry["busy_ns"] = device.busy_ns;
    entry["utilisation"] = device.utilisation;
    devices.push_back(std::move(entry));
  }
  summary["devices"] = std::move(devices);
  summary["span_ns"] = gpu.span_ns;
  summary["busy_ns"] = gpu.busy_ns;
  summary["kernel_busy_ns"] = gpu.kernel_busy_ns;
  summary["utilisation"] = gpu.utilisation;
  summary["cuda_api_calls"] = gpu.cuda_api_calls;
  summary["cuda_api_ns"] = gpu.cuda_api_ns;
  summary["kernel_launches"] = gpu.kernel_launches;
  summary["kernel_launch_ns"] = gpu.kernel_launch_ns;
  summary["synchronize_calls"] = gpu.synchronize_calls;
  summary["synchronize_ns"] = gpu.synchronize_ns;
  summary["launches_without_kernel"] = gpu.launches_without_kernel;
  summary["kernels_without_launch"] = gpu.kernels_without_launch;
  return summary;
}

std::string kernels_json(const trace::Trace& trace, const ReportOptions& options,
                         const analyze::KernelTable& table, size_t shown) {
  Json document = Json::object();
  document["source"] = options.source_name;
  document["kernel_slices"] = table.kernel_slices;
  document["kernel_ns"] = table.kernel_ns;
  Json kernels = Json::array();
  for (size_t index = 0; index < shown; ++index) {
    const analyze::KernelRow& row = table.kernels[index];
    Json entry = Json::object();
    entry["name"] = row.name;
    entry["share"] = row.share;
    internal::add_distribution_fields(entry, row.duration);
    entry["grid"] = row.grid;
    entry["grid_variants"] = row.grid_variants;
    entry["block"] = row.block;
    entry["block_variants"] = row.block_variants;
    Json sites = Json::array();
    for (const analyze::LaunchSite& site : row.launched_by) {
      Json site_entry = Json::object();
      site_entry["operator"] = site.operator_name;
      site_entry["module"] = site.module_name;
      site_entry["python"] = site.python_function;
      site_entry["source"] = site.source;
      site_entry["count"] = site.count;
      site_entry["total_ns"] = site.total_ns;
      sites.push_back(std::move(site_entry));
    }
    entry["launched_by"] = std::move(sites);
    entry["without_launch"] = row.without_launch;
    kernels.push_back(std::move(entry));
  }
  document["kernels"] = std::move(kernels);
  document["kernels_omitted"] = table.kernels.size() - shown;
  Json copies = Json::array();
  for (const analyze::CopyRow& copy : table.copies) {
    Json entry = Json::object();
    entry["kind"] = copy.kind;
    entry["count"] = copy.count;
    entry["bytes"] = copy.bytes;
    entry["total_ns"] = copy.total_ns;
    entry["gigabytes_per_second"] = copy.gigabytes_per_second;
    copies.push_back(std::move(entry));
  }
  document["copies"] = std::move(copies);
  document["gpu"] = gpu_summary_json(table.gpu);
  internal::add_overhead_fields(document, analyze::summarize_overhead(trace));
  return internal::dump_json(document);
}

// One row per kernel name; the operator column is that of its most frequent launch site.
// Copies and the GPU summary are in the JSON form.
std::string kernels_csv(const analyze::KernelTable& table, size_t shown) {
  std::string out =
      "name,count,total_ns,share,mean_ns,min_ns,p50_ns,p99_ns,max_ns,grid,grid_variants,block,"
      "block_variants,operator,without_launch\r\n";
  for (size_t index = 0; index < shown; ++index) {
    const analyze::KernelRow& row = table.kernels[index];
    const std::string top_operator =
        row.launched_by.empty() ? std::string() : row.launched_by[0].operator_name;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", csv_field(row.name),
                       row.duration.count, row.duration.total_ns, internal::csv_double(row.share),
                       internal::csv_number(row.duration.mean_ns), row.duration.min_ns,
                       internal::csv_number(row.duration.p50_ns),
                       internal::csv_number(row.duration.p99_ns), row.duration.max_ns,
                       csv_field(row.grid), row.grid_variants, csv_field(row.block),
                       row.block_variants, csv_field(top_operator), row.without_launch);
  }
  return out;
}

}  // namespace

std::string render_kernels(const trace::Trace& trace, const ReportOptions& options) {
  return internal::render_guarded([&] {
    analyze::KernelTable table = analyze::compute_kernel_table(trace);
    sort_kernel_rows(table.kernels, options.sort);
    const size_t shown =
        options.limit > 0 ? std::min(options.limit, table.kernels.size()) : table.kernels.size();
    switch (options.format) {
      case OutputFormat::kJson:
        return kernels_json(trace, options, table, shown);
      case OutputFormat::kCsv:
        return kernels_csv(table, shown);
      case OutputFormat::kText:
        break;
    }
    return kernels_text(trace, options, table, shown);
  });
}

}  // namespace opsight::report
