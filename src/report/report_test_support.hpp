// Test-only helpers shared by the report module's tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace opsight::report::testing {

// A trace's bytes written to a file of its own in the temporary folder (named by
// `prefix`, the process and a counter: tests of the binary may run in parallel
// processes), removed when this goes; for the reports that read a file (streaming).
class TemporaryTraceFile {
 public:
  TemporaryTraceFile(std::string_view prefix, const std::string& bytes) {
    path_ = (std::filesystem::temp_directory_path() /
             (std::string(prefix) + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter_++) + ".opsight"))
                .string();
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    EXPECT_NE(file, nullptr) << path_;
    if (file == nullptr) return;
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size()) << path_;
    std::fclose(file);
  }
  ~TemporaryTraceFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TemporaryTraceFile(const TemporaryTraceFile&) = delete;
  TemporaryTraceFile& operator=(const TemporaryTraceFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  static inline std::atomic<int> counter_ = 0;
  std::string path_;
};

}  // namespace opsight::report::testing
