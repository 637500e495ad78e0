#include "analyze/kernels.hpp"

#include <gtest/gtest.h>

#include <utility>

#include "trace/categories.hpp"

namespace opsight::analyze {
namespace {

// A GPU trace laid out as docs/gpu.md says opsight records one: on thread 10 of pid 10,
//
//   app.py(40): serve [python]                          0 .. 1000
//     cudaMemcpyAsync (corr 6)                         10 .. 15   -> Memcpy HtoD   20 .. 60
//     nn.Module: Linear_0 [module]                    100 .. 500
//       aten::linear > aten::addmm [operator]         110 .. 490
//         cudaLaunchKernel (corr 1)                   130 .. 150  -> gemm [2,1,1]  200 .. 300
//         cudaLaunchKernel (corr 2)                   160 .. 170  -> gemm [4,1,1]  300 .. 350
//     aten::relu [operator]                           500 .. 600
//       cudaLaunchKernel (corr 3)                     510 .. 520  -> relu          530 .. 560
//     cudaMemcpyAsync (corr 4)                        600 .. 650  -> Memcpy DtoH  660 .. 700
//     cudaLaunchKernel (corr 5, no kernel)            700 .. 710
//   orphan kernel (no launch in the trace)                           1100 .. 1200
//
// GPU work sits on the async track of device 0, stream 7, linked by flows.
struct GpuTraceBuilder {
  trace::Trace trace;
  trace::TrackId cpu = trace.thread_track(10, 10);
  trace::TrackId stream = trace.process_async_track(10, (uint64_t{1} << 62) | 7, "GPU 0 stream 7");
  trace::StringId runtime = trace.intern(trace::kCategoryCudaRuntime);
  trace::StringId kernel = trace.intern(trace::kCategoryGpuKernel);
  trace::StringId memcpy = trace.intern(trace::kCategoryGpuMemcpy);
  trace::StringId op = trace.intern(trace::kCategoryOperator);

  trace::RowIndex call(int64_t ts, int64_t dur, std::string_view name, int64_t correlation) {
    trace::RowIndex row = trace.slices.add(ts, dur, trace.intern(name), runtime, cpu);
    trace.slice_args.add(row, trace.intern("correlation_id"), trace::ArgValue::of_int(correlation));
    return row;
  }
  trace::RowIndex gpu(int64_t ts, int64_t dur, std::string_view name, trace::StringId category,
                      int64_t correlation) {
    trace::RowIndex row = trace.slices.add(ts, dur, trace.intern(name), category, stream);
    trace.slice_args.add(row, trace.intern("correlation_id"), trace::ArgValue::of_int(correlation));
    return row;
  }
  void string_arg(trace::RowIndex row, std::string_view key, std::string_view value) {
    trace.slice_args.add(row, trace.intern(key), trace::ArgValue::of_string(trace.intern(value)));
  }
  void int_arg(trace::RowIndex row, std::string_view key, int64_t value) {
    trace.slice_args.add(row, trace.intern(key), trace::ArgValue::of_int(value));
  }
  trace::RowIndex kernel_with(int64_t ts, int64_t dur, std::string_view name, int64_t correlation,
                              std::string_view grid) {
    trace::RowIndex row = gpu(ts, dur, name, kernel, correlation);
    string_arg(row, "grid", grid);
    string_arg(row, "block", "[128,1,1]");
    int_arg(row, "device", 0);
    return row;
  }
  trace::RowIndex copy_with(int64_t ts, int64_t dur, std::string_view kind, int64_t bytes,
                            int64_t correlation) {
    trace::RowIndex row = gpu(ts, dur, "Memcpy " + std::string(kind), memcpy, correlation);
    string_arg(row, "kind", kind);
    int_arg(row, "bytes", bytes);
    return row;
  }
};

trace::Trace opsight_gpu_trace(bool with_flows = true) {
  GpuTraceBuilder b;
  trace::Trace& trace = b.trace;
  trace.slices.add(0, 1000, trace.intern("app.py(40): serve"), trace.intern("python"), b.cpu);
  trace::RowIndex h2d_call = b.call(10, 5, "cudaMemcpyAsync", 6);
  trace.slices.add(100, 400, trace.intern("nn.Module: Linear_0"), trace.intern("module"), b.cpu);
  trace.slices.add(110, 380, trace.intern("aten::linear"), b.op, b.cpu);
  trace.slices.add(120, 360, trace.intern("aten::addmm"), b.op, b.cpu);
  trace::RowIndex launch1 = b.call(130, 20, "cudaLaunchKernel", 1);
  trace::RowIndex launch2 = b.call(160, 10, "cudaLaunchKernel", 2);
  trace.slices.add(500, 100, trace.intern("aten::relu"), b.op, b.cpu);
  trace::RowIndex launch3 = b.call(510, 10, "cudaLaunchKernel", 3);
  trace::RowIndex d2h_call = b.call(600, 50, "cudaMemcpyAsync", 4);
  b.call(700, 10, "cudaLaunchKernel", 5);

  trace::RowIndex h2d = b.copy_with(20, 40, "HtoD", 1000, 6);
  trace::RowIndex gemm1 = b.kernel_with(200, 100, "gemm", 1, "[2,1,1]");
  trace::RowIndex gemm2 = b.kernel_with(300, 50, "gemm", 2, "[4,1,1]");
  trace::RowIndex relu = b.kernel_with(530, 30, "relu", 3, "[1,1,1]");
  trace::RowIndex d2h = b.copy_with(660, 40, "DtoH", 4000, 4);
  b.kernel_with(1100, 100, "orphan", 99, "[1,1,1]");
  if (with_flows) {
    trace.flows.add(h2d_call, h2d, 6);
    trace.flows.add(launch1, gemm1, 1);
    trace.flows.add(launch2, gemm2, 2);
    trace.flows.add(launch3, relu, 3);
    trace.flows.add(d2h_call, d2h, 4);
  }
  trace.finalize();
  return std::move(b.trace);
}

void expect_golden_kernel_table(const KernelTable& table) {
  EXPECT_EQ(table.kernel_slices, 4u);
  EXPECT_EQ(table.kernel_ns, 280);
  ASSERT_EQ(table.kernels.size(), 3u);

  const KernelRow& gemm = table.kernels[0];
  EXPECT_EQ(gemm.name, "gemm");
  EXPECT_EQ(gemm.duration.count, 2u);
  EXPECT_EQ(gemm.duration.total_ns, 150);
  EXPECT_DOUBLE_EQ(gemm.duration.mean_ns, 75.0);
  EXPECT_DOUBLE_EQ(gemm.duration.p50_ns, 75.0);
  EXPECT_DOUBLE_EQ(gemm.duration.p99_ns, 99.5);  // 50 + 0.99 * 50
  EXPECT_DOUBLE_EQ(gemm.share, 150.0 / 280.0);
  EXPECT_EQ(gemm.grid, "[2,1,1]");  // a tie: the first seen
  EXPECT_EQ(gemm.grid_variants, 2u);
  EXPECT_EQ(gemm.block, "[128,1,1]");
  EXPECT_EQ(gemm.block_variants, 1u);
  ASSERT_EQ(gemm.launched_by.size(), 1u);
  EXPECT_EQ(gemm.launched_by[0].operator_name, "aten::addmm");  // the nearest operator
  EXPECT_EQ(gemm.launched_by[0].module_name, "nn.Module: Linear_0");
  EXPECT_EQ(gemm.launched_by[0].python_function, "app.py(40): serve");
  EXPECT_EQ(gemm.launched_by[0].source, "app.py:40");
  EXPECT_EQ(gemm.launched_by[0].count, 2u);
  EXPECT_EQ(gemm.launched_by[0].total_ns, 150);
  EXPECT_EQ(gemm.without_launch, 0u);

  const KernelRow& orphan = table.kernels[1];
  EXPECT_EQ(orphan.name, "orphan");
  EXPECT_TRUE(orphan.launched_by.empty());
  EXPECT_EQ(orphan.without_launch, 1u);

  const KernelRow& relu = table.kernels[2];
  EXPECT_EQ(relu.name, "relu");
  ASSERT_EQ(relu.launched_by.size(), 1u);
  EXPECT_EQ(relu.launched_by[0].operator_name, "aten::relu");
  EXPECT_EQ(relu.launched_by[0].module_name, "");
  EXPECT_EQ(relu.grid_variants, 1u);

  ASSERT_EQ(table.copies.size(), 2u);
  EXPECT_EQ(table.copies[0].kind, "DtoH");  // a tie on time: by kind
  EXPECT_EQ(table.copies[0].bytes, 4000);
  EXPECT_EQ(table.copies[0].total_ns, 40);
  EXPECT_DOUBLE_EQ(table.copies[0].gigabytes_per_second, 100.0);
  EXPECT_EQ(table.copies[1].kind, "HtoD");
  EXPECT_DOUBLE_EQ(table.copies[1].gigabytes_per_second, 25.0);

  const GpuSummary& gpu = table.gpu;
  EXPECT_EQ(gpu.span_ns, 1200);
  ASSERT_EQ(gpu.devices.size(), 1u);
  EXPECT_EQ(gpu.devices[0].device, 0);
  EXPECT_EQ(gpu.devices[0].kernels, 4u);
  EXPECT_EQ(gpu.devices[0].kernel_busy_ns, 280);  // [200, 350) + [530, 560) + [1100, 1200)
  EXPECT_EQ(gpu.devices[0].busy_ns, 360);         // and the two copies
  EXPECT_DOUBLE_EQ(gpu.utilisation, 280.0 / 1200.0);
  EXPECT_EQ(gpu.cuda_api_calls, 6u);
  EXPECT_EQ(gpu.cuda_api_ns, 105);
  EXPECT_EQ(gpu.kernel_launches, 4u);
  EXPECT_EQ(gpu.kernel_launch_ns, 50);
  EXPECT_EQ(gpu.launches_without_kernel, 1u);
  EXPECT_EQ(gpu.kernels_without_launch, 1u);
}

TEST(KernelTable, OpsightGpuTraceGolden) {
  trace::Trace trace = opsight_gpu_trace();
  EXPECT_TRUE(has_gpu_work(trace));
  expect_golden_kernel_table(compute_kernel_table(trace));
}

TEST(KernelTable, CorrelationIdsLinkWhenFlowsAreMissing) {
  // The same trace without flows: every API call and its GPU work share a correlation id.
  expect_golden_kernel_table(compute_kernel_table(opsight_gpu_trace(false)));
}

TEST(KernelTable, AnAmbiguousCorrelationIdLinksNothing) {
  GpuTraceBuilder b;
  b.call(0, 10, "cudaLaunchKernel", 1);
  b.call(20, 10, "cudaLaunchKernel", 1);
  b.kernel_with(40, 10, "k", 1, "[1,1,1]");
  b.trace.finalize();
  KernelTable table = compute_kernel_table(b.trace);
  EXPECT_EQ(table.gpu.kernels_without_launch, 1u);
  EXPECT_EQ(table.gpu.launches_without_kernel, 2u);
}

TEST(KernelTable, KernelsOfAGraphReplayBelongToItsLaunch) {
  // cudaGraphLaunch's flow arrives at the replay's slice; its kernels nest under it.
  GpuTraceBuilder b;
  trace::Trace& trace = b.trace;
  trace.slices.add(0, 100, trace.intern("aten::mm"), b.op, b.cpu);
  trace::RowIndex launch = b.call(10, 10, "cudaGraphLaunch", 1);
  trace::RowIndex replay = trace.slices.add(30, 60, trace.intern("graph 3"),
                                            trace.intern(trace::kCategoryGpuGraph), b.stream);
  trace.slices.add(30, 20, trace.intern("k1"), b.kernel, b.stream);
  trace.slices.add(60, 20, trace.intern("k2"), b.kernel, b.stream);
  trace.flows.add(launch, replay, 1);
  trace.finalize();
  KernelTable table = compute_kernel_table(trace);
  ASSERT_EQ(table.kernels.size(), 2u);
  for (const KernelRow& row : table.kernels) {
    ASSERT_EQ(row.launched_by.size(), 1u) << row.name;
    EXPECT_EQ(row.launched_by[0].operator_name, "aten::mm");
  }
  EXPECT_EQ(table.gpu.kernel_launches, 1u);
  EXPECT_EQ(table.gpu.launches_without_kernel, 0u);
  EXPECT_EQ(table.gpu.devices[0].busy_ns, 40);  // the replay's slice is not GPU work
}

TEST(FindGpuLaunch, AKernelOfAReplayFindsTheReplaysLaunchAndAnUnlaunchedOneNothing) {
  GpuTraceBuilder b;
  trace::Trace& trace = b.trace;
  trace.slices.add(0, 100, trace.intern("aten::mm"), b.op, b.cpu);
  trace::RowIndex launch = b.call(10, 10, "cudaGraphLaunch", 1);
  trace::RowIndex replay = trace.slices.add(30, 60, trace.intern("graph 3"),
                                            trace.intern(trace::kCategoryGpuGraph), b.stream);
  trace.slices.add(30, 20, trace.intern("k1"), b.kernel, b.stream);
  trace.slices.add(200, 20, trace.intern("orphan"), b.kernel, b.stream);
  trace.flows.add(launch, replay, 1);
  trace.finalize();
  std::optional<trace::RowIndex> k1, orphan;
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row) {
    if (trace.str(trace.slices.name[row]) == "k1") k1 = row;
    if (trace.str(trace.slices.name[row]) == "orphan") orphan = row;
  }
  ASSERT_TRUE(k1 && orphan);
  auto found = find_gpu_launch(trace, *k1);
  ASSERT_TRUE(found);
  EXPECT_EQ(trace.str(trace.slices.name[found->call]), "cudaGraphLaunch");
  EXPECT_EQ(found->site.operator_name, "aten::mm");
  EXPECT_EQ(found->site.total_ns, 20);
  EXPECT_FALSE(find_gpu_launch(trace, *orphan));
  EXPECT_FALSE(find_gpu_launch(trace, static_cast<trace::RowIndex>(trace.slices.size())));
}

// PyTorch-profiler layout (what the Chrome JSON reader makes of torch.profiler's export):
// kernels on thread tracks pid = device, tid = stream, under a gpu_user_annotation
// projection; args "correlation", "grid" and "block" as compact JSON text; a driver call
// inside a runtime call; two devices.
TEST(KernelTable, PyTorchProfilerLayout) {
  trace::Trace trace;
  trace::TrackId cpu = trace.thread_track(4571, 4571);
  trace::TrackId stream0 = trace.thread_track(0, 7);
  trace::TrackId stream1 = trace.thread_track(1, 13);
  const trace::StringId runtime = trace.intern(trace::kCategoryCudaRuntime);
  const trace::StringId kernel = trace.intern(trace::kCategoryGpuKernel);
  const trace::StringId annotation = trace.intern(trace::kCategoryAnnotation);
  const trace::StringId op = trace.intern(trace::kCategoryOperator);
  const trace::StringId python = trace.intern(trace::kCategoryPython);
  trace.slices.add(0, 100, trace.intern("inference_step"), annotation, cpu);
  trace.slices.add(1, 98, trace.intern("torch/nn/modules/linear.py(125): forward"), python, cpu);
  trace.slices.add(2, 96, trace.intern("<built-in method linear>"), python, cpu);
  trace.slices.add(3, 90, trace.intern("aten::linear"), op, cpu);
  trace::RowIndex launch = trace.slices.add(10, 20, trace.intern("cudaLaunchKernel"), runtime, cpu);
  trace.slices.add(12, 10, trace.intern("cuLaunchKernel"), runtime, cpu);  // counted once
  trace::RowIndex launch2 =
      trace.slices.add(40, 10, trace.intern("cudaLaunchKernel"), runtime, cpu);
  trace.slices.add(60, 30, trace.intern("cudaDeviceSynchronize"), runtime, cpu);
  trace.slices.add(100, 200, trace.intern("inference_step"), annotation, stream0);
  trace::RowIndex gemm = trace.slices.add(110, 50, trace.intern("gemm"), kernel, stream0);
  trace.slice_args.add(gemm, trace.intern("grid"),
                       trace::ArgValue::of_string(trace.intern("[1,2,1]")));
  trace::RowIndex gemm_on_1 = trace.slices.add(140, 50, trace.intern("gemm"), kernel, stream1);
  trace.flows.add(launch, gemm, 1, trace.intern("ac2g"), trace.intern("ac2g"));
  trace.flows.add(launch2, gemm_on_1, 2, trace.intern("ac2g"), trace.intern("ac2g"));
  trace.finalize();

  KernelTable table = compute_kernel_table(trace);
  ASSERT_EQ(table.kernels.size(), 1u);
  const KernelRow& row = table.kernels[0];
  EXPECT_EQ(row.grid, "[1,2,1]");
  EXPECT_EQ(row.grid_variants, 1u);  // one kernel has none
  EXPECT_EQ(row.block, "");
  ASSERT_EQ(row.launched_by.size(), 1u);
  EXPECT_EQ(row.launched_by[0].operator_name, "aten::linear");
  EXPECT_EQ(row.launched_by[0].python_function, "<built-in method linear>");
  EXPECT_EQ(row.launched_by[0].source, "torch/nn/modules/linear.py:125");
  ASSERT_EQ(table.gpu.devices.size(), 2u);  // from the track's pid
  EXPECT_EQ(table.gpu.devices[1].device, 1);
  EXPECT_EQ(table.gpu.kernel_busy_ns, 100);
  EXPECT_DOUBLE_EQ(table.gpu.utilisation, 100.0 / (300.0 * 2));
  EXPECT_EQ(table.gpu.cuda_api_calls, 3u);
  EXPECT_EQ(table.gpu.cuda_api_ns, 60);
  EXPECT_EQ(table.gpu.synchronize_calls, 1u);
  EXPECT_EQ(table.gpu.synchronize_ns, 30);
  EXPECT_EQ(table.gpu.kernel_launches, 2u);  // cuLaunchKernel is part of cudaLaunchKernel
  EXPECT_EQ(table.gpu.launches_without_kernel, 0u);

  // The annotation as the inference: the synchronize call is waiting, not launching.
  const trace::RowIndex inferences[] = {0};
  ASSERT_EQ(trace.str(trace.slices.name[0]), "inference_step");
  HostDeviceSplit split = compute_host_device_split(trace, inferences);
  EXPECT_EQ(split.launch_overhead.per_inference.total_ns, 30);
  EXPECT_EQ(split.synchronize.per_inference.total_ns, 30);
  EXPECT_EQ(split.gpu_busy.per_inference.total_ns, 80);  // [110, 160) and [140, 190): one union
}

TEST(KernelTable, CopyKindFromTheNameWhenNoArgumentSaysIt) {
  trace::Trace trace;
  trace::TrackId stream = trace.thread_track(0, 7);
  trace::RowIndex copy = trace.slices.add(0, 10, trace.intern("Memcpy DtoD (Device -> Device)"),
                                          trace.intern(trace::kCategoryGpuMemcpy), stream);
  trace::RowIndex set = trace.slices.add(10, 10, trace.intern("Memset (Device)"),
                                         trace.intern(trace::kCategoryGpuMemset), stream);
  trace.finalize();
  EXPECT_EQ(copy_kind(trace, copy), "DtoD");
  EXPECT_EQ(copy_kind(trace, set), "Memset");
}

TEST(KernelTable, ACpuTraceHasNoGpuWork) {
  trace::Trace trace;
  trace.slices.add(0, 10, trace.intern("step"), 0, trace.thread_track(1, 1));
  trace.finalize();
  EXPECT_FALSE(has_gpu_work(trace));
  KernelTable table = compute_kernel_table(trace);
  EXPECT_TRUE(table.kernels.empty());
  EXPECT_TRUE(table.copies.empty());
  EXPECT_TRUE(table.gpu.devices.empty());
}

TEST(HostDeviceSplit, PerInferenceGolden) {
  trace::Trace trace = opsight_gpu_trace();
  trace::RowIndex serve = 0;
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == "app.py(40): serve") serve = row;
  const trace::RowIndex inferences[] = {serve};
  HostDeviceSplit split = compute_host_device_split(trace, inferences);
  EXPECT_EQ(split.inference_count, 1u);
  EXPECT_EQ(split.inferences_with_gpu_work, 1u);
  EXPECT_EQ(split.host.per_inference.total_ns, 1000);
  EXPECT_EQ(split.launch_overhead.per_inference.total_ns, 105);
  // HtoD [20, 60), gemm [200, 350), relu [530, 560), DtoH [660, 700): 260; not the orphan.
  EXPECT_EQ(split.gpu_busy.per_inference.total_ns, 260);
  EXPECT_EQ(split.gpu_idle.per_inference.total_ns,
            700 - 10 - 260);  // first launch at 10, last end at 700
  EXPECT_EQ(split.host_to_device.per_inference.total_ns, 40);
  EXPECT_EQ(split.device_to_host.per_inference.total_ns, 40);
}

TEST(HostDeviceSplit, InferencesWithoutGpuWorkCountZero) {
  trace::Trace trace = opsight_gpu_trace();
  trace::TrackId other = trace.thread_track(10, 11);
  trace.slices.add(0, 50, trace.intern("cpu only"), 0, other);
  trace.finalize();
  trace::RowIndex serve = 0, cpu_only = 0;
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row) {
    if (trace.str(trace.slices.name[row]) == "app.py(40): serve") serve = row;
    if (trace.str(trace.slices.name[row]) == "cpu only") cpu_only = row;
  }
  const trace::RowIndex inferences[] = {serve, cpu_only};
  HostDeviceSplit split = compute_host_device_split(trace, inferences);
  EXPECT_EQ(split.inferences_with_gpu_work, 1u);
  EXPECT_EQ(split.gpu_busy.per_inference.count, 2u);
  EXPECT_EQ(split.gpu_busy.present_in, 1u);
  EXPECT_EQ(split.host.present_in, 2u);
  EXPECT_EQ(split.gpu_busy.per_inference.min_ns, 0);
  EXPECT_DOUBLE_EQ(split.gpu_busy.per_inference.mean_ns, 130.0);
  EXPECT_DOUBLE_EQ(split.host.per_inference.mean_ns, 525.0);
}

}  // namespace
}  // namespace opsight::analyze
