// What the GPU ran, as plain records: kernels, copies, memsets, synchronisations, CUDA API
// calls and NVTX markers, each with its start and end on the recorder's clock
// (CLOCK_MONOTONIC ns, the time base of every opsight trace) and the correlation id that
// ties a GPU activity to the API call that launched it.
//
// These records are the seam between the CUPTI collector (cupti_records.cc turns CUPTI's
// activity records into these; it is the only code that knows CUPTI's layouts) and
// everything after it (gpu_trace_builder.cc turns them into slices, tracks and flows of the
// trace model). They depend on nothing of CUDA, so the conversion to a trace is built and
// tested on every machine, with or without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace opsight::cuda {

// An index into GpuActivityLog::names (0: no name).
using NameIndex = uint32_t;

struct KernelActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  NameIndex name = 0;  // demangled
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  std::array<int32_t, 3> grid{};
  std::array<int32_t, 3> block{};
  uint32_t registers_per_thread = 0;
  uint32_t shared_memory_bytes = 0;  // static + dynamic
  uint32_t graph_id = 0;             // 0: not launched from a CUDA graph
  uint64_t graph_node_id = 0;
};

// Where a copy's bytes live (CUPTI's CUpti_ActivityMemoryKind, by value).
enum class MemoryKind : uint8_t {
  kUnknown = 0,
  kPageable = 1,
  kPinned = 2,
  kDevice = 3,
  kArray = 4,
  kManaged = 5,
  kDeviceStatic = 6,
  kManagedStatic = 7,
};
std::string_view memory_kind_name(MemoryKind kind);

// Which way a copy goes (CUPTI's CUpti_ActivityMemcpyKind, by value).
enum class CopyKind : uint8_t {
  kUnknown = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kHostToArray = 3,
  kArrayToHost = 4,
  kArrayToArray = 5,
  kArrayToDevice = 6,
  kDeviceToArray = 7,
  kDeviceToDevice = 8,
  kHostToHost = 9,
  kPeerToPeer = 10,
};
// "HtoD", "DtoH", "DtoD", "PtoP"...: the short names Nsight and the PyTorch profiler use.
std::string_view copy_kind_name(CopyKind kind);

struct MemcpyActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  CopyKind kind = CopyKind::kUnknown;
  MemoryKind source = MemoryKind::kUnknown;
  MemoryKind destination = MemoryKind::kUnknown;
  bool peer = false;  // a copy between two devices (then source_device/destination_device)
  uint32_t source_device = 0;
  uint32_t destination_device = 0;
  uint32_t graph_id = 0;
};

struct MemsetActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  uint32_t value = 0;
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  MemoryKind memory = MemoryKind::kUnknown;
  uint32_t graph_id = 0;
};

// A host thread waiting for the GPU (CUPTI's CUpti_ActivitySynchronizationType, by value).
enum class SyncKind : uint8_t {
  kUnknown = 0,
  kEventSynchronize = 1,
  kStreamWaitEvent = 2,
  kStreamSynchronize = 3,
  kContextSynchronize = 4,
};
std::string_view sync_kind_name(SyncKind kind);

struct SyncActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  SyncKind kind = SyncKind::kUnknown;
  uint32_t context = 0;
  uint32_t stream = 0;  // CUPTI's "invalid" (0xffffffff) when the wait was not on one stream
  uint32_t correlation_id = 0;  // of the API call that waited
};

// A call into the CUDA runtime (cudaLaunchKernel) or driver (cuLaunchKernel) API.
struct ApiActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  NameIndex name = 0;
  int64_t pid = 0;
  int64_t tid = 0;  // the system thread id (gettid), as the recorder's thread tracks
  uint32_t correlation_id = 0;
  bool driver = false;  // driver API, else runtime API
};

// One end of an NVTX range, or an NVTX mark (CUPTI's MARKER records).
struct MarkerActivity {
  enum class Phase : uint8_t { kStart, kEnd, kInstant };
  int64_t ts_ns = 0;
  uint32_t id = 0;  // pairs a range's start with its end
  Phase phase = Phase::kStart;
  NameIndex name = 0;    // on the start (and on marks)
  NameIndex domain = 0;  // 0: the default domain
  int64_t pid = 0;
  int64_t tid = 0;  // 0 when CUPTI named no thread
};

// Everything the GPU collector gathered in one session, and what it lost. Strings are
// interned once (a model launches the same few hundred kernels millions of times).
// Not thread-safe: one writer at a time (the collector's parser thread), read after it
// stopped.
struct GpuActivityLog {
  std::vector<std::string> names{std::string()};  // names[0] is the empty name
  std::vector<KernelActivity> kernels;
  std::vector<MemcpyActivity> copies;
  std::vector<MemsetActivity> memsets;
  std::vector<SyncActivity> syncs;
  std::vector<ApiActivity> api_calls;
  std::vector<MarkerActivity> markers;
  // Records CUPTI dropped (its buffers were full: cuptiActivityGetNumDroppedRecords) and
  // records opsight dropped (beyond its own bound on records held); both are reported as
  // dropped events of the trace.
  uint64_t records_dropped_by_cupti = 0;
  uint64_t records_dropped_by_opsight = 0;
  // CUPTI's own time (its OVERHEAD records: buffer flushes, instrumentation), ns.
  int64_t cupti_overhead_ns = 0;

  NameIndex intern(std::string_view name);
  std::string_view name(NameIndex index) const {
    return index < names.size() ? std::string_view(names[index]) : std::string_view();
  }
  size_t record_count() const {
    return kernels.size() + copies.size() + memsets.size() + syncs.size() + api_calls.size() +
           markers.size();
  }
  bool empty() const { return record_count() == 0; }

 private:
  std::unordered_map<std::string, NameIndex> name_index_;
};

}  // namespace opsight::cuda
