// The span id of a slice whose .opsight file does not carry one (no kSpanId event): derived
// from the run's trace id, the slice's thread and the sequence of begins on that thread, so
// that the whole-file reader, the live tail (io::NativeTail) and the writer (which writes
// a kSpanId event only where a slice's id differs from this) agree on every id.
#pragma once

#include <cstdint>

#include "trace/trace.hpp"

namespace opsight::io::native {

// The salt a run's span ids are mixed with: a bijection of its trace id.
inline uint64_t span_id_salt(const trace::TraceId& trace_id) {
  return trace_id.low ^ trace::mix64(trace_id.high);
}

// Unique per (thread, sequence): multiplying by an odd constant and xoring the salt are
// both bijections on 64 bits. `begin_sequence` counts the thread's begins from 1.
inline uint64_t derived_span_id(uint32_t thread_index, uint64_t begin_sequence, uint64_t salt) {
  uint64_t sequence = (uint64_t{thread_index} << 40) + begin_sequence;
  return (sequence * 0x9e3779b97f4a7c15ULL) ^ salt;
}

// The span id of an async slice (whose begin and end may be on different threads): derived
// from the thread that began it and the sequence of async begins on that thread, so that
// the reader (which pairs begins and ends after reading every thread) and the live tail
// (which pairs them as they come) give it the same id. A different mix than a thread
// span's, so the two sequences do not meet.
inline uint64_t derived_async_span_id(uint32_t thread_index, uint64_t async_begin_sequence,
                                      uint64_t salt) {
  uint64_t sequence = (uint64_t{thread_index} << 40) + async_begin_sequence;
  return trace::mix64(sequence ^ ~salt) | 1;
}

}  // namespace opsight::io::native
