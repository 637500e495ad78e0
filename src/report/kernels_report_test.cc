// `opsight report --kernels` and the host/device split of `--breakdown`: golden text on a
// small GPU trace built here, the JSON's numbers, the CSV's rows, and a CPU trace that
// says it has no kernels and whose breakdown is unchanged.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "report/report.hpp"
#include "trace/categories.hpp"

namespace opsight::report {
namespace {

// Two inferences "infer" [0, 1000) and [1000, 2000), each: aten::addmm [operator] under
// nn.Module: Linear_0 [module] launching "gemm" (grid [2,1,1], then [4,1,1]) with a
// cudaLaunchKernel of 20 ns, and a cudaMemcpyAsync of 10 ns whose DtoH copy of 4000 bytes
// takes 40 ns. GPU work on device 0, stream 7 (docs/gpu.md's layout), linked by flows.
trace::Trace gpu_inference_trace() {
  trace::Trace trace;
  const trace::TrackId cpu = trace.thread_track(10, 10);
  const trace::TrackId stream =
      trace.process_async_track(10, (uint64_t{1} << 62) | 7, "GPU 0 stream 7");
  const trace::StringId runtime = trace.intern(trace::kCategoryCudaRuntime);
  const trace::StringId kernel = trace.intern(trace::kCategoryGpuKernel);
  const trace::StringId memcpy = trace.intern(trace::kCategoryGpuMemcpy);
  auto string_arg = [&](trace::RowIndex row, std::string_view key, std::string_view value) {
    trace.slice_args.add(row, trace.intern(key), trace::ArgValue::of_string(trace.intern(value)));
  };
  for (int64_t i = 0; i < 2; ++i) {
    const int64_t start = 1000 * i;
    trace.slices.add(start, 1000, trace.intern("infer"), trace.intern("python"), cpu);
    trace.slices.add(start + 100, 400, trace.intern("nn.Module: Linear_0"),
                     trace.intern(trace::kCategoryModule), cpu);
    trace.slices.add(start + 110, 300, trace.intern("aten::addmm"),
                     trace.intern(trace::kCategoryOperator), cpu);
    const trace::RowIndex launch =
        trace.slices.add(start + 120, 20, trace.intern("cudaLaunchKernel"), runtime, cpu);
    const trace::RowIndex gemm =
        trace.slices.add(start + 200, 100 + 100 * i, trace.intern("gemm"), kernel, stream);
    string_arg(gemm, "grid", i == 0 ? "[2,1,1]" : "[4,1,1]");
    string_arg(gemm, "block", "[128,1,1]");
    const trace::RowIndex call =
        trace.slices.add(start + 600, 10, trace.intern("cudaMemcpyAsync"), runtime, cpu);
    const trace::RowIndex copy =
        trace.slices.add(start + 700, 40, trace.intern("Memcpy DtoH"), memcpy, stream);
    string_arg(copy, "kind", "DtoH");
    trace.slice_args.add(copy, trace.intern("bytes"), trace::ArgValue::of_int(4000));
    trace.flows.add(launch, gemm, static_cast<uint64_t>(2 * i + 1));
    trace.flows.add(call, copy, static_cast<uint64_t>(2 * i + 2));
  }
  trace.finalize();
  return trace;
}

trace::Trace cpu_trace() {
  trace::Trace trace;
  const trace::TrackId track = trace.thread_track(1, 1);
  trace.slices.add(0, 100, trace.intern("infer"), 0, track);
  trace.slices.add(10, 50, trace.intern("step"), 0, track);
  trace.finalize();
  return trace;
}

TEST(KernelsReport, GoldenText) {
  trace::Trace trace = gpu_inference_trace();
  ReportOptions options;
  options.source_name = "gpu.opsight";
  EXPECT_EQ(render_kernels(trace, options),
            "opsight kernels: gpu.opsight, 14 slices, 2.00 µs\n"
            "2 kernels, 1 name, 300 ns of kernel time\n"
            "GPU 0: busy 380 ns, kernels 300 ns (15.0% utilisation) of 2.00 µs traced\n"
            "CUDA API 60 ns in 4 calls (2 kernel launches 40 ns, 0 synchronize 0 ns); 0 launches "
            "with no kernel, 0 kernels with no launch\n"
            "kernel  count   total   share    mean     p50     p99  grid               block      "
            "launched by\n"
            "gemm        2  300 ns  100.0%  150 ns  150 ns  199 ns  [2,1,1] (+1 more)  [128,1,1]  "
            "aten::addmm (2)\n"
            "\n"
            "copies and memsets\n"
            "kind  count    bytes  total  bandwidth\n"
            "DtoH      2  7.8 KiB  80 ns   100 GB/s\n"
            "\n"
            "launch sites (kernel <- operator <- module <- Python source)\n"
            "kernel  count   total  operator     module               source\n"
            "gemm        2  300 ns  aten::addmm  nn.Module: Linear_0  infer\n"
            "tracer overhead: not recorded in this trace, 0 events dropped\n");
}

TEST(KernelsReport, JsonAndCsv) {
  trace::Trace trace = gpu_inference_trace();
  ReportOptions options;
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_kernels(trace, options));
  EXPECT_EQ(document["kernel_slices"], 2);
  ASSERT_EQ(document["kernels"].size(), 1u);
  const nlohmann::json& gemm = document["kernels"][0];
  EXPECT_EQ(gemm["name"], "gemm");
  EXPECT_EQ(gemm["total_ns"], 300);
  EXPECT_EQ(gemm["p50_ns"], 150);
  EXPECT_EQ(gemm["grid"], "[2,1,1]");
  EXPECT_EQ(gemm["grid_variants"], 2);
  ASSERT_EQ(gemm["launched_by"].size(), 1u);
  EXPECT_EQ(gemm["launched_by"][0]["operator"], "aten::addmm");
  EXPECT_EQ(gemm["launched_by"][0]["module"], "nn.Module: Linear_0");
  EXPECT_EQ(gemm["launched_by"][0]["python"], "infer");
  EXPECT_EQ(gemm["launched_by"][0]["source"], "");
  ASSERT_EQ(document["copies"].size(), 1u);
  EXPECT_EQ(document["copies"][0]["bytes"], 8000);
  EXPECT_EQ(document["gpu"]["busy_ns"], 380);
  EXPECT_EQ(document["gpu"]["kernel_busy_ns"], 300);
  EXPECT_EQ(document["gpu"]["utilisation"], 0.15);
  EXPECT_EQ(document["gpu"]["cuda_api_ns"], 60);
  EXPECT_FALSE(document["overhead_known"]);

  options.format = OutputFormat::kCsv;
  EXPECT_EQ(render_kernels(trace, options),
            "name,count,total_ns,share,mean_ns,min_ns,p50_ns,p99_ns,max_ns,grid,grid_variants,"
            "block,block_variants,operator,without_launch\r\n"
            "gemm,2,300,1,150,100,150,199,200,\"[2,1,1]\",2,\"[128,1,1]\",1,aten::addmm,0\r\n");
}

TEST(KernelsReport, TextShortensTemplatedKernelNamesAndJsonKeepsThem) {
  const std::string fill =
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
      "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
      "at::detail::Array<char*, 1>)";
  const std::string clamp =
      "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
      "namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
      "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()"
      "() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous "
      "namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
      "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()"
      "() const::{lambda(float)#1}, at::detail::Array<char*, 2>)";
  trace::Trace trace;
  const trace::TrackId stream = trace.thread_track(0, 7);
  const trace::StringId kernel = trace.intern(trace::kCategoryGpuKernel);
  trace.slices.add(0, 20, trace.intern(fill), kernel, stream);
  trace.slices.add(20, 10, trace.intern(clamp), kernel, stream);
  trace.finalize();
  ReportOptions options;
  const std::string text = render_kernels(trace, options);
  EXPECT_NE(text.find("\nvectorized_elementwise_kernel<4, FillFunctor<float>, Array<…  "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nvectorized_elementwise_kernel<4, launch_clamp_scalar(Tensor…  "),
            std::string::npos)
      << text;
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_kernels(trace, options));
  EXPECT_EQ(document["kernels"][0]["name"], fill);
  EXPECT_EQ(document["kernels"][1]["name"], clamp);
}

TEST(KernelsReport, ACpuTraceSaysItHasNoKernels) {
  trace::Trace trace = cpu_trace();
  ReportOptions options;
  std::string text = render_kernels(trace, options);
  EXPECT_NE(text.find("no GPU kernels in this trace: record with a GPU session (docs/gpu.md)\n"),
            std::string::npos)
      << text;
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_kernels(trace, options));
  EXPECT_TRUE(document["kernels"].empty());
  EXPECT_TRUE(document["gpu"]["devices"].empty());
}

TEST(BreakdownReport, HostDeviceSplitOfAGpuTrace) {
  trace::Trace trace = gpu_inference_trace();
  ReportOptions options;
  options.breakdown_span = "infer";
  std::string text = render_breakdown(trace, options);
  EXPECT_NE(text.find("host and device per inference (2 of 2 launched GPU work"), std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU idle gaps"), std::string::npos);
  options.format = OutputFormat::kJson;
  nlohmann::json document = nlohmann::json::parse(render_breakdown(trace, options));
  const nlohmann::json& split = document["host_device"];
  EXPECT_EQ(split["inferences_with_gpu_work"], 2);
  EXPECT_EQ(split["host"]["mean_ns"], 1000);
  EXPECT_EQ(split["launch_overhead"]["mean_ns"], 30);
  // Busy: the gemm (100, then 200) and the copy (40); from the launch at 120 to the copy's
  // end at 740: idle = 620 - busy.
  EXPECT_EQ(split["gpu_busy"]["min_ns"], 140);
  EXPECT_EQ(split["gpu_busy"]["max_ns"], 240);
  EXPECT_EQ(split["gpu_idle"]["min_ns"], 380);
  EXPECT_EQ(split["gpu_idle"]["max_ns"], 480);
  EXPECT_EQ(split["device_to_host"]["mean_ns"], 40);
  EXPECT_EQ(split["host_to_device"]["present_in"], 0);
  EXPECT_EQ(split["gpu_busy"]["share_of_host"], 0.19);
  options.format = OutputFormat::kCsv;
  std::string csv = render_breakdown(trace, options);
  EXPECT_NE(csv.find("\r\n(total),2,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\r\n(GPU busy),2,190,140,"), std::string::npos) << csv;
}

TEST(BreakdownReport, ACpuTraceGetsNoHostDeviceSplit) {
  trace::Trace trace = cpu_trace();
  ReportOptions options;
  options.breakdown_span = "infer";
  EXPECT_EQ(render_breakdown(trace, options).find("host and device"), std::string::npos);
  options.format = OutputFormat::kJson;
  EXPECT_FALSE(nlohmann::json::parse(render_breakdown(trace, options)).contains("host_device"));
  options.format = OutputFormat::kCsv;
  EXPECT_EQ(render_breakdown(trace, options).find("(GPU"), std::string::npos);
}

}  // namespace
}  // namespace opsight::report
