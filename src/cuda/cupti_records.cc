#include "cuda/cupti_records.hpp"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <string_view>

namespace opsight::cuda {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

bool keep_api_call(bool driver, const std::string& name) {
  if (name.empty()) return false;
  if (driver) {
    constexpr std::array<std::string_view, 9> kDriverKept = {"cuLaunch",
                                                             "cuMemcpy",
                                                             "cuMemset",
                                                             "cuGraphLaunch",
                                                             "cuStreamSynchronize",
                                                             "cuCtxSynchronize",
                                                             "cuEventSynchronize",
                                                             "cuStreamWaitEvent",
                                                             "cuMemAlloc"};
    for (std::string_view prefix : kDriverKept)
      if (starts_with(name, prefix)) return true;
    return false;
  }
  constexpr std::array<std::string_view, 12> kRuntimeQueries = {
      "cudaGetDevice",           "cudaSetDevice",
      "cudaGetLastError",        "cudaPeekAtLastError",
      "cudaGetDeviceCount",      "cudaDeviceGetAttribute",
      "cudaStreamIsCapturing",   "cudaStreamGetCaptureInfo",
      "cudaFuncGetAttributes",   "cudaPointerGetAttributes",
      "cudaGetDeviceProperties", "cudaDriverGetVersion"};
  for (std::string_view query : kRuntimeQueries)
    if (starts_with(name, query)) return false;
  return true;
}

std::string demangle_kernel_name(const char* name) {
  if (name == nullptr) return {};
  if (!starts_with(name, "_Z")) return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(name);
}

CuptiRecordParser::CuptiRecordParser(GpuActivityLog& log, CallbackNames callback_names,
                                     ClockOffset clock, size_t max_records)
    : log_(log),
      callback_names_(std::move(callback_names)),
      clock_(clock),
      max_records_(max_records) {}

bool CuptiRecordParser::has_room() {
  if (log_.record_count() < max_records_) return true;
  ++log_.records_dropped_by_opsight;
  return false;
}

const std::string& CuptiRecordParser::api_name(bool driver, uint32_t cbid) {
  uint64_t key = (uint64_t{driver} << 32) | cbid;
  auto it = api_names_.find(key);
  if (it == api_names_.end()) {
    std::string name = callback_names_ ? callback_names_(driver, cbid) : std::string();
    if (!keep_api_call(driver, name)) name.clear();
    it = api_names_.emplace(key, std::move(name)).first;
  }
  return it->second;
}

void CuptiRecordParser::add(const void* activity) {
  const auto* record = static_cast<const CUpti_Activity*>(activity);
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      if (!has_room()) return;
      const auto* source = reinterpret_cast<const CUpti_ActivityKernel11*>(record);
      KernelActivity kernel;
      kernel.start_ns = local(source->start);
      kernel.end_ns = local(source->end);
      std::string_view mangled = source->name != nullptr ? source->name : "";
      auto known = demangled_.find(std::string(mangled));
      if (known == demangled_.end())
        known = demangled_
                    .emplace(std::string(mangled), log_.intern(demangle_kernel_name(source->name)))
                    .first;
      kernel.name = known->second;
      kernel.device = source->deviceId;
      kernel.context = source->contextId;
      kernel.stream = source->streamId;
      kernel.correlation_id = source->correlationId;
      kernel.grid = {source->gridX, source->gridY, source->gridZ};
      kernel.block = {source->blockX, source->blockY, source->blockZ};
      kernel.registers_per_thread = source->registersPerThread;
      kernel.shared_memory_bytes = static_cast<uint32_t>(std::max(0, source->staticSharedMemory) +
                                                         std::max(0, source->dynamicSharedMemory));
      kernel.graph_id = source->graphId;
      kernel.graph_node_id = source->graphNodeId;
      log_.kernels.push_back(kernel);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      if (!has_room()) return;
      const auto* source = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      MemcpyActivity copy = copy_of(*source);
      copy.kind = static_cast<CopyKind>(source->copyKind);
      log_.copies.push_back(copy);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      if (!has_room()) return;
      const auto* source = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      MemcpyActivity copy = copy_of(*source);
      copy.kind = CopyKind::kPeerToPeer;
      copy.peer = true;
      copy.source_device = source->srcDeviceId;
      copy.destination_device = source->dstDeviceId;
      log_.copies.push_back(copy);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      if (!has_room()) return;
      const auto* source = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      MemsetActivity memset;
      memset.start_ns = local(source->start);
      memset.end_ns = local(source->end);
      memset.bytes = source->bytes;
      memset.value = source->value;
      memset.device = source->deviceId;
      memset.context = source->contextId;
      memset.stream = source->streamId;
      memset.correlation_id = source->correlationId;
      memset.memory = static_cast<MemoryKind>(source->memoryKind);
      memset.graph_id = source->graphId;
      log_.memsets.push_back(memset);
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      if (!has_room()) return;
      const auto* source = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      SyncActivity sync;
      sync.start_ns = local(source->start);
      sync.end_ns = local(source->end);
      sync.kind = static_cast<SyncKind>(source->type);
      sync.context = source->contextId;
      sync.stream = source->streamId;
      sync.correlation_id = source->correlationId;
      log_.syncs.push_back(sync);
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* source = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      bool driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      const std::string& name = api_name(driver, source->cbid);
      if (name.empty()) {
        ++filtered_api_calls_;
        return;
      }
      if (!has_room()) return;
      ApiActivity call;
      call.start_ns = local(source->start);
      call.end_ns = local(source->end);
      call.name = log_.intern(name);
      call.pid = source->processId;
      call.tid = source->threadId;
      call.correlation_id = source->correlationId;
      call.driver = driver;
      log_.api_calls.push_back(call);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      if (!has_room()) return;
      const auto* source = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
      MarkerActivity marker;
      marker.ts_ns = local(source->timestamp);
      marker.id = source->id;
      if (source->flags & CUPTI_ACTIVITY_FLAG_MARKER_END)
        marker.phase = MarkerActivity::Phase::kEnd;
      else if (source->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS)
        marker.phase = MarkerActivity::Phase::kInstant;
      else
        marker.phase = MarkerActivity::Phase::kStart;
      if (source->name != nullptr) marker.name = log_.intern(source->name);
      if (source->domain != nullptr) marker.domain = log_.intern(source->domain);
      if (source->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
          source->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
        marker.pid = source->objectId.pt.processId;
        if (source->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD)
          marker.tid = source->objectId.pt.threadId;
      }
      log_.markers.push_back(marker);
      return;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* source = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
      if (source->end > source->start)
        log_.cupti_overhead_ns += static_cast<int64_t>(source->end - source->start);
      return;
    }
    default:
      ++skipped_records_;
      return;
  }
}

}  // namespace opsight::cuda
