// CUPTI activity records -> GpuActivityLog. The only code that reads CUPTI's record
// layouts (cupti_activity.h: CUpti_ActivityKernel11, CUpti_ActivityMemcpy6,
// CUpti_ActivityMemcpyPtoP4, CUpti_ActivityMemset4, CUpti_ActivitySynchronization2,
// CUpti_ActivityAPI, CUpti_ActivityMarker2, CUpti_ActivityOverhead3); built only where
// CUPTI's headers are found (OPSIGHT_WITH_CUDA). Its tests build those records in memory,
// as CUPTI documents them, so the conversion is proven without a GPU.
//
// It runs on the collector's own parser thread, never on the program's: names are copied
// (CUPTI's name pointers live only as long as the buffer), kernel names demangled,
// timestamps moved onto the recorder's clock, and API calls CUPTI reports but nobody reads
// (cudaGetDevice, the driver calls the runtime makes on its behalf) counted and skipped.
//
// Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "cuda/clock_alignment.hpp"
#include "cuda/gpu_activity.hpp"

namespace opsight::cuda {

class CuptiRecordParser {
 public:
  // The name of API call `cbid` of the runtime (driver false) or driver API (CUPTI's
  // cuptiGetCallbackName); empty if unknown.
  using CallbackNames = std::function<std::string(bool driver, uint32_t cbid)>;

  CuptiRecordParser(GpuActivityLog& log, CallbackNames callback_names, ClockOffset clock,
                    size_t max_records);

  // Adds one record (a CUpti_Activity of any kind: CUPTI's base record is an unnamed
  // struct, so it is passed untyped); kinds opsight does not read are counted and skipped.
  void add(const void* activity);

  uint64_t skipped_records() const { return skipped_records_; }
  uint64_t filtered_api_calls() const { return filtered_api_calls_; }

 private:
  bool has_room();
  int64_t local(uint64_t cupti_ns) const { return clock_.to_local(static_cast<int64_t>(cupti_ns)); }
  // What a copy record (CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4) says of every copy;
  // the caller adds what only its kind knows.
  template <typename CopyRecord>
  MemcpyActivity copy_of(const CopyRecord& source) const {
    MemcpyActivity copy;
    copy.start_ns = local(source.start);
    copy.end_ns = local(source.end);
    copy.bytes = source.bytes;
    copy.device = source.deviceId;
    copy.context = source.contextId;
    copy.stream = source.streamId;
    copy.correlation_id = source.correlationId;
    copy.source = static_cast<MemoryKind>(source.srcKind);
    copy.destination = static_cast<MemoryKind>(source.dstKind);
    copy.graph_id = source.graphId;
    return copy;
  }
  // The API call's name, or empty when the call is one the trace leaves out.
  const std::string& api_name(bool driver, uint32_t cbid);

  GpuActivityLog& log_;
  CallbackNames callback_names_;
  ClockOffset clock_;
  size_t max_records_;
  uint64_t skipped_records_ = 0;
  uint64_t filtered_api_calls_ = 0;
  std::unordered_map<uint64_t, std::string> api_names_;   // (driver << 32 | cbid) -> name or ""
  std::unordered_map<std::string, NameIndex> demangled_;  // mangled kernel name -> index
};

// Whether the trace keeps API call `name`: every runtime call but the queries a framework
// makes thousands of times (cudaGetDevice, cudaGetLastError...), and of the driver API only
// what launches, copies, sets or waits (the runtime's own driver calls would double every
// launch).
bool keep_api_call(bool driver, const std::string& name);

// The demangled form of a kernel's name; the name itself when it is not a mangled C++ name
// (Triton and inductor kernels: triton_poi_fused_add_0).
std::string demangle_kernel_name(const char* name);

}  // namespace opsight::cuda
