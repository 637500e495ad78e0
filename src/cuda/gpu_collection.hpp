// The GPU collector's lifecycle, as the session sees it: start collecting with a session,
// stop with it and get what the GPU ran. Behind it, CUPTI's Activity API
// (cupti_collector.cc, built where CUPTI's headers are found: OPSIGHT_WITH_CUDA), with
// libcupti loaded by dlopen at run time, so the core never needs CUDA to load. Without
// CUPTI at build time, or without libcupti, a driver or a GPU at run time, start says why
// in one line and the session records everything else.
//
// After stop CUPTI is detached (flushed, every kind disabled, unsubscribed, finalized), so
// the program runs as fast as before the session (the cost pytorch#144455 describes of a
// CUPTI left attached is not paid).
//
// Thread-safety: start and stop from one thread at a time (the session's); CUPTI's
// buffers are processed on a thread of the collector's own, never on the program's.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "cuda/gpu_activity.hpp"

namespace opsight::cuda {

struct GpuCollectionOptions {
  // Bounds what is held until stop: records beyond it are dropped and counted.
  size_t max_records = 4'000'000;
  // CUPTI's activity buffers: their size and how many may be in flight; when all are
  // taken CUPTI drops records and counts them (reported as drops).
  size_t buffer_bytes = 8u << 20;
  size_t max_buffers = 32;
  // libcupti to load; empty: OPSIGHT_CUPTI_PATH, a copy already loaded, then the loader's
  // search path and the usual CUDA toolkit folders.
  std::string cupti_path;
};

struct GpuCollectionResult {
  GpuActivityLog log;
  std::string collector;        // "CUPTI 13.2 (API 130200)"
  std::string clock_alignment;  // how timestamps met the recorder's clock
  uint64_t filtered_api_calls = 0;
};

// Starts collecting. Returns nothing when collecting, else the one line that says why not
// ("GPU tracing off: no NVIDIA driver (libcuda.so.1 not found)").
std::optional<std::string> start_gpu_collection(const GpuCollectionOptions& options);

// Whether a collection is running.
bool gpu_collection_running();

// Stops the running collection (flushes CUPTI's buffers, detaches CUPTI) and returns what
// it gathered; an empty result when none was running.
GpuCollectionResult stop_gpu_collection();

// Pauses and resumes the running collection (`opsight ctl PID off|on`, opsight.disable()):
// while paused every activity kind is disabled, so CUDA work costs the program nothing of
// CUPTI's; records already taken stay. False when no collection runs.
bool pause_gpu_collection();
bool resume_gpu_collection();

// Whether this build can collect at all (OPSIGHT_WITH_CUDA).
bool built_with_cuda();

}  // namespace opsight::cuda
