// libFuzzer target: the native reader must never crash, hang or read out of bounds, and a
// file it accepts must survive being written and read again. A window read goes through
// the file's time index (or, where the index is missing or damaged, a scan): it must never
// crash either, and fail only where the whole read fails.
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
  // The window from the input's last byte: the whole trace, a part of it or nothing.
  int64_t end = size > 0 ? int64_t{data[size - 1]} << 10 : 0;
  opsight::io::ReadResult window = opsight::io::read_native(bytes, {end / 4, end});
  if (window.ok() != result.ok()) __builtin_trap();
  return 0;
}
