// The GPU side of a trace (the TensorBoard kernel pane and Qualcomm's op stats in one
// table, docs/gpu.md): what ran on the GPU, how long, and which code launched it.
//
// GPU work is what docs/gpu.md lays out, in opsight's own GPU traces and in PyTorch-profiler
// Chrome JSON alike: slices of category gpu_kernel, gpu_memcpy and gpu_memset on GPU stream
// tracks, cuda_runtime slices (CUDA runtime and driver API calls) on the launching thread's
// own track nested under the operator, module and Python spans open there, and a flow from
// each API call to the GPU work it launched (PyTorch's `ac2g` flows). Where a trace has no
// flow into a GPU slice, its correlation id (`correlation_id`, PyTorch's `correlation`)
// finds the API call that carries the same id, when exactly one does. A kernel of a CUDA
// graph replay is linked by the flow into it, or by the flow into the replay's slice
// (gpu_graph) that it nests under.
//
// From a launch, the parent chain gives the nearest `operator`, `module` and `python` slice;
// the source line is the nearest Python span whose name says it, as PyTorch names them
// ("torch/nn/modules/linear.py(125): forward" gives "torch/nn/modules/linear.py:125").
// opsight's own traces do not keep the file and line of a span (the native format drops
// them), so their launch sites carry no source.
//
// Definitions (docs/gpu.md and docs/reports.md repeat them):
//   - a kernel's share is its total time over the total time of all kernels (durations
//     summed: kernels that overlap on several streams count twice);
//   - GPU busy time is the union of the kernel, copy and memset intervals of each device,
//     summed over devices; kernel busy time the union of the kernels' alone;
//   - utilisation is a device's kernel busy time over the trace's span (first to last
//     timestamp of anything in it), the figure computed from the kernels themselves that
//     NVML's sampled "GPU utilisation" approximates;
//   - CUDA API time is the sum of the outermost cuda_runtime slices (a driver call made
//     inside a runtime call is counted once), the host's cost of talking to the GPU; of it,
//     the synchronize calls (a name with "Synchronize": cudaStreamSynchronize,
//     cudaDeviceSynchronize, cuCtxSynchronize...) are the host waiting for the GPU, and are
//     counted apart; a synchronous cudaMemcpy still includes its wait;
//   - a kernel launch is an outermost cuda_runtime slice named like a launch API
//     (cudaLaunchKernel, cuLaunchKernel, cudaLaunchCooperativeKernel, their Ex forms,
//     cudaGraphLaunch); a kernel linked to a call inside it (the driver's cuLaunchKernel)
//     belongs to it. A launch with no kernel is counted, and so is a kernel linked to no
//     launch (its launch was before the trace began, or the flow was lost).
//
// Thread-safety: pure functions over a finalized trace.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/distribution.hpp"
#include "trace/trace.hpp"

namespace opsight::analyze {

enum class GpuWorkKind : uint8_t { kKernel, kMemcpy, kMemset };

// Every GPU slice of a trace, in row order, with the slice that launched it. Built once
// per analysis (one pass over the slices, one over the flows).
struct GpuWork {
  std::vector<trace::RowIndex> rows;
  std::vector<GpuWorkKind> kinds;
  // The launching slice (the flow's out end, normally a cuda_runtime slice), kNoRow when
  // none was found.
  std::vector<trace::RowIndex> launches;
  // The device of each row: its `device` argument, else the device in an opsight GPU
  // stream track's key, else the track's pid (PyTorch puts a device's streams in pid =
  // device).
  std::vector<int64_t> devices;

  size_t size() const { return rows.size(); }
};

// Whether the trace has any slice of category gpu_kernel, gpu_memcpy or gpu_memset.
bool has_gpu_work(const trace::Trace& trace);

GpuWork collect_gpu_work(const trace::Trace& trace);

// Whether a cuda_runtime slice named `api_name` launches kernels, or waits for the GPU
// (see above).
bool is_kernel_launch_api(std::string_view api_name);
bool is_synchronize_api(std::string_view api_name);

// A copy's kind: its `kind` argument, else the word after "Memcpy " in its name ("Memcpy
// HtoD (Pageable -> Device)" is HtoD); "Memset" for a memset; "other" when unknown.
std::string copy_kind(const trace::Trace& trace, trace::RowIndex row);

// One place in the code a kernel was launched from, with how often and how long the
// kernels launched there ran. Empty strings where the launch has no such ancestor.
struct LaunchSite {
  std::string operator_name;
  std::string module_name;
  std::string python_function;
  std::string source;  // "file:line", see above
  uint64_t count = 0;
  int64_t total_ns = 0;
};

// The launch of one GPU slice (a kernel, copy or memset) and the code open where it was
// made, for a viewer showing that slice: found by the same rules as the tables (the flow
// into it, a cuda_runtime out end first; the flow into the CUDA graph replay around it).
// Scans the flows once: for one question, not for every slice of a trace.
struct GpuLaunch {
  trace::RowIndex call = trace::kNoRow;  // the launching slice
  LaunchSite site;                       // count 1, total_ns the slice's duration
};
std::optional<GpuLaunch> find_gpu_launch(const trace::Trace& trace, trace::RowIndex row);

struct KernelRow {
  std::string name;
  Distribution duration;
  double share = 0.0;  // total_ns over all kernels' total
  // The most common launch configuration ("[x,y,z]" as the trace wrote it; ties: the first
  // seen) and the number of distinct ones; "" and 0 when no kernel of the name has one.
  std::string grid;
  uint64_t grid_variants = 0;
  std::string block;
  uint64_t block_variants = 0;
  // By count, then total time, descending; kernels with no launch are in no site.
  std::vector<LaunchSite> launched_by;
  uint64_t without_launch = 0;
};

// Copies and memsets of one kind (HtoD, DtoH, DtoD, HtoH, PtoP, Memset...).
struct CopyRow {
  std::string kind;
  uint64_t count = 0;
  int64_t bytes = 0;  // sum of the `bytes` arguments
  int64_t total_ns = 0;
  double gigabytes_per_second = 0.0;  // bytes / total_ns (10^9 bytes per second)
};

struct GpuDeviceUsage {
  int64_t device = 0;
  uint64_t kernels = 0;
  int64_t kernel_busy_ns = 0;
  int64_t busy_ns = 0;       // kernels, copies and memsets
  double utilisation = 0.0;  // kernel_busy_ns / span_ns
};

struct GpuSummary {
  std::vector<GpuDeviceUsage> devices;  // by device id
  int64_t span_ns = 0;                  // the trace's span
  int64_t busy_ns = 0;                  // summed over devices
  int64_t kernel_busy_ns = 0;
  double utilisation = 0.0;  // kernel_busy_ns / (span_ns x devices)
  uint64_t cuda_api_calls = 0;
  int64_t cuda_api_ns = 0;
  uint64_t kernel_launches = 0;
  int64_t kernel_launch_ns = 0;
  uint64_t synchronize_calls = 0;
  int64_t synchronize_ns = 0;
  uint64_t launches_without_kernel = 0;
  uint64_t kernels_without_launch = 0;
};

struct KernelTable {
  std::vector<KernelRow> kernels;  // by total time, descending; ties by name
  uint64_t kernel_slices = 0;
  int64_t kernel_ns = 0;        // all kernels' durations summed
  std::vector<CopyRow> copies;  // by total time, descending; ties by kind
  GpuSummary gpu;
};

KernelTable compute_kernel_table(const trace::Trace& trace);

// The host/device split of each inference (Qualcomm's per-inference host and device
// times), one value per inference in each distribution (0 where it has none):
//   - host: the inference span's duration;
//   - launch_overhead: CUDA API time (outermost cuda_runtime slices) nested in it, but
//     for the synchronize calls;
//   - synchronize: the time of the synchronize calls nested in it (the host waiting for
//     the GPU);
//   - gpu_busy: the union of the intervals of the GPU work launched from inside it (its
//     launch nested in it), over all devices;
//   - gpu_idle: from its first such launch's start to the end of its last such GPU work,
//     minus gpu_busy (never negative): the time the GPU waited on the host;
//   - host_to_device, device_to_host: the durations of its HtoD and DtoH copies.
struct HostDeviceFigure {
  Distribution per_inference;
  uint64_t present_in = 0;  // inferences where it is not 0
};

struct HostDeviceSplit {
  uint64_t inference_count = 0;
  uint64_t inferences_with_gpu_work = 0;
  HostDeviceFigure host;
  HostDeviceFigure launch_overhead;
  HostDeviceFigure synchronize;
  HostDeviceFigure gpu_busy;
  HostDeviceFigure gpu_idle;
  HostDeviceFigure host_to_device;
  HostDeviceFigure device_to_host;
};

// `inferences`: the slices that each mark one inference, none inside another.
HostDeviceSplit compute_host_device_split(const trace::Trace& trace,
                                          std::span<const trace::RowIndex> inferences);

}  // namespace opsight::analyze
