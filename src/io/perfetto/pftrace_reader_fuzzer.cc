// libFuzzer target: the Perfetto protobuf reader must never crash, hang, read out of bounds
// or allocate from a length it was given; a trace it reads is written back with the
// Perfetto writer and must read again with as many slices, instants and counter samples.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  opsight::io::ReadResult result = opsight::io::read_perfetto(bytes);
  if (result.ok() && result.trace.slices.size() < 10000) {
    std::string again = opsight::io::write_perfetto(result.trace);
    opsight::io::ReadResult reread = opsight::io::read_perfetto(again);
    if (!reread.ok() || reread.damage) __builtin_trap();
    if (reread.trace.slices.size() != result.trace.slices.size() ||
        reread.trace.instants.size() != result.trace.instants.size() ||
        reread.trace.counters.size() != result.trace.counters.size())
      __builtin_trap();
  }
  return 0;
}
