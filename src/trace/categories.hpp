// Canonical slice categories: the names that readers give to what other tools call by
// their own names, so that analyses (operator tables, per-inference breakdowns) ask one
// question of every trace whatever tool wrote it.
//
// The Chrome JSON reader maps a foreign category to one of these when it knows the tool
// that wrote the file (run.source_format "pytorch-profiler" or "onnxruntime"); categories
// it does not know are kept as written. The mapping it applied is recorded once per trace
// in RunInfo::extra under kCategoryMapKey (see docs/reports.md, "Foreign traces"), so the
// original category of every slice stays recoverable.
#pragma once

#include <string_view>

namespace opsight::trace {

// A framework operator run on the CPU: PyTorch `cpu_op` (aten::linear, ...), an ONNX
// Runtime `Node` event that times a kernel (name ending `_kernel_time`).
inline constexpr std::string_view kCategoryOperator = "operator";
// A kernel run on the GPU (PyTorch `kernel`, ONNX Runtime `Kernel`).
inline constexpr std::string_view kCategoryGpuKernel = "gpu_kernel";
// A copy to, from or on the GPU (PyTorch `gpu_memcpy`).
inline constexpr std::string_view kCategoryGpuMemcpy = "gpu_memcpy";
// A memset on the GPU (PyTorch `gpu_memset`).
inline constexpr std::string_view kCategoryGpuMemset = "gpu_memset";
// A host thread waiting for the GPU: a stream, event, context or device synchronisation
// (CUPTI's synchronization records; PyTorch `cuda_sync`).
inline constexpr std::string_view kCategoryGpuSync = "gpu_sync";
// One replay of a CUDA graph on a GPU stream: the kernels it ran nest under it.
inline constexpr std::string_view kCategoryGpuGraph = "gpu_graph";
// A call into the CUDA runtime or driver API on the CPU (PyTorch `cuda_runtime`,
// `cuda_driver`; ONNX Runtime `Api`).
inline constexpr std::string_view kCategoryCudaRuntime = "cuda_runtime";
// A Python function (PyTorch `python_function`; opsight's own Python spans).
inline constexpr std::string_view kCategoryPython = "python";
// A call of a torch.nn.Module (PyTorch `python_function` events named `nn.Module: X_n`).
inline constexpr std::string_view kCategoryModule = "module";
// A range the user marked (PyTorch `user_annotation`, i.e. record_function, and
// `gpu_user_annotation`, its projection on a GPU stream).
inline constexpr std::string_view kCategoryAnnotation = "annotation";
// A phase of an inference session (ONNX Runtime `Session`: model_run,
// SequentialExecutor::Execute, session_initialization, ...).
inline constexpr std::string_view kCategorySession = "session";
// The synchronisation around an operator (ONNX Runtime `Node` events named
// `*_fence_before` / `*_fence_after`).
inline constexpr std::string_view kCategoryOperatorFence = "operator_fence";
// The profiler's own spans (PyTorch `Trace`: "PyTorch Profiler (0)", and `overhead`).
inline constexpr std::string_view kCategoryProfiler = "profiler";

// RunInfo::extra key under which a reader records the category mapping it applied, as
// comma-separated `original=canonical` entries, e.g.
// "cpu_op=operator,python_function=python,python_function[nn.Module: *]=module".
// A bracketed pattern restricts an entry to slices whose name matches it (`*` is any text).
inline constexpr std::string_view kCategoryMapKey = "category_map";

}  // namespace opsight::trace
