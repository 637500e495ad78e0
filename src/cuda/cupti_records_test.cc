// CUPTI's activity records, built in memory as cupti_activity.h lays them out, through the
// parser: what a GPU machine's CUPTI hands over, proven without one.
#include "cuda/cupti_records.hpp"

#include <cupti.h>
#include <gtest/gtest.h>

#include <cstring>

namespace opsight::cuda {
namespace {

template <typename Record>
Record zeroed(CUpti_ActivityKind kind) {
  Record record;
  std::memset(&record, 0, sizeof(record));
  record.kind = kind;
  return record;
}

std::string names_for_test(bool driver, uint32_t cbid) {
  if (driver) return cbid == 1 ? "cuLaunchKernel" : "cuCtxGetCurrent";
  return cbid == 1 ? "cudaLaunchKernel" : "cudaGetDevice";
}

// CUPTI's clock 1,000 ns ahead of ours (the measured-offset path).
constexpr ClockOffset kOffset{1'000, 0};

TEST(CuptiRecords, AKernelRecordBecomesAKernelOnOurClock) {
  GpuActivityLog log;
  CuptiRecordParser parser(log, names_for_test, kOffset, 100);
  auto kernel = zeroed<CUpti_ActivityKernel11>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.start = 11'000;
  kernel.end = 12'500;
  kernel.deviceId = 1;
  kernel.contextId = 2;
  kernel.streamId = 13;
  kernel.correlationId = 77;
  kernel.gridX = 80;
  kernel.gridY = 2;
  kernel.gridZ = 1;
  kernel.blockX = 128;
  kernel.blockY = 1;
  kernel.blockZ = 1;
  kernel.registersPerThread = 64;
  kernel.staticSharedMemory = 1'024;
  kernel.dynamicSharedMemory = 3'072;
  kernel.graphId = 4;
  kernel.graphNodeId = 99;
  kernel.name = "_ZN2at6native6squareIfEEvPT_i";
  parser.add(reinterpret_cast<const CUpti_Activity*>(&kernel));
  ASSERT_EQ(log.kernels.size(), 1u);
  const KernelActivity& parsed = log.kernels[0];
  EXPECT_EQ(parsed.start_ns, 10'000);
  EXPECT_EQ(parsed.end_ns, 11'500);
  EXPECT_EQ(log.name(parsed.name), "void at::native::square<float>(float*, int)");
  EXPECT_EQ(parsed.device, 1u);
  EXPECT_EQ(parsed.context, 2u);
  EXPECT_EQ(parsed.stream, 13u);
  EXPECT_EQ(parsed.correlation_id, 77u);
  EXPECT_EQ(parsed.grid, (std::array<int32_t, 3>{80, 2, 1}));
  EXPECT_EQ(parsed.block, (std::array<int32_t, 3>{128, 1, 1}));
  EXPECT_EQ(parsed.registers_per_thread, 64u);
  EXPECT_EQ(parsed.shared_memory_bytes, 4'096u);
  EXPECT_EQ(parsed.graph_id, 4u);
  EXPECT_EQ(parsed.graph_node_id, 99u);
}

TEST(CuptiRecords, TritonKernelsKeepTheirGeneratedNames) {
  EXPECT_EQ(demangle_kernel_name("triton_poi_fused_add_relu_0"), "triton_poi_fused_add_relu_0");
  EXPECT_EQ(demangle_kernel_name("_Z6squarePfi"), "square(float*, int)");
  EXPECT_EQ(demangle_kernel_name("_Znot a mangled name"), "_Znot a mangled name");
  EXPECT_EQ(demangle_kernel_name(nullptr), "");
}

TEST(CuptiRecords, CopiesMemsetsAndPeerCopies) {
  GpuActivityLog log;
  CuptiRecordParser parser(log, names_for_test, ClockOffset{}, 100);
  auto copy = zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.bytes = 1 << 20;
  copy.start = 100;
  copy.end = 200;
  copy.streamId = 7;
  copy.correlationId = 5;
  parser.add(reinterpret_cast<const CUpti_Activity*>(&copy));
  auto peer = zeroed<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  peer.bytes = 4096;
  peer.start = 300;
  peer.end = 400;
  peer.srcDeviceId = 0;
  peer.dstDeviceId = 1;
  peer.correlationId = 6;
  parser.add(reinterpret_cast<const CUpti_Activity*>(&peer));
  auto memset = zeroed<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  memset.bytes = 512;
  memset.value = 0;
  memset.start = 500;
  memset.end = 510;
  memset.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  memset.correlationId = 8;
  parser.add(reinterpret_cast<const CUpti_Activity*>(&memset));

  ASSERT_EQ(log.copies.size(), 2u);
  EXPECT_EQ(log.copies[0].kind, CopyKind::kHostToDevice);
  EXPECT_EQ(log.copies[0].source, MemoryKind::kPinned);
  EXPECT_EQ(log.copies[0].destination, MemoryKind::kDevice);
  EXPECT_EQ(log.copies[0].bytes, 1u << 20);
  EXPECT_EQ(log.copies[0].stream, 7u);
  EXPECT_EQ(log.copies[1].kind, CopyKind::kPeerToPeer);
  EXPECT_TRUE(log.copies[1].peer);
  EXPECT_EQ(log.copies[1].destination_device, 1u);
  ASSERT_EQ(log.memsets.size(), 1u);
  EXPECT_EQ(log.memsets[0].bytes, 512u);
  EXPECT_EQ(log.memsets[0].memory, MemoryKind::kDevice);
}

TEST(CuptiRecords, ApiCallsKeepWhatATraceReaderWants) {
  GpuActivityLog log;
  CuptiRecordParser parser(log, names_for_test, ClockOffset{}, 100);
  auto add_call = [&](CUpti_ActivityKind kind, uint32_t cbid, uint32_t correlation) {
    auto call = zeroed<CUpti_ActivityAPI>(kind);
    call.cbid = cbid;
    call.start = 10;
    call.end = 20;
    call.processId = 100;
    call.threadId = 101;
    call.correlationId = correlation;
    parser.add(reinterpret_cast<const CUpti_Activity*>(&call));
  };
  add_call(CUPTI_ACTIVITY_KIND_RUNTIME, 1, 1);  // cudaLaunchKernel: kept
  add_call(CUPTI_ACTIVITY_KIND_RUNTIME, 2, 2);  // cudaGetDevice: a query, left out
  add_call(CUPTI_ACTIVITY_KIND_DRIVER, 1, 1);   // cuLaunchKernel: kept
  add_call(CUPTI_ACTIVITY_KIND_DRIVER, 2, 3);   // cuCtxGetCurrent: left out
  ASSERT_EQ(log.api_calls.size(), 2u);
  EXPECT_EQ(log.name(log.api_calls[0].name), "cudaLaunchKernel");
  EXPECT_FALSE(log.api_calls[0].driver);
  EXPECT_EQ(log.api_calls[0].pid, 100);
  EXPECT_EQ(log.api_calls[0].tid, 101);
  EXPECT_EQ(log.name(log.api_calls[1].name), "cuLaunchKernel");
  EXPECT_TRUE(log.api_calls[1].driver);
  EXPECT_EQ(parser.filtered_api_calls(), 2u);
}

TEST(CuptiRecords, SyncMarkersAndOverhead) {
  GpuActivityLog log;
  CuptiRecordParser parser(log, names_for_test, ClockOffset{}, 100);
  auto sync = zeroed<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = 1;
  sync.end = 9;
  sync.streamId = 7;
  sync.correlationId = 3;
  parser.add(reinterpret_cast<const CUpti_Activity*>(&sync));
  auto start = zeroed<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  start.timestamp = 50;
  start.id = 12;
  start.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  start.objectId.pt.processId = 100;
  start.objectId.pt.threadId = 101;
  start.name = "forward";
  start.domain = "torch";
  parser.add(reinterpret_cast<const CUpti_Activity*>(&start));
  auto end = zeroed<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  end.timestamp = 80;
  end.id = 12;
  end.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  end.objectId.pt.processId = 100;
  end.objectId.pt.threadId = 101;
  parser.add(reinterpret_cast<const CUpti_Activity*>(&end));
  auto overhead = zeroed<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
  overhead.start = 1'000;
  overhead.end = 1'250;
  parser.add(reinterpret_cast<const CUpti_Activity*>(&overhead));
  auto device = zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DEVICE);  // a kind not read
  parser.add(reinterpret_cast<const CUpti_Activity*>(&device));

  ASSERT_EQ(log.syncs.size(), 1u);
  EXPECT_EQ(log.syncs[0].kind, SyncKind::kStreamSynchronize);
  EXPECT_EQ(log.syncs[0].correlation_id, 3u);
  ASSERT_EQ(log.markers.size(), 2u);
  EXPECT_EQ(log.markers[0].phase, MarkerActivity::Phase::kStart);
  EXPECT_EQ(log.name(log.markers[0].name), "forward");
  EXPECT_EQ(log.name(log.markers[0].domain), "torch");
  EXPECT_EQ(log.markers[0].tid, 101);
  EXPECT_EQ(log.markers[1].phase, MarkerActivity::Phase::kEnd);
  EXPECT_EQ(log.cupti_overhead_ns, 250);
  EXPECT_EQ(parser.skipped_records(), 1u);
}

TEST(CuptiRecords, RecordsBeyondTheBoundAreDroppedAndCounted) {
  GpuActivityLog log;
  CuptiRecordParser parser(log, names_for_test, ClockOffset{}, 2);
  auto kernel = zeroed<CUpti_ActivityKernel11>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.name = "k";
  for (int i = 0; i < 5; ++i) parser.add(reinterpret_cast<const CUpti_Activity*>(&kernel));
  EXPECT_EQ(log.kernels.size(), 2u);
  EXPECT_EQ(log.records_dropped_by_opsight, 3u);
}

}  // namespace
}  // namespace opsight::cuda
