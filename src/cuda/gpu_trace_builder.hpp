// GpuActivityLog -> trace::Trace: the GPU work of one session as slices, tracks and flows
// of the ordinary trace model (docs/gpu.md), ready to be appended (trace::append_trace) to
// the trace the recorder wrote, whose thread tracks the API calls then nest into.
//
//   - each CUDA API call becomes a `cuda_runtime` slice on its thread's own track (pid,
//     tid), so that after the append it nests, by time, under the operator, module and
//     Python span that were open there when it ran;
//   - kernels, copies and memsets become slices on one async track per (device, stream)
//     (trace/gpu_tracks.hpp), with a flow from the API call that launched them (CUPTI's
//     correlation id), and the kernels of one CUDA graph replay nest under a `gpu_graph`
//     slice on their stream;
//   - synchronisations nest under the API call that waited; NVTX ranges are slices on the
//     thread that opened and closed them (push/pop), or on a track per NVTX domain when
//     they began and ended on different threads (start/end); NVTX marks are instants.
//
// Records may come in any order (CUPTI hands buffers over per context and stream, not in
// time order). What cannot be placed is counted, never guessed: a GPU activity whose
// launching call is missing keeps no flow (unlaunched_activities), an NVTX range that
// never ended is kept as unfinished up to the last timestamp of the log.
//
// Thread-safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/gpu_activity.hpp"
#include "trace/trace.hpp"

namespace opsight::cuda {

struct GpuTraceOptions {
  int64_t pid = 0;              // the process GPU tracks belong to
  std::string collector;        // e.g. "CUPTI 13.2", kept in the run's metadata
  std::string clock_alignment;  // how GPU timestamps met the recorder's clock
};

struct GpuTraceCounts {
  uint64_t kernels = 0;
  uint64_t copies = 0;
  uint64_t memsets = 0;
  uint64_t api_calls = 0;
  uint64_t graph_replays = 0;
  uint64_t nvtx_ranges = 0;
  uint64_t launched_activities = 0;    // kernels, copies, memsets joined to their API call
  uint64_t unlaunched_activities = 0;  // whose API call is not in the log
  uint64_t unfinished_ranges = 0;      // NVTX ranges with no end
};

struct GpuTrace {
  trace::Trace trace;  // finalized
  GpuTraceCounts counts;
};

GpuTrace build_gpu_trace(const GpuActivityLog& log, const GpuTraceOptions& options);

// The run-metadata keys build_gpu_trace writes (RunInfo::extra), read by reports and docs.
inline constexpr const char* kRunInfoGpuCollector = "gpu_collector";
inline constexpr const char* kRunInfoGpuClock = "gpu_clock_alignment";
inline constexpr const char* kRunInfoGpuDroppedByCupti = "gpu_records_dropped_by_cupti";
inline constexpr const char* kRunInfoGpuDroppedByOpsight = "gpu_records_dropped_by_opsight";
inline constexpr const char* kRunInfoGpuCuptiOverhead = "gpu_cupti_overhead_ns";

}  // namespace opsight::cuda
