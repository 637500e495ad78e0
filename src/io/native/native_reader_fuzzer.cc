// libFuzzer target: the native reader must never crash, hang or read out of bounds, and a
// file it accepts must survive being written and read again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  opsight::io::ReadResult result = opsight::io::read_native(bytes);
  if (result.ok() && result.trace.slices.size() < 10000) {
    std::string again = opsight::io::write_native(result.trace);
    opsight::io::ReadResult reread = opsight::io::read_native(again);
    if (!reread.ok() || reread.trace.slices.size() != result.trace.slices.size()) __builtin_trap();
  }
  return 0;
}
