// libFuzzer entry point for read_chrome_json: any bytes must give a ReadResult (an error,
// a damaged trace or a whole one), never a crash, a hang or an exception. When a trace is
// read, it is also written back and read again, so the writer sees fuzzed content too and
// its output must always be valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  opsight::io::ReadResult result = opsight::io::read_chrome_json(bytes);
  if (!result.ok()) return 0;
  std::string written = opsight::io::write_chrome_json(result.trace);
  opsight::io::ReadResult reread = opsight::io::read_chrome_json(written);
  if (!reread.ok() || reread.damage) std::abort();  // the writer produced invalid JSON
  if (reread.trace.slices.size() != result.trace.slices.size()) std::abort();
  return 0;
}
