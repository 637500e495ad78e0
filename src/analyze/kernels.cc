#include "analyze/kernels.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "trace/categories.hpp"
#include "trace/gpu_tracks.hpp"

namespace opsight::analyze {

namespace {

// The interned ids of the categories and argument keys the GPU analyses look for; an id
// the trace never interned is nullopt (no slice can carry it).
struct GpuVocabulary {
  std::optional<trace::StringId> kernel, memcpy, memset, graph, runtime, operator_category, module,
      python;
  std::optional<trace::StringId> device_key, grid_key, block_key, bytes_key, kind_key;
  std::optional<trace::StringId> correlation_id_key, correlation_key;

  explicit GpuVocabulary(const trace::Trace& trace) {
    const trace::StringTable& strings = trace.strings;
    kernel = strings.find(trace::kCategoryGpuKernel);
    memcpy = strings.find(trace::kCategoryGpuMemcpy);
    memset = strings.find(trace::kCategoryGpuMemset);
    graph = strings.find(trace::kCategoryGpuGraph);
    runtime = strings.find(trace::kCategoryCudaRuntime);
    operator_category = strings.find(trace::kCategoryOperator);
    module = strings.find(trace::kCategoryModule);
    python = strings.find(trace::kCategoryPython);
    device_key = strings.find(trace::kGpuArgDevice);
    grid_key = strings.find(trace::kGpuArgGrid);
    block_key = strings.find(trace::kGpuArgBlock);
    bytes_key = strings.find(trace::kGpuArgBytes);
    kind_key = strings.find(trace::kGpuArgCopyKind);
    correlation_id_key = strings.find(trace::kGpuArgCorrelationId);  // opsight (docs/gpu.md)
    correlation_key = strings.find("correlation");                   // PyTorch profiler
  }

  static bool is(std::optional<trace::StringId> id, trace::StringId value) {
    return id && *id == value;
  }
  std::optional<GpuWorkKind> gpu_kind(trace::StringId category) const {
    if (is(kernel, category)) return GpuWorkKind::kKernel;
    if (is(memcpy, category)) return GpuWorkKind::kMemcpy;
    if (is(memset, category)) return GpuWorkKind::kMemset;
    return std::nullopt;
  }
  bool any_gpu_category() const { return kernel || memcpy || memset; }
};

// The value of argument `key` of slice `row`, or nullptr.
const trace::ArgValue* find_slice_arg(const trace::Trace& trace, trace::RowIndex row,
                                      std::optional<trace::StringId> key) {
  if (!key || size_t{row} + 1 >= trace.slices.args_begin.size()) return nullptr;
  for (trace::RowIndex arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1];
       ++arg)
    if (trace.slice_args.key[arg] == *key) return &trace.slice_args.value[arg];
  return nullptr;
}

std::optional<int64_t> int_arg(const trace::Trace& trace, trace::RowIndex row,
                               std::optional<trace::StringId> key) {
  const trace::ArgValue* value = find_slice_arg(trace, row, key);
  if (value == nullptr) return std::nullopt;
  if (value->type == trace::ArgType::kInt) return value->int_value;
  if (value->type == trace::ArgType::kDouble) return static_cast<int64_t>(value->double_value);
  return std::nullopt;
}

std::optional<int64_t> correlation_of(const trace::Trace& trace, const GpuVocabulary& vocabulary,
                                      trace::RowIndex row) {
  if (auto id = int_arg(trace, row, vocabulary.correlation_id_key)) return id;
  return int_arg(trace, row, vocabulary.correlation_key);
}

// A launch configuration as the trace wrote it ("[128,1,1]": opsight's text, PyTorch's
// array kept as compact JSON text by the reader); 0 (the empty string) when absent.
trace::StringId launch_dimensions(const trace::Trace& trace, trace::RowIndex row,
                                  std::optional<trace::StringId> key) {
  const trace::ArgValue* value = find_slice_arg(trace, row, key);
  return value != nullptr && value->type == trace::ArgType::kString ? value->string_value : 0;
}

int64_t device_of(const trace::Trace& trace, const GpuVocabulary& vocabulary, trace::RowIndex row) {
  if (auto device = int_arg(trace, row, vocabulary.device_key)) return *device;
  const trace::Track& track = trace.tracks[trace.slices.track[row]];
  // opsight's GPU stream tracks: async_key = (1 << 62) | device << 32 | stream.
  constexpr uint64_t kGpuStreamTrackBit = uint64_t{1} << 62;
  if (track.kind == trace::TrackKind::kAsync && (track.async_key >> 62) == 1)
    return static_cast<int64_t>((track.async_key & ~kGpuStreamTrackBit) >> 32);
  return track.pid;
}

// Sorts `intervals` and returns the length of their union.
int64_t union_length(std::vector<std::pair<int64_t, int64_t>>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t length = 0;
  bool open = false;
  int64_t begin = 0, end = 0;
  for (const auto& [start, finish] : intervals) {
    if (open && start <= end) {
      end = std::max(end, finish);
      continue;
    }
    if (open) add_saturating(length, end - begin);
    begin = start;
    end = finish;
    open = true;
  }
  if (open) add_saturating(length, end - begin);
  return length;
}

// "torch/nn/modules/linear.py(125): forward" -> "torch/nn/modules/linear.py:125"; "" when
// the name does not say where it is.
std::string source_of_python_name(std::string_view name) {
  const size_t close = name.find("): ");
  if (close == std::string_view::npos) return {};
  const size_t open = name.rfind('(', close);
  if (open == std::string_view::npos || open == 0 || open + 1 == close) return {};
  std::string_view digits = name.substr(open + 1, close - open - 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {};
  return std::string(name.substr(0, open)) + ":" + std::string(digits);
}

// The code that was open where a launch happened: the names of the nearest operator,
// module and Python slice above it, and of the nearest Python slice that names its source.
struct LaunchContext {
  trace::StringId operator_name = 0, module_name = 0, python_function = 0, python_with_source = 0;
  auto key() const {
    return std::array<trace::StringId, 4>{operator_name, module_name, python_function,
                                          python_with_source};
  }
};

LaunchContext launch_context(const trace::Trace& trace, const GpuVocabulary& vocabulary,
                             trace::RowIndex launch) {
  LaunchContext context;
  const trace::SliceTable& slices = trace.slices;
  for (trace::RowIndex row = launch; row != trace::kNoRow; row = slices.parent[row]) {
    const trace::StringId category = slices.category[row];
    const trace::StringId name = slices.name[row];
    if (context.operator_name == 0 && GpuVocabulary::is(vocabulary.operator_category, category))
      context.operator_name = name;
    else if (context.module_name == 0 && GpuVocabulary::is(vocabulary.module, category))
      context.module_name = name;
    else if (GpuVocabulary::is(vocabulary.python, category)) {
      if (context.python_function == 0) context.python_function = name;
      if (context.python_with_source == 0 && !source_of_python_name(trace.str(name)).empty())
        context.python_with_source = name;
    }
  }
  return context;
}

// Counts of the distinct values of one argument, in first-seen order.
struct ValueCounts {
  std::vector<std::pair<trace::StringId, uint64_t>> counts;
  void add(trace::StringId value) {
    if (value == 0) return;
    for (auto& [seen, count] : counts)
      if (seen == value) {
        ++count;
        return;
      }
    counts.emplace_back(value, 1);
  }
  trace::StringId most_common() const {
    trace::StringId best = 0;
    uint64_t best_count = 0;
    for (const auto& [value, count] : counts)
      if (count > best_count) {
        best = value;
        best_count = count;
      }
    return best;
  }
};

// Whether a cuda_runtime slice is inside another (a driver call made by a runtime call):
// CUDA API time counts the outermost calls only.
bool has_runtime_ancestor(const trace::Trace& trace, const GpuVocabulary& vocabulary,
                          trace::RowIndex row) {
  for (trace::RowIndex up = trace.slices.parent[row]; up != trace::kNoRow;
       up = trace.slices.parent[up])
    if (GpuVocabulary::is(vocabulary.runtime, trace.slices.category[up])) return true;
  return false;
}

std::string copy_kind_of(const trace::Trace& trace, const GpuVocabulary& vocabulary,
                         trace::RowIndex row) {
  if (GpuVocabulary::is(vocabulary.memset, trace.slices.category[row])) return "Memset";
  const trace::ArgValue* kind = find_slice_arg(trace, row, vocabulary.kind_key);
  if (kind != nullptr && kind->type == trace::ArgType::kString &&
      !trace.str(kind->string_value).empty())
    return std::string(trace.str(kind->string_value));
  std::string_view name = trace.str(trace.slices.name[row]);
  constexpr std::string_view kPrefix = "Memcpy ";
  if (name.substr(0, kPrefix.size()) == kPrefix) {
    std::string_view rest = name.substr(kPrefix.size());
    std::string_view word = rest.substr(0, rest.find(' '));
    if (!word.empty()) return std::string(word);
  }
  return "other";
}

// The outermost cuda_runtime slice that holds `launch` (itself when none does): a kernel
// linked to the driver call inside cudaLaunchKernel was launched by that cudaLaunchKernel.
trace::RowIndex outermost_runtime_call(const trace::Trace& trace, const GpuVocabulary& vocabulary,
                                       trace::RowIndex launch) {
  trace::RowIndex outermost = launch;
  for (trace::RowIndex up = trace.slices.parent[launch]; up != trace::kNoRow;
       up = trace.slices.parent[up])
    if (GpuVocabulary::is(vocabulary.runtime, trace.slices.category[up])) outermost = up;
  return outermost;
}

}  // namespace

bool has_gpu_work(const trace::Trace& trace) {
  GpuVocabulary vocabulary(trace);
  if (!vocabulary.any_gpu_category()) return false;
  for (trace::StringId category : trace.slices.category)
    if (vocabulary.gpu_kind(category)) return true;
  return false;
}

bool is_kernel_launch_api(std::string_view api_name) {
  return api_name.find("LaunchKernel") != std::string_view::npos ||
         api_name.find("LaunchCooperativeKernel") != std::string_view::npos ||
         api_name.find("GraphLaunch") != std::string_view::npos;
}

bool is_synchronize_api(std::string_view api_name) {
  return api_name.find("Synchronize") != std::string_view::npos;
}

std::string copy_kind(const trace::Trace& trace, trace::RowIndex row) {
  return copy_kind_of(trace, GpuVocabulary(trace), row);
}

GpuWork collect_gpu_work(const trace::Trace& trace) {
  GpuWork work;
  GpuVocabulary vocabulary(trace);
  if (!vocabulary.any_gpu_category()) return work;
  const trace::SliceTable& slices = trace.slices;
  std::unordered_map<trace::RowIndex, uint32_t> index_of_row;
  for (size_t row = 0; row < slices.size(); ++row) {
    if (auto kind = vocabulary.gpu_kind(slices.category[row])) {
      const auto slice = static_cast<trace::RowIndex>(row);
      index_of_row.emplace(slice, static_cast<uint32_t>(work.rows.size()));
      work.rows.push_back(slice);
      work.kinds.push_back(*kind);
      work.launches.push_back(trace::kNoRow);
      work.devices.push_back(device_of(trace, vocabulary, slice));
    }
  }
  // The flow into each GPU slice; a cuda_runtime out end wins over any other. A CUDA graph
  // replay's flow may arrive at the replay's slice (gpu_graph) instead of its kernels.
  std::unordered_map<trace::RowIndex, trace::RowIndex> launch_of_graph_replay;
  auto prefer_api_call = [&](trace::RowIndex& launch, trace::RowIndex out) {
    const bool out_is_call = GpuVocabulary::is(vocabulary.runtime, slices.category[out]);
    if (launch == trace::kNoRow ||
        (out_is_call && !GpuVocabulary::is(vocabulary.runtime, slices.category[launch])))
      launch = out;
  };
  for (size_t flow = 0; flow < trace.flows.size(); ++flow) {
    const trace::RowIndex in = trace.flows.slice_in[flow];
    const trace::RowIndex out = trace.flows.slice_out[flow];
    if (auto found = index_of_row.find(in); found != index_of_row.end())
      prefer_api_call(work.launches[found->second], out);
    else if (GpuVocabulary::is(vocabulary.graph, slices.category[in]))
      prefer_api_call(launch_of_graph_replay.try_emplace(in, trace::kNoRow).first->second, out);
  }
  if (!launch_of_graph_replay.empty()) {
    for (size_t index = 0; index < work.size(); ++index) {
      for (trace::RowIndex up = slices.parent[work.rows[index]];
           up != trace::kNoRow && work.launches[index] == trace::kNoRow; up = slices.parent[up])
        if (auto found = launch_of_graph_replay.find(up); found != launch_of_graph_replay.end())
          work.launches[index] = found->second;
    }
  }
  // No flow: the API call with the same correlation id, when exactly one has it.
  if (!vocabulary.runtime || (!vocabulary.correlation_id_key && !vocabulary.correlation_key))
    return work;
  if (std::none_of(work.launches.begin(), work.launches.end(),
                   [](trace::RowIndex launch) { return launch == trace::kNoRow; }))
    return work;
  constexpr trace::RowIndex kAmbiguous = trace::kNoRow - 1;
  std::unordered_map<int64_t, trace::RowIndex> call_of_correlation;
  for (size_t row = 0; row < slices.size(); ++row) {
    if (slices.category[row] != *vocabulary.runtime) continue;
    if (auto id = correlation_of(trace, vocabulary, static_cast<trace::RowIndex>(row))) {
      auto [position, inserted] =
          call_of_correlation.try_emplace(*id, static_cast<trace::RowIndex>(row));
      if (!inserted) position->second = kAmbiguous;
    }
  }
  for (size_t index = 0; index < work.size(); ++index) {
    if (work.launches[index] != trace::kNoRow) continue;
    if (auto id = correlation_of(trace, vocabulary, work.rows[index])) {
      auto found = call_of_correlation.find(*id);
      if (found != call_of_correlation.end() && found->second != kAmbiguous)
        work.launches[index] = found->second;
    }
  }
  return work;
}

std::optional<GpuLaunch> find_gpu_launch(const trace::Trace& trace, trace::RowIndex row) {
  if (row >= trace.slices.size()) return std::nullopt;
  const GpuVocabulary vocabulary(trace);
  const trace::SliceTable& slices = trace.slices;
  // The slice itself, then the graph replay it nests in (if any).
  std::vector<trace::RowIndex> targets = {row};
  for (trace::RowIndex up = slices.parent[row]; up != trace::kNoRow; up = slices.parent[up])
    if (GpuVocabulary::is(vocabulary.graph, slices.category[up])) targets.push_back(up);
  for (trace::RowIndex target : targets) {
    trace::RowIndex call = trace::kNoRow;
    for (size_t flow = 0; flow < trace.flows.size(); ++flow) {
      if (trace.flows.slice_in[flow] != target) continue;
      const trace::RowIndex out = trace.flows.slice_out[flow];
      if (call == trace::kNoRow || (GpuVocabulary::is(vocabulary.runtime, slices.category[out]) &&
                                    !GpuVocabulary::is(vocabulary.runtime, slices.category[call])))
        call = out;
    }
    if (call == trace::kNoRow) continue;
    LaunchContext context = launch_context(trace, vocabulary, call);
    GpuLaunch launch;
    launch.call = call;
    launch.site.operator_name = std::string(trace.str(context.operator_name));
    launch.site.module_name = std::string(trace.str(context.module_name));
    launch.site.python_function = std::string(trace.str(context.python_function));
    launch.site.source = source_of_python_name(trace.str(context.python_with_source));
    launch.site.count = 1;
    launch.site.total_ns = slices.dur[row];
    return launch;
  }
  return std::nullopt;
}

KernelTable compute_kernel_table(const trace::Trace& trace) {
  KernelTable table;
  GpuVocabulary vocabulary(trace);
  const trace::SliceTable& slices = trace.slices;
  const GpuWork work = collect_gpu_work(trace);

  // Kernels per name, copies per kind, intervals per device.
  struct KernelAccumulator {
    trace::StringId name = 0;
    std::vector<int64_t> durations;
    ValueCounts grids, blocks;
    std::map<std::array<trace::StringId, 4>, std::pair<uint64_t, int64_t>> sites;
    uint64_t without_launch = 0;
  };
  std::unordered_map<trace::StringId, size_t> kernel_of_name;
  std::vector<KernelAccumulator> kernels;
  std::map<std::string, CopyRow> copies;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> kernel_intervals, all_intervals;
  std::map<int64_t, uint64_t> kernels_per_device;
  std::vector<trace::RowIndex> launches_with_a_kernel;
  for (size_t index = 0; index < work.size(); ++index) {
    const trace::RowIndex row = work.rows[index];
    const std::pair<int64_t, int64_t> interval{slices.ts[row], slices.end(row)};
    all_intervals[work.devices[index]].push_back(interval);
    if (work.kinds[index] != GpuWorkKind::kKernel) {
      CopyRow& copy = copies[copy_kind_of(trace, vocabulary, row)];
      ++copy.count;
      add_saturating(copy.bytes, int_arg(trace, row, vocabulary.bytes_key).value_or(0));
      add_saturating(copy.total_ns, slices.dur[row]);
      continue;
    }
    kernel_intervals[work.devices[index]].push_back(interval);
    ++kernels_per_device[work.devices[index]];
    auto [position, inserted] = kernel_of_name.try_emplace(slices.name[row], kernels.size());
    if (inserted) {
      kernels.emplace_back();
      kernels.back().name = slices.name[row];
    }
    KernelAccumulator& kernel = kernels[position->second];
    kernel.durations.push_back(slices.dur[row]);
    add_saturating(table.kernel_ns, slices.dur[row]);
    ++table.kernel_slices;
    kernel.grids.add(launch_dimensions(trace, row, vocabulary.grid_key));
    kernel.blocks.add(launch_dimensions(trace, row, vocabulary.block_key));
    const trace::RowIndex launch = work.launches[index];
    if (launch == trace::kNoRow) {
      ++kernel.without_launch;
      ++table.gpu.kernels_without_launch;
      continue;
    }
    launches_with_a_kernel.push_back(outermost_runtime_call(trace, vocabulary, launch));
    auto& site = kernel.sites[launch_context(trace, vocabulary, launch).key()];
    ++site.first;
    add_saturating(site.second, slices.dur[row]);
  }

  for (KernelAccumulator& kernel : kernels) {
    KernelRow row;
    row.name = std::string(trace.str(kernel.name));
    row.duration = summarize_distribution(kernel.durations);
    row.share = table.kernel_ns > 0 ? static_cast<double>(row.duration.total_ns) /
                                          static_cast<double>(table.kernel_ns)
                                    : 0.0;
    row.grid = std::string(trace.str(kernel.grids.most_common()));
    row.grid_variants = kernel.grids.counts.size();
    row.block = std::string(trace.str(kernel.blocks.most_common()));
    row.block_variants = kernel.blocks.counts.size();
    row.without_launch = kernel.without_launch;
    for (const auto& [key, figures] : kernel.sites) {
      LaunchSite site;
      site.operator_name = std::string(trace.str(key[0]));
      site.module_name = std::string(trace.str(key[1]));
      site.python_function = std::string(trace.str(key[2]));
      site.source = source_of_python_name(trace.str(key[3]));
      site.count = figures.first;
      site.total_ns = figures.second;
      row.launched_by.push_back(std::move(site));
    }
    std::stable_sort(row.launched_by.begin(), row.launched_by.end(),
                     [](const LaunchSite& a, const LaunchSite& b) {
                       if (a.count != b.count) return a.count > b.count;
                       return a.total_ns > b.total_ns;
                     });
    table.kernels.push_back(std::move(row));
  }
  std::sort(table.kernels.begin(), table.kernels.end(), [](const KernelRow& a, const KernelRow& b) {
    if (a.duration.total_ns != b.duration.total_ns)
      return a.duration.total_ns > b.duration.total_ns;
    return a.name < b.name;
  });

  for (auto& [kind, copy] : copies) {
    copy.kind = kind;
    copy.gigabytes_per_second =
        copy.total_ns > 0 ? static_cast<double>(copy.bytes) / static_cast<double>(copy.total_ns)
                          : 0.0;
    table.copies.push_back(copy);
  }
  std::stable_sort(table.copies.begin(), table.copies.end(),
                   [](const CopyRow& a, const CopyRow& b) { return a.total_ns > b.total_ns; });

  // The GPU summary: busy time and utilisation per device, the CUDA API's cost, and the
  // launches and kernels that found no partner.
  GpuSummary& gpu = table.gpu;
  const auto [first, last] = trace.time_bounds();
  gpu.span_ns = last - first;
  for (auto& [device, intervals] : all_intervals) {
    GpuDeviceUsage usage;
    usage.device = device;
    usage.busy_ns = union_length(intervals);
    auto kernels_of_device = kernel_intervals.find(device);
    if (kernels_of_device != kernel_intervals.end())
      usage.kernel_busy_ns = union_length(kernels_of_device->second);
    usage.kernels = kernels_per_device[device];
    usage.utilisation = gpu.span_ns > 0 ? static_cast<double>(usage.kernel_busy_ns) /
                                              static_cast<double>(gpu.span_ns)
                                        : 0.0;
    add_saturating(gpu.busy_ns, usage.busy_ns);
    add_saturating(gpu.kernel_busy_ns, usage.kernel_busy_ns);
    gpu.devices.push_back(usage);
  }
  if (gpu.span_ns > 0 && !gpu.devices.empty())
    gpu.utilisation = static_cast<double>(gpu.kernel_busy_ns) /
                      (static_cast<double>(gpu.span_ns) * static_cast<double>(gpu.devices.size()));
  std::sort(launches_with_a_kernel.begin(), launches_with_a_kernel.end());
  if (vocabulary.runtime) {
    for (size_t row = 0; row < slices.size(); ++row) {
      if (slices.category[row] != *vocabulary.runtime) continue;
      const auto call = static_cast<trace::RowIndex>(row);
      if (has_runtime_ancestor(trace, vocabulary, call)) continue;
      ++gpu.cuda_api_calls;
      add_saturating(gpu.cuda_api_ns, slices.dur[row]);
      if (is_synchronize_api(trace.str(slices.name[row]))) {
        ++gpu.synchronize_calls;
        add_saturating(gpu.synchronize_ns, slices.dur[row]);
      }
      if (!is_kernel_launch_api(trace.str(slices.name[row]))) continue;
      ++gpu.kernel_launches;
      add_saturating(gpu.kernel_launch_ns, slices.dur[row]);
      if (!std::binary_search(launches_with_a_kernel.begin(), launches_with_a_kernel.end(), call))
        ++gpu.launches_without_kernel;
    }
  }
  return table;
}

HostDeviceSplit compute_host_device_split(const trace::Trace& trace,
                                          std::span<const trace::RowIndex> inferences) {
  HostDeviceSplit split;
  split.inference_count = inferences.size();
  const size_t count = inferences.size();
  const trace::SliceTable& slices = trace.slices;
  GpuVocabulary vocabulary(trace);
  std::unordered_map<trace::RowIndex, uint32_t> inference_of_row;
  for (size_t index = 0; index < count; ++index)
    inference_of_row.emplace(inferences[index], static_cast<uint32_t>(index));
  // The inference a slice is nested in (itself included), or count when none.
  auto inference_containing = [&](trace::RowIndex row) -> size_t {
    for (trace::RowIndex up = row; up != trace::kNoRow; up = slices.parent[up]) {
      auto found = inference_of_row.find(up);
      if (found != inference_of_row.end()) return found->second;
    }
    return count;
  };

  std::vector<int64_t> host(count), launch_overhead(count, 0), synchronize(count, 0),
      busy(count, 0), idle(count, 0), host_to_device(count, 0), device_to_host(count, 0);
  for (size_t index = 0; index < count; ++index) host[index] = slices.dur[inferences[index]];

  if (vocabulary.runtime) {
    for (size_t row = 0; row < slices.size(); ++row) {
      if (slices.category[row] != *vocabulary.runtime) continue;
      const auto call = static_cast<trace::RowIndex>(row);
      if (has_runtime_ancestor(trace, vocabulary, call)) continue;
      const size_t inference = inference_containing(call);
      if (inference == count) continue;
      add_saturating(is_synchronize_api(trace.str(slices.name[row])) ? synchronize[inference]
                                                                     : launch_overhead[inference],
                     slices.dur[row]);
    }
  }

  const GpuWork work = collect_gpu_work(trace);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> intervals(count);
  std::vector<int64_t> first_launch(count, INT64_MAX), last_end(count, INT64_MIN);
  for (size_t index = 0; index < work.size(); ++index) {
    const trace::RowIndex launch = work.launches[index];
    if (launch == trace::kNoRow) continue;
    const size_t inference = inference_containing(launch);
    if (inference == count) continue;
    const trace::RowIndex row = work.rows[index];
    intervals[inference].emplace_back(slices.ts[row], slices.end(row));
    first_launch[inference] = std::min(first_launch[inference], slices.ts[launch]);
    last_end[inference] = std::max(last_end[inference], slices.end(row));
    if (work.kinds[index] == GpuWorkKind::kMemcpy) {
      const std::string kind = copy_kind_of(trace, vocabulary, row);
      if (kind == "HtoD") add_saturating(host_to_device[inference], slices.dur[row]);
      if (kind == "DtoH") add_saturating(device_to_host[inference], slices.dur[row]);
    }
  }
  for (size_t index = 0; index < count; ++index) {
    if (intervals[index].empty()) continue;
    ++split.inferences_with_gpu_work;
    busy[index] = union_length(intervals[index]);
    idle[index] = std::max<int64_t>(last_end[index] - first_launch[index] - busy[index], 0);
  }
  auto figure = [](std::vector<int64_t>& values) {
    HostDeviceFigure result;
    result.present_in = static_cast<uint64_t>(
        std::count_if(values.begin(), values.end(), [](int64_t value) { return value != 0; }));
    result.per_inference = summarize_distribution(values);
    return result;
  };
  split.host = figure(host);
  split.launch_overhead = figure(launch_overhead);
  split.synchronize = figure(synchronize);
  split.gpu_busy = figure(busy);
  split.gpu_idle = figure(idle);
  split.host_to_device = figure(host_to_device);
  split.device_to_host = figure(device_to_host);
  return split;
}

}  // namespace opsight::analyze
