// Replays tests/fuzz_regressions/{native,chrome_json,pftrace}/ (inputs that once crashed a reader
// or that a fuzzer found interesting) through the readers in every test build, so that the
// release and ASan suites of `make test` check them on every run, not only the fuzz build.
// The native inputs were found by a fuzz build that skips chunk checksums
// (OPSIGHT_FUZZING_SKIP_CHECKSUM); each is read as it is (the checksums stop it) and again
// with its checksums recomputed, which takes it to the decoder the way the fuzzer did.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "format/chunk_codec.hpp"
#include "io/io.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const std::string& folder) {
  std::vector<fs::path> paths;
  fs::path root = fs::path(OPSIGHT_SOURCE_DIR) / "tests" / "fuzz_regressions" / folder;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_regular_file() && entry.path().filename() != "README.md") {
      paths.push_back(entry.path());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::string contents_of(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

// The same bytes with every chunk's payload and header checksums made right (a payload
// cut short is checked over what is there), as a fuzz build would have accepted them.
std::string with_checksums_recomputed(std::string bytes) {
  using opsight::format::ChunkHeader;
  size_t offset = sizeof(opsight::format::FileHeader);
  while (offset <= bytes.size() && bytes.size() - offset >= sizeof(ChunkHeader)) {
    ChunkHeader header;
    std::memcpy(&header, bytes.data() + offset, sizeof(header));
    size_t payload_offset = offset + sizeof(ChunkHeader);
    size_t payload_bytes = std::min<size_t>(header.payload_bytes, bytes.size() - payload_offset);
    header.payload_check =
        opsight::format::checksum32(bytes.data() + payload_offset, payload_bytes);
    header.header_check = opsight::format::checksum32(&header, 12);
    std::memcpy(bytes.data() + offset, &header, sizeof(header));
    offset = payload_offset + payload_bytes;
  }
  return bytes;
}

// What the native fuzzer checks: a file that reads is written and read again alike.
void check_native(const std::string& bytes, const fs::path& path) {
  opsight::io::ReadResult result = opsight::io::read_native(bytes);
  if (!result.ok()) {
    EXPECT_FALSE(result.error->message.empty()) << path;
    return;
  }
  opsight::io::ReadResult again = opsight::io::read_native(opsight::io::write_native(result.trace));
  ASSERT_TRUE(again.ok()) << path << ": " << again.error->message;
  EXPECT_EQ(again.trace.slices.size(), result.trace.slices.size()) << path;
}

TEST(FuzzRegressions, NativeInputsReadWithoutCrashing) {
  std::vector<fs::path> paths = inputs_of("native");
  ASSERT_FALSE(paths.empty()) << "tests/fuzz_regressions/native/ is empty";
  for (const fs::path& path : paths) {
    std::string bytes = contents_of(path);
    check_native(bytes, path);
    check_native(with_checksums_recomputed(bytes), path);
  }
}

TEST(FuzzRegressions, ChromeJsonInputsReadWithoutCrashing) {
  std::vector<fs::path> paths = inputs_of("chrome_json");
  ASSERT_FALSE(paths.empty()) << "tests/fuzz_regressions/chrome_json/ is empty";
  for (const fs::path& path : paths) {
    std::string bytes = contents_of(path);
    for (int threads : {1, 2}) {
      opsight::io::ReadResult result = opsight::io::read_chrome_json(bytes, threads);
      if (!result.ok()) {
        EXPECT_FALSE(result.error->message.empty()) << path;
      }
    }
  }
}

// What the Perfetto fuzzer checks: an input that reads is written and read again alike.
TEST(FuzzRegressions, PerfettoInputsReadWithoutCrashing) {
  std::vector<fs::path> paths = inputs_of("pftrace");
  ASSERT_FALSE(paths.empty()) << "tests/fuzz_regressions/pftrace/ is empty";
  for (const fs::path& path : paths) {
    opsight::io::ReadResult result = opsight::io::read_perfetto(contents_of(path));
    if (!result.ok()) {
      EXPECT_FALSE(result.error->message.empty()) << path;
      continue;
    }
    opsight::io::ReadResult again =
        opsight::io::read_perfetto(opsight::io::write_perfetto(result.trace));
    ASSERT_TRUE(again.ok()) << path << ": " << again.error->message;
    EXPECT_FALSE(again.damage.has_value()) << path;
    EXPECT_EQ(again.trace.slices.size(), result.trace.slices.size()) << path;
    EXPECT_EQ(again.trace.instants.size(), result.trace.instants.size()) << path;
    EXPECT_EQ(again.trace.counters.size(), result.trace.counters.size()) << path;
  }
}

TEST(FuzzRegressions, RecomputedChecksumsMakeADamagedChunkReadable) {
  opsight::trace::Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(10, 5, trace.intern("span"), 0, track);
  trace.finalize();
  std::string bytes = opsight::io::write_native(trace);
  bytes[bytes.size() - 1] = static_cast<char>(bytes.back() ^ 0x01);  // the last chunk's payload
  opsight::io::ReadResult damaged = opsight::io::read_native(bytes);
  opsight::io::ReadResult repaired = opsight::io::read_native(with_checksums_recomputed(bytes));
  ASSERT_TRUE(repaired.ok());
  EXPECT_TRUE(repaired.trace.run.complete);
  EXPECT_TRUE(!damaged.ok() || !damaged.trace.run.complete);
}

}  // namespace
