#include "cuda/gpu_trace_builder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "io/io.hpp"
#include "trace/categories.hpp"
#include "trace/gpu_tracks.hpp"

namespace opsight::cuda {
namespace {

constexpr int64_t kPid = 4242;
constexpr int64_t kThread = 4243;
constexpr int64_t kOtherThread = 4250;

// What a forward on a GPU leaves in CUPTI's buffers, in the order CUPTI may hand them over
// (GPU records before the API calls that launched them: buffers come per context and
// stream, not in time order).
GpuActivityLog forward_on_gpu() {
  GpuActivityLog log;
  KernelActivity gemm;
  gemm.start_ns = 1'300;
  gemm.end_ns = 2'300;
  gemm.name = log.intern("void gemm_kernel<float>(float const*, float*)");
  gemm.device = 0;
  gemm.stream = 7;
  gemm.correlation_id = 11;
  gemm.grid = {128, 2, 1};
  gemm.block = {256, 1, 1};
  gemm.registers_per_thread = 96;
  gemm.shared_memory_bytes = 49'152;
  log.kernels.push_back(gemm);

  KernelActivity relu = gemm;
  relu.start_ns = 2'400;
  relu.end_ns = 2'500;
  relu.name = log.intern("triton_poi_fused_relu_0");
  relu.correlation_id = 12;
  relu.grid = {64, 1, 1};
  log.kernels.push_back(relu);

  ApiActivity launch_relu;  // before the gemm's launch in the buffer, after it in time
  launch_relu.start_ns = 1'200;
  launch_relu.end_ns = 1'250;
  launch_relu.name = log.intern("cuLaunchKernel");
  launch_relu.pid = kPid;
  launch_relu.tid = kThread;
  launch_relu.correlation_id = 12;
  launch_relu.driver = true;
  log.api_calls.push_back(launch_relu);

  ApiActivity launch_gemm = launch_relu;
  launch_gemm.start_ns = 1'000;
  launch_gemm.end_ns = 1'100;
  launch_gemm.name = log.intern("cudaLaunchKernel");
  launch_gemm.correlation_id = 11;
  launch_gemm.driver = false;
  log.api_calls.push_back(launch_gemm);
  ApiActivity driver_of_gemm = launch_gemm;  // the runtime's own driver call, same id
  driver_of_gemm.start_ns = 1'010;
  driver_of_gemm.end_ns = 1'090;
  driver_of_gemm.name = log.intern("cuLaunchKernel");
  driver_of_gemm.driver = true;
  log.api_calls.push_back(driver_of_gemm);

  MemcpyActivity copy;
  copy.start_ns = 3'000;
  copy.end_ns = 3'500;
  copy.bytes = 4'000;
  copy.device = 0;
  copy.stream = 7;
  copy.correlation_id = 13;
  copy.kind = CopyKind::kDeviceToHost;
  copy.source = MemoryKind::kDevice;
  copy.destination = MemoryKind::kPageable;
  log.copies.push_back(copy);
  ApiActivity launch_copy = launch_gemm;
  launch_copy.start_ns = 2'600;
  launch_copy.end_ns = 3'600;
  launch_copy.name = log.intern("cudaMemcpyAsync");
  launch_copy.correlation_id = 13;
  log.api_calls.push_back(launch_copy);

  MemsetActivity memset;
  memset.start_ns = 900;
  memset.end_ns = 950;
  memset.bytes = 64;
  memset.stream = 3;
  memset.correlation_id = 99;  // its call is not in the log
  log.memsets.push_back(memset);

  ApiActivity synchronize = launch_gemm;
  synchronize.start_ns = 3'700;
  synchronize.end_ns = 4'000;
  synchronize.name = log.intern("cudaStreamSynchronize");
  synchronize.correlation_id = 14;
  log.api_calls.push_back(synchronize);
  SyncActivity wait;
  wait.start_ns = 3'710;
  wait.end_ns = 3'990;
  wait.kind = SyncKind::kStreamSynchronize;
  wait.stream = 7;
  wait.correlation_id = 14;
  log.syncs.push_back(wait);

  MarkerActivity push{800,  1,      MarkerActivity::Phase::kStart, log.intern("forward"), 0,
                      kPid, kThread};
  MarkerActivity pop{4'100, 1, MarkerActivity::Phase::kEnd, 0, 0, kPid, kThread};
  MarkerActivity start{
      850,  2,      MarkerActivity::Phase::kStart, log.intern("request 7"), log.intern("serving"),
      kPid, kThread};
  MarkerActivity end{4'200, 2, MarkerActivity::Phase::kEnd, 0, 0, kPid, kOtherThread};
  MarkerActivity never_ends{870,  3,      MarkerActivity::Phase::kStart, log.intern("left open"), 0,
                            kPid, kThread};
  MarkerActivity mark{2'000, 4,      MarkerActivity::Phase::kInstant, log.intern("checkpoint"), 0,
                      kPid,  kThread};
  log.markers = {pop, end, push, start, never_ends, mark};
  log.records_dropped_by_cupti = 5;
  log.records_dropped_by_opsight = 2;
  log.cupti_overhead_ns = 700;
  return log;
}

std::optional<trace::RowIndex> find_slice(const trace::Trace& trace, std::string_view name) {
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == name) return row;
  return std::nullopt;
}

std::optional<trace::ArgValue> arg_of(const trace::Trace& trace, trace::RowIndex row,
                                      std::string_view key) {
  for (trace::RowIndex arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1];
       ++arg)
    if (trace.str(trace.slice_args.key[arg]) == key) return trace.slice_args.value[arg];
  return std::nullopt;
}

std::string string_arg(const trace::Trace& trace, trace::RowIndex row, std::string_view key) {
  auto value = arg_of(trace, row, key);
  return value && value->type == trace::ArgType::kString
             ? std::string(trace.str(value->string_value))
             : "";
}

int64_t int_arg(const trace::Trace& trace, trace::RowIndex row, std::string_view key) {
  auto value = arg_of(trace, row, key);
  return value && value->type == trace::ArgType::kInt ? value->int_value : -1;
}

// The slice a flow into `row` comes from, or kNoRow.
trace::RowIndex launched_by(const trace::Trace& trace, trace::RowIndex row) {
  for (size_t flow = 0; flow < trace.flows.size(); ++flow)
    if (trace.flows.slice_in[flow] == row) return trace.flows.slice_out[flow];
  return trace::kNoRow;
}

TEST(GpuTraceBuilder, KernelsSitOnTheirStreamTrackWithTheirLaunchParameters) {
  GpuTrace gpu = build_gpu_trace(forward_on_gpu(), {kPid, "CUPTI test", "exact"});
  const trace::Trace& trace = gpu.trace;
  auto gemm = find_slice(trace, "void gemm_kernel<float>(float const*, float*)");
  ASSERT_TRUE(gemm);
  EXPECT_EQ(trace.str(trace.slices.category[*gemm]), trace::kCategoryGpuKernel);
  EXPECT_EQ(trace.slices.ts[*gemm], 1'300);
  EXPECT_EQ(trace.slices.dur[*gemm], 1'000);
  const trace::Track& track = trace.tracks[trace.slices.track[*gemm]];
  EXPECT_TRUE(trace::is_gpu_stream_track(track));
  EXPECT_EQ(trace::gpu_stream_of_key(track.async_key), 7u);
  EXPECT_EQ(trace.str(track.name), "GPU 0 stream 7");
  EXPECT_EQ(track.pid, kPid);
  EXPECT_GE(track.sort_index, trace::kGpuTrackSortBase);
  EXPECT_EQ(string_arg(trace, *gemm, "grid"), "[128,2,1]");
  EXPECT_EQ(string_arg(trace, *gemm, "block"), "[256,1,1]");
  EXPECT_EQ(int_arg(trace, *gemm, "registers_per_thread"), 96);
  EXPECT_EQ(int_arg(trace, *gemm, "shared_memory_bytes"), 49'152);
  EXPECT_EQ(int_arg(trace, *gemm, "correlation_id"), 11);
  EXPECT_EQ(gpu.counts.kernels, 2u);
}

TEST(GpuTraceBuilder, EachGpuActivityHasAFlowFromTheCallThatLaunchedIt) {
  GpuTrace gpu = build_gpu_trace(forward_on_gpu(), {kPid, "", ""});
  const trace::Trace& trace = gpu.trace;
  auto gemm = find_slice(trace, "void gemm_kernel<float>(float const*, float*)");
  auto relu = find_slice(trace, "triton_poi_fused_relu_0");
  auto copy = find_slice(trace, "Memcpy DtoH");
  ASSERT_TRUE(gemm && relu && copy);
  // The runtime call, not the driver call it made with the same correlation id.
  trace::RowIndex gemm_launch = launched_by(trace, *gemm);
  ASSERT_NE(gemm_launch, trace::kNoRow);
  EXPECT_EQ(trace.str(trace.slices.name[gemm_launch]), "cudaLaunchKernel");
  EXPECT_EQ(trace.str(trace.slices.category[gemm_launch]), trace::kCategoryCudaRuntime);
  EXPECT_EQ(trace.tracks[trace.slices.track[gemm_launch]].tid, kThread);
  EXPECT_EQ(int_arg(trace, gemm_launch, "launch_latency_ns"), 300);
  // A Triton kernel launched through the driver API directly.
  trace::RowIndex relu_launch = launched_by(trace, *relu);
  ASSERT_NE(relu_launch, trace::kNoRow);
  EXPECT_EQ(trace.str(trace.slices.name[relu_launch]), "cuLaunchKernel");
  EXPECT_EQ(string_arg(trace, relu_launch, "api"), "driver");
  EXPECT_EQ(trace.str(trace.slices.name[launched_by(trace, *copy)]), "cudaMemcpyAsync");
  // The driver call nests under the runtime call on the thread's track.
  auto driver_call = std::find_if(trace.slices.parent.begin(), trace.slices.parent.end(),
                                  [&](trace::RowIndex parent) { return parent == gemm_launch; });
  EXPECT_NE(driver_call, trace.slices.parent.end());
  // The memset's call is not in the log: no flow, counted.
  auto memset = find_slice(trace, "Memset");
  ASSERT_TRUE(memset);
  EXPECT_EQ(launched_by(trace, *memset), trace::kNoRow);
  EXPECT_EQ(gpu.counts.launched_activities, 3u);
  EXPECT_EQ(gpu.counts.unlaunched_activities, 1u);
}

TEST(GpuTraceBuilder, CopiesSayTheirDirectionBytesBandwidthAndMemory) {
  GpuTrace gpu = build_gpu_trace(forward_on_gpu(), {kPid, "", ""});
  const trace::Trace& trace = gpu.trace;
  auto copy = find_slice(trace, "Memcpy DtoH");
  ASSERT_TRUE(copy);
  EXPECT_EQ(trace.str(trace.slices.category[*copy]), trace::kCategoryGpuMemcpy);
  EXPECT_EQ(string_arg(trace, *copy, "kind"), "DtoH");
  EXPECT_EQ(int_arg(trace, *copy, "bytes"), 4'000);
  auto bandwidth = arg_of(trace, *copy, "bandwidth_gbps");
  ASSERT_TRUE(bandwidth);
  EXPECT_DOUBLE_EQ(bandwidth->double_value, 8.0);  // 4000 B in 500 ns
  EXPECT_EQ(string_arg(trace, *copy, "source_memory"), "device");
  EXPECT_EQ(string_arg(trace, *copy, "destination_memory"), "pageable");
}

TEST(GpuTraceBuilder, AWaitNestsUnderTheCallThatWaited) {
  GpuTrace gpu = build_gpu_trace(forward_on_gpu(), {kPid, "", ""});
  const trace::Trace& trace = gpu.trace;
  auto wait = find_slice(trace, "stream synchronize");
  ASSERT_TRUE(wait);
  EXPECT_EQ(trace.str(trace.slices.category[*wait]), trace::kCategoryGpuSync);
  trace::RowIndex parent = trace.slices.parent[*wait];
  ASSERT_NE(parent, trace::kNoRow);
  EXPECT_EQ(trace.str(trace.slices.name[parent]), "cudaStreamSynchronize");
}

TEST(GpuTraceBuilder, NvtxRangesNestOnTheirThreadOrSitOnTheirDomainsTrack) {
  GpuTrace gpu = build_gpu_trace(forward_on_gpu(), {kPid, "", ""});
  const trace::Trace& trace = gpu.trace;
  auto forward = find_slice(trace, "forward");
  ASSERT_TRUE(forward);
  EXPECT_EQ(trace.slices.ts[*forward], 800);
  EXPECT_EQ(trace.slices.dur[*forward], 3'300);
  EXPECT_EQ(trace.tracks[trace.slices.track[*forward]].kind, trace::TrackKind::kThread);
  EXPECT_EQ(trace.str(trace.slices.category[*forward]), trace::kCategoryAnnotation);
  // The launches made inside the pushed range nest under it.
  auto launch = find_slice(trace, "cudaLaunchKernel");
  ASSERT_TRUE(launch);
  EXPECT_NE(trace.slices.parent[*launch], trace::kNoRow);

  auto request = find_slice(trace, "request 7");  // began and ended on two threads
  ASSERT_TRUE(request);
  const trace::Track& domain = trace.tracks[trace.slices.track[*request]];
  EXPECT_EQ(domain.kind, trace::TrackKind::kAsync);
  EXPECT_EQ(trace.str(domain.name), "NVTX serving");
  EXPECT_EQ(string_arg(trace, *request, "domain"), "serving");

  auto left_open = find_slice(trace, "left open");
  ASSERT_TRUE(left_open);
  EXPECT_TRUE(trace.slices.flags[*left_open] & trace::kSliceUnfinished);
  EXPECT_EQ(gpu.counts.unfinished_ranges, 1u);
  EXPECT_EQ(gpu.counts.nvtx_ranges, 3u);
  ASSERT_EQ(trace.instants.size(), 1u);
  EXPECT_EQ(trace.str(trace.instants.name[0]), "checkpoint");
}

TEST(GpuTraceBuilder, KernelsOfAGraphReplayNestUnderTheReplayLaunchedByItsCall) {
  GpuActivityLog log;
  ApiActivity replay_call{10, 20, log.intern("cudaGraphLaunch"), kPid, kThread, 50, false};
  log.api_calls.push_back(replay_call);
  for (int node = 0; node < 3; ++node) {
    KernelActivity kernel;
    kernel.start_ns = 100 + node * 100;
    kernel.end_ns = 150 + node * 100;
    kernel.name = log.intern("node_kernel_" + std::to_string(node));
    kernel.stream = 9;
    kernel.correlation_id = 50;
    kernel.graph_id = 3;
    kernel.graph_node_id = 1000 + node;
    log.kernels.push_back(kernel);
  }
  GpuTrace gpu = build_gpu_trace(log, {kPid, "", ""});
  const trace::Trace& trace = gpu.trace;
  auto replay = find_slice(trace, "CUDA graph 3 replay");
  ASSERT_TRUE(replay);
  EXPECT_EQ(trace.str(trace.slices.category[*replay]), trace::kCategoryGpuGraph);
  EXPECT_EQ(trace.slices.ts[*replay], 100);
  EXPECT_EQ(trace.slices.dur[*replay], 250);
  EXPECT_EQ(trace.str(trace.slices.name[launched_by(trace, *replay)]), "cudaGraphLaunch");
  for (int node = 0; node < 3; ++node) {
    auto kernel = find_slice(trace, "node_kernel_" + std::to_string(node));
    ASSERT_TRUE(kernel);
    EXPECT_EQ(trace.slices.parent[*kernel], *replay);
    EXPECT_EQ(trace.str(trace.slices.name[launched_by(trace, *kernel)]), "cudaGraphLaunch");
    EXPECT_EQ(int_arg(trace, *kernel, "graph_node_id"), 1000 + node);
  }
  EXPECT_EQ(gpu.counts.graph_replays, 1u);
}

TEST(GpuTraceBuilder, DropsAndCuptiOverheadReachTheRunInfo) {
  GpuTrace gpu = build_gpu_trace(forward_on_gpu(), {kPid, "CUPTI API 130200", "exact"});
  const trace::RunInfo& run = gpu.trace.run;
  EXPECT_EQ(run.events_dropped, 7u);
  EXPECT_EQ(run.overhead_ns, 700);
  auto extra = [&](std::string_view key) {
    for (const auto& [name, value] : run.extra)
      if (name == key) return value;
    return std::string();
  };
  EXPECT_EQ(extra(kRunInfoGpuCollector), "CUPTI API 130200");
  EXPECT_EQ(extra(kRunInfoGpuClock), "exact");
  EXPECT_EQ(extra(kRunInfoGpuDroppedByCupti), "5");
  EXPECT_EQ(extra(kRunInfoGpuDroppedByOpsight), "2");
}

// The whole chain, as a session builds it: the recorder's trace of a thread (a Python span,
// a module, an operator) with the GPU trace appended; the launch nests under the operator,
// and the kernel reaches it through the flow; every format keeps the GPU track and flow.
TEST(GpuTraceBuilder, AppendedToTheRecordedTraceTheLaunchNestsUnderTheOperator) {
  trace::Trace recorded;
  trace::TrackId thread = recorded.thread_track(kPid, kThread);
  recorded.slices.add(500, 4'000, recorded.intern("handle_request"),
                      recorded.intern(trace::kCategoryPython), thread);
  recorded.slices.add(600, 3'000, recorded.intern("encoder.layer.0"),
                      recorded.intern(trace::kCategoryModule), thread);
  recorded.slices.add(950, 200, recorded.intern("aten::addmm"),
                      recorded.intern(trace::kCategoryOperator), thread);
  recorded.run.pid = kPid;
  recorded.finalize();

  GpuActivityLog log = forward_on_gpu();
  log.markers.clear();  // the NVTX range of the log would overlap the module
  GpuTrace gpu = build_gpu_trace(log, {kPid, "", ""});
  trace::append_trace(recorded, gpu.trace);
  auto check = [](const trace::Trace& trace, std::string_view format) {
    SCOPED_TRACE(std::string(format));
    auto gemm = find_slice(trace, "void gemm_kernel<float>(float const*, float*)");
    ASSERT_TRUE(gemm);
    trace::RowIndex launch = launched_by(trace, *gemm);
    ASSERT_NE(launch, trace::kNoRow);
    EXPECT_EQ(trace.str(trace.slices.name[launch]), "cudaLaunchKernel");
    trace::RowIndex op = trace.slices.parent[launch];
    ASSERT_NE(op, trace::kNoRow);
    EXPECT_EQ(trace.str(trace.slices.name[op]), "aten::addmm");
    EXPECT_EQ(trace.str(trace.slices.name[trace.slices.parent[op]]), "encoder.layer.0");
    const trace::Track& stream = trace.tracks[trace.slices.track[*gemm]];
    EXPECT_EQ(trace.str(stream.name), "GPU 0 stream 7");
    EXPECT_EQ(stream.kind, trace::TrackKind::kAsync);
  };
  check(recorded, "in memory");
  io::ReadResult native = io::read_native(io::write_native(recorded));
  ASSERT_TRUE(native.ok());
  check(native.trace, "native");
  io::ReadResult chrome = io::read_chrome_json(io::write_chrome_json(recorded));
  ASSERT_TRUE(chrome.ok());
  check(chrome.trace, "Chrome JSON");
}

}  // namespace
}  // namespace opsight::cuda
