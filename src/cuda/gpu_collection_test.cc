// The collector's start on machines that cannot trace a GPU: a build without CUPTI's
// headers, no libcupti, a libcupti but no driver. Each gets one line that says why, and
// stop is harmless. On a GPU machine the collector starts and stops.
#include "cuda/gpu_collection.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

namespace opsight::cuda {
namespace {

bool driver_present() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver != nullptr) dlclose(driver);
  return driver != nullptr;
}

TEST(GpuCollection, WithoutLibcuptiSaysWhereItLookedAndWhatToSet) {
  if (!built_with_cuda()) {
    auto problem = start_gpu_collection({});
    ASSERT_TRUE(problem);
    EXPECT_NE(problem->find("built without CUDA support"), std::string::npos) << *problem;
    EXPECT_FALSE(gpu_collection_running());
    return;
  }
  GpuCollectionOptions options;
  options.cupti_path = "/nonexistent/libcupti.so.13";
  auto problem = start_gpu_collection(options);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("GPU tracing off: libcupti not found"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("/nonexistent/libcupti.so.13"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("OPSIGHT_CUPTI_PATH"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find('\n'), std::string::npos) << "one line";
  EXPECT_FALSE(gpu_collection_running());
  EXPECT_TRUE(stop_gpu_collection().log.empty());
}

#ifdef OPSIGHT_CUPTI_LIBRARY_DIR
TEST(GpuCollection, WithLibcuptiButNoDriverSaysSoOrOnAGpuStartsAndStops) {
  GpuCollectionOptions options;
  options.cupti_path = std::string(OPSIGHT_CUPTI_LIBRARY_DIR) + "/libcupti.so.13";
  auto problem = start_gpu_collection(options);
  if (!driver_present()) {
    ASSERT_TRUE(problem) << "started without a driver";
    EXPECT_NE(problem->find("GPU tracing off: no NVIDIA driver"), std::string::npos) << *problem;
    EXPECT_EQ(problem->find('\n'), std::string::npos) << "one line";
    EXPECT_FALSE(gpu_collection_running());
    return;
  }
  // A driver (a GPU machine): CUPTI attaches, or says in one line why it cannot.
  if (problem) {
    EXPECT_EQ(problem->find('\n'), std::string::npos) << *problem;
    return;
  }
  EXPECT_TRUE(gpu_collection_running());
  GpuCollectionResult result = stop_gpu_collection();
  EXPECT_FALSE(gpu_collection_running());
  EXPECT_NE(result.collector.find("CUPTI API"), std::string::npos);
  EXPECT_FALSE(result.clock_alignment.empty());
}
#endif

}  // namespace
}  // namespace opsight::cuda
