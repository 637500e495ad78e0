// The GPU collector of a build without CUPTI's headers (OPSIGHT_WITH_CUDA off): it says so.
#include "cuda/gpu_collection.hpp"

namespace opsight::cuda {

bool built_with_cuda() { return false; }
bool gpu_collection_running() { return false; }

std::optional<std::string> start_gpu_collection(const GpuCollectionOptions&) {
  return std::string(
      "GPU tracing off: this opsight was built without CUDA support (CUPTI's headers were not "
      "found at build "
      "time; docs/gpu.md says how to build with them)");
}

GpuCollectionResult stop_gpu_collection() { return {}; }
bool pause_gpu_collection() { return false; }
bool resume_gpu_collection() { return false; }

}  // namespace opsight::cuda
