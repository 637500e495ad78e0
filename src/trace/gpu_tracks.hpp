// How GPU work is laid out in a trace (docs/gpu.md): one process-wide async track per
// (device, stream) of the process that launched the work, keyed so that any reader,
// report or viewer can tell a GPU stream's track from other async tracks and find its
// device and stream again. Header-only: the GPU collector writes these keys, reports and
// the UI server read them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trace/trace.hpp"

namespace opsight::trace {

// Bit 62 marks a GPU stream's async key; bit 61 an NVTX domain's (start/end ranges).
inline constexpr uint64_t kGpuStreamKeyFlag = uint64_t{1} << 62;
inline constexpr uint64_t kNvtxDomainKeyFlag = uint64_t{1} << 61;
// GPU tracks sort after the threads of their process (sort_index is lower first).
inline constexpr int64_t kGpuTrackSortBase = 1'000'000;

constexpr uint64_t gpu_stream_track_key(uint32_t device, uint32_t stream) {
  return kGpuStreamKeyFlag | (uint64_t{device & 0xFFFFu} << 32) | stream;
}
constexpr bool is_gpu_stream_track_key(uint64_t key) {
  return (key & (uint64_t{3} << 62)) == kGpuStreamKeyFlag;
}
constexpr uint32_t gpu_device_of_key(uint64_t key) {
  return static_cast<uint32_t>((key >> 32) & 0xFFFFu);
}
constexpr uint32_t gpu_stream_of_key(uint64_t key) { return static_cast<uint32_t>(key); }

inline bool is_gpu_stream_track(const Track& track) {
  return track.kind == TrackKind::kAsync && is_gpu_stream_track_key(track.async_key);
}

// The argument keys of GPU slices that analyses read (docs/gpu.md lists them all): the GPU
// collector writes them, the kernel analyses look for them.
inline constexpr std::string_view kGpuArgDevice = "device";
inline constexpr std::string_view kGpuArgStream = "stream";
inline constexpr std::string_view kGpuArgCorrelationId = "correlation_id";
inline constexpr std::string_view kGpuArgGrid = "grid";
inline constexpr std::string_view kGpuArgBlock = "block";
inline constexpr std::string_view kGpuArgBytes = "bytes";
inline constexpr std::string_view kGpuArgCopyKind = "kind";

inline std::string gpu_stream_track_name(uint32_t device, uint32_t stream) {
  return "GPU " + std::to_string(device) + " stream " + std::to_string(stream);
}

}  // namespace opsight::trace
