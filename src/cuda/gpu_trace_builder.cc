#include "cuda/gpu_trace_builder.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/categories.hpp"
#include "trace/gpu_tracks.hpp"

namespace opsight::cuda {
namespace {

constexpr uint32_t kNoStream = std::numeric_limits<uint32_t>::max();

int64_t duration_of(int64_t start_ns, int64_t end_ns) {
  return std::max<int64_t>(0, end_ns - start_ns);
}

std::string dims_text(const std::array<int32_t, 3>& dims) {
  return "[" + std::to_string(dims[0]) + "," + std::to_string(dims[1]) + "," +
         std::to_string(dims[2]) + "]";
}

// Builds one GPU trace. Keeps the state that joins records: the API call of each
// correlation id, the GPU track of each (device, stream), and the first GPU start of each
// launching call (its launch latency).
class Builder {
 public:
  Builder(const GpuActivityLog& log, const GpuTraceOptions& options)
      : log_(log), options_(options) {
    category_api_ = trace_.intern(trace::kCategoryCudaRuntime);
    category_kernel_ = trace_.intern(trace::kCategoryGpuKernel);
    category_memcpy_ = trace_.intern(trace::kCategoryGpuMemcpy);
    category_memset_ = trace_.intern(trace::kCategoryGpuMemset);
    category_sync_ = trace_.intern(trace::kCategoryGpuSync);
    category_graph_ = trace_.intern(trace::kCategoryGpuGraph);
    category_annotation_ = trace_.intern(trace::kCategoryAnnotation);
    flow_name_ = trace_.intern("launch");
  }

  GpuTrace build() {
    add_api_calls();
    add_kernels();
    add_copies();
    add_memsets();
    add_syncs();
    add_graph_replays();
    add_markers();
    add_launch_latencies();
    fill_run_info();
    trace_.finalize();
    return GpuTrace{std::move(trace_), counts_};
  }

 private:
  void arg_int(trace::RowIndex row, std::string_view key, int64_t value) {
    trace_.slice_args.add(row, trace_.intern(key), trace::ArgValue::of_int(value));
  }
  void arg_string(trace::RowIndex row, std::string_view key, std::string_view value) {
    trace_.slice_args.add(row, trace_.intern(key),
                          trace::ArgValue::of_string(trace_.intern(value)));
  }
  void arg_double(trace::RowIndex row, std::string_view key, double value) {
    trace_.slice_args.add(row, trace_.intern(key), trace::ArgValue::of_double(value));
  }
  trace::StringId name_of(NameIndex index, std::string_view fallback) {
    std::string_view name = log_.name(index);
    return trace_.intern(name.empty() ? fallback : name);
  }
  void note_time(int64_t ns) { last_ns_ = std::max(last_ns_, ns); }

  trace::TrackId stream_track(uint32_t device, uint32_t stream) {
    auto [it, inserted] = stream_tracks_.try_emplace({device, stream}, 0);
    if (inserted) {
      it->second =
          trace_.process_async_track(options_.pid, trace::gpu_stream_track_key(device, stream),
                                     trace::gpu_stream_track_name(device, stream));
      trace_.tracks[it->second].sort_index =
          trace::kGpuTrackSortBase + int64_t{device} * 100'000 + std::min<int64_t>(stream, 99'999);
    }
    return it->second;
  }

  // The API call that launched correlation id `id`, or kNoRow.
  trace::RowIndex launching_call(uint32_t id) const {
    auto it = launching_calls_.find(id);
    return it == launching_calls_.end() ? trace::kNoRow : it->second.row;
  }

  // A flow from the launching call of `correlation_id` to the GPU slice `row`.
  void link_launch(uint32_t correlation_id, trace::RowIndex row, int64_t start_ns) {
    trace::RowIndex call = launching_call(correlation_id);
    if (call == trace::kNoRow) {
      ++counts_.unlaunched_activities;
      return;
    }
    ++counts_.launched_activities;
    uint64_t flow_id = (static_cast<uint64_t>(options_.pid) << 32) | correlation_id;
    trace_.flows.add(call, row, flow_id, flow_name_, category_api_);
    auto [it, inserted] = first_gpu_start_.try_emplace(call, start_ns);
    if (!inserted) it->second = std::min(it->second, start_ns);
  }

  // The runtime call wins over the driver call it made (both carry the launch's
  // correlation id): the flow leaves the call the program made.
  void add_api_calls() {
    for (const ApiActivity& call : log_.api_calls) {
      trace::TrackId track = trace_.thread_track(call.pid, call.tid);
      trace::RowIndex row =
          trace_.slices.add(call.start_ns, duration_of(call.start_ns, call.end_ns),
                            name_of(call.name, "CUDA API call"), category_api_, track);
      arg_int(row, trace::kGpuArgCorrelationId, call.correlation_id);
      arg_string(row, "api", call.driver ? "driver" : "runtime");
      note_time(call.end_ns);
      ++counts_.api_calls;
      auto [it, inserted] =
          launching_calls_.try_emplace(call.correlation_id, LaunchingCall{row, call.driver});
      if (!inserted && it->second.driver && !call.driver) it->second = LaunchingCall{row, false};
    }
  }

  // What every kernel, copy and memset gets: a slice on its stream's track with its
  // device, stream and correlation id, its place in a CUDA graph replay, and the flow from
  // the call that launched it.
  template <typename Activity>
  trace::RowIndex add_gpu_slice(const Activity& activity, trace::StringId name,
                                trace::StringId category) {
    trace::RowIndex row =
        trace_.slices.add(activity.start_ns, duration_of(activity.start_ns, activity.end_ns), name,
                          category, stream_track(activity.device, activity.stream));
    arg_int(row, trace::kGpuArgDevice, activity.device);
    arg_int(row, trace::kGpuArgStream, activity.stream);
    arg_int(row, trace::kGpuArgCorrelationId, activity.correlation_id);
    if (activity.graph_id != 0) {
      arg_int(row, "graph_id", activity.graph_id);
      GraphReplay& replay = graph_replays_[{activity.correlation_id, activity.device,
                                            activity.stream, activity.graph_id}];
      replay.start_ns = std::min(replay.start_ns, activity.start_ns);
      replay.end_ns = std::max(replay.end_ns, activity.end_ns);
    }
    note_time(activity.end_ns);
    link_launch(activity.correlation_id, row, activity.start_ns);
    return row;
  }

  void add_kernels() {
    for (const KernelActivity& kernel : log_.kernels) {
      trace::RowIndex row = add_gpu_slice(kernel, name_of(kernel.name, "kernel"), category_kernel_);
      arg_int(row, "context", kernel.context);
      arg_string(row, trace::kGpuArgGrid, dims_text(kernel.grid));
      arg_string(row, trace::kGpuArgBlock, dims_text(kernel.block));
      arg_int(row, "registers_per_thread", kernel.registers_per_thread);
      arg_int(row, "shared_memory_bytes", kernel.shared_memory_bytes);
      if (kernel.graph_id != 0)
        arg_int(row, "graph_node_id", static_cast<int64_t>(kernel.graph_node_id));
      ++counts_.kernels;
    }
  }

  void add_copies() {
    for (const MemcpyActivity& copy : log_.copies) {
      std::string name = "Memcpy " + std::string(copy_kind_name(copy.kind));
      trace::RowIndex row = add_gpu_slice(copy, trace_.intern(name), category_memcpy_);
      arg_string(row, trace::kGpuArgCopyKind, copy_kind_name(copy.kind));
      arg_int(row, trace::kGpuArgBytes, static_cast<int64_t>(copy.bytes));
      int64_t duration = duration_of(copy.start_ns, copy.end_ns);
      if (duration > 0)
        arg_double(row, "bandwidth_gbps",
                   static_cast<double>(copy.bytes) / static_cast<double>(duration));
      arg_string(row, "source_memory", memory_kind_name(copy.source));
      arg_string(row, "destination_memory", memory_kind_name(copy.destination));
      if (copy.peer) {
        arg_int(row, "source_device", copy.source_device);
        arg_int(row, "destination_device", copy.destination_device);
      }
      ++counts_.copies;
    }
  }

  void add_memsets() {
    for (const MemsetActivity& memset : log_.memsets) {
      trace::RowIndex row = add_gpu_slice(memset, trace_.intern("Memset"), category_memset_);
      arg_int(row, trace::kGpuArgBytes, static_cast<int64_t>(memset.bytes));
      arg_int(row, "value", memset.value);
      arg_string(row, "memory", memory_kind_name(memset.memory));
      ++counts_.memsets;
    }
  }
  // A wait sits on the thread of the call that waited (it nests under that call); a wait
  // whose call is not in the log sits on its stream, or on a context-wide track.
  void add_syncs() {
    for (const SyncActivity& sync : log_.syncs) {
      trace::RowIndex call = launching_call(sync.correlation_id);
      trace::TrackId track;
      if (call != trace::kNoRow) {
        track = trace_.slices.track[call];
      } else {
        track = stream_track(0, sync.stream == kNoStream ? 0 : sync.stream);
      }
      std::string name(sync_kind_name(sync.kind));
      trace::RowIndex row =
          trace_.slices.add(sync.start_ns, duration_of(sync.start_ns, sync.end_ns),
                            trace_.intern(name), category_sync_, track);
      arg_string(row, "sync_type", sync_kind_name(sync.kind));
      if (sync.stream != kNoStream) arg_int(row, trace::kGpuArgStream, sync.stream);
      arg_int(row, "context", sync.context);
      arg_int(row, trace::kGpuArgCorrelationId, sync.correlation_id);
      note_time(sync.end_ns);
    }
  }

  // One slice per replay of a graph on a stream (a replay is one cudaGraphLaunch: one
  // correlation id), around the kernels it ran there, with a flow from the launch.
  void add_graph_replays() {
    for (const auto& [key, replay] : graph_replays_) {
      auto [correlation_id, device, stream, graph_id] = key;
      trace::RowIndex row =
          trace_.slices.add(replay.start_ns, duration_of(replay.start_ns, replay.end_ns),
                            trace_.intern("CUDA graph " + std::to_string(graph_id) + " replay"),
                            category_graph_, stream_track(device, stream));
      arg_int(row, "graph_id", graph_id);
      arg_int(row, trace::kGpuArgCorrelationId, correlation_id);
      arg_int(row, trace::kGpuArgDevice, device);
      arg_int(row, trace::kGpuArgStream, stream);
      trace::RowIndex call = launching_call(correlation_id);
      if (call != trace::kNoRow) {
        uint64_t flow_id = (static_cast<uint64_t>(options_.pid) << 32) | correlation_id;
        trace_.flows.add(call, row, flow_id, flow_name_, category_api_);
      }
      ++counts_.graph_replays;
    }
  }

  // NVTX: a range begun and ended on one thread is a slice of that thread (push/pop nest
  // with everything else the thread ran); one that crossed threads, or named none, goes
  // on its domain's track. Marks are instants of their thread.
  void add_markers() {
    std::vector<const MarkerActivity*> sorted;
    sorted.reserve(log_.markers.size());
    for (const MarkerActivity& marker : log_.markers) {
      sorted.push_back(&marker);
      note_time(marker.ts_ns);
    }
    std::stable_sort(
        sorted.begin(), sorted.end(),
        [](const MarkerActivity* a, const MarkerActivity* b) { return a->ts_ns < b->ts_ns; });
    std::unordered_map<uint32_t, const MarkerActivity*> open;
    auto add_range = [&](const MarkerActivity& start, const MarkerActivity* end) {
      bool same_thread =
          end != nullptr && start.tid != 0 && start.tid == end->tid && start.pid == end->pid;
      trace::TrackId track =
          same_thread ? trace_.thread_track(start.pid, start.tid) : domain_track(start.domain);
      int64_t end_ns = end != nullptr ? end->ts_ns : last_ns_;
      trace::RowIndex row = trace_.slices.add(
          start.ts_ns, duration_of(start.ts_ns, end_ns), name_of(start.name, "NVTX range"),
          category_annotation_, track, end != nullptr ? 0 : trace::kSliceUnfinished);
      arg_string(row, "domain",
                 log_.name(start.domain).empty() ? "default" : log_.name(start.domain));
      ++counts_.nvtx_ranges;
      if (end == nullptr) ++counts_.unfinished_ranges;
    };
    for (const MarkerActivity* marker : sorted) {
      switch (marker->phase) {
        case MarkerActivity::Phase::kStart:
          open[marker->id] = marker;
          break;
        case MarkerActivity::Phase::kEnd: {
          auto it = open.find(marker->id);
          if (it == open.end()) break;  // its start came before the session: nothing to show
          add_range(*it->second, marker);
          open.erase(it);
          break;
        }
        case MarkerActivity::Phase::kInstant: {
          trace::TrackId track = marker->tid != 0 ? trace_.thread_track(marker->pid, marker->tid)
                                                  : domain_track(marker->domain);
          trace::RowIndex row = trace_.instants.add(
              marker->ts_ns, name_of(marker->name, "NVTX mark"), category_annotation_, track);
          trace_.instant_args.add(
              row, trace_.intern("domain"),
              trace::ArgValue::of_string(trace_.intern(
                  log_.name(marker->domain).empty() ? "default" : log_.name(marker->domain))));
          break;
        }
      }
    }
    std::vector<const MarkerActivity*> unfinished;
    for (const auto& [id, start] : open) unfinished.push_back(start);
    std::sort(unfinished.begin(), unfinished.end(),
              [](const MarkerActivity* a, const MarkerActivity* b) { return a->id < b->id; });
    for (const MarkerActivity* start : unfinished) add_range(*start, nullptr);
  }

  trace::TrackId domain_track(NameIndex domain) {
    auto [it, inserted] = domain_tracks_.try_emplace(domain, 0);
    if (inserted) {
      std::string_view name = log_.name(domain);
      it->second =
          trace_.process_async_track(options_.pid, trace::kNvtxDomainKeyFlag | domain,
                                     "NVTX " + std::string(name.empty() ? "default" : name));
      trace_.tracks[it->second].sort_index = trace::kGpuTrackSortBase - 1;
    }
    return it->second;
  }

  void add_launch_latencies() {
    std::vector<std::pair<trace::RowIndex, int64_t>> latencies(first_gpu_start_.begin(),
                                                               first_gpu_start_.end());
    std::sort(latencies.begin(), latencies.end());
    for (auto [call, gpu_start] : latencies)
      arg_int(call, "launch_latency_ns", gpu_start - trace_.slices.ts[call]);
  }

  void fill_run_info() {
    trace::RunInfo& run = trace_.run;
    run.pid = options_.pid;
    run.source_format = "opsight";
    run.events_dropped = log_.records_dropped_by_cupti + log_.records_dropped_by_opsight;
    run.overhead_ns = log_.cupti_overhead_ns;
    if (!options_.collector.empty())
      run.extra.emplace_back(kRunInfoGpuCollector, options_.collector);
    if (!options_.clock_alignment.empty())
      run.extra.emplace_back(kRunInfoGpuClock, options_.clock_alignment);
    run.extra.emplace_back(kRunInfoGpuDroppedByCupti,
                           std::to_string(log_.records_dropped_by_cupti));
    run.extra.emplace_back(kRunInfoGpuDroppedByOpsight,
                           std::to_string(log_.records_dropped_by_opsight));
    run.extra.emplace_back(kRunInfoGpuCuptiOverhead, std::to_string(log_.cupti_overhead_ns));
  }

  const GpuActivityLog& log_;
  const GpuTraceOptions& options_;
  trace::Trace trace_;
  GpuTraceCounts counts_;
  trace::StringId category_api_ = 0, category_kernel_ = 0, category_memcpy_ = 0,
                  category_memset_ = 0, category_sync_ = 0, category_graph_ = 0,
                  category_annotation_ = 0, flow_name_ = 0;
  struct LaunchingCall {
    trace::RowIndex row = trace::kNoRow;
    bool driver = false;
  };
  std::unordered_map<uint32_t, LaunchingCall> launching_calls_;  // by correlation id
  std::map<std::pair<uint32_t, uint32_t>, trace::TrackId> stream_tracks_;
  std::map<NameIndex, trace::TrackId> domain_tracks_;
  struct GraphReplay {
    int64_t start_ns = std::numeric_limits<int64_t>::max();
    int64_t end_ns = std::numeric_limits<int64_t>::min();
  };
  // By (correlation id, device, stream, graph id): one replay of a graph on a stream.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, GraphReplay> graph_replays_;
  std::unordered_map<trace::RowIndex, int64_t> first_gpu_start_;
  int64_t last_ns_ = 0;
};

}  // namespace

GpuTrace build_gpu_trace(const GpuActivityLog& log, const GpuTraceOptions& options) {
  return Builder(log, options).build();
}

}  // namespace opsight::cuda
