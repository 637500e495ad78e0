// Test-only: records `body` in a session of its own into memory and reads the native
// bytes back with the io module's reader (the record tests that check what a trace shows
// link io for that).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "io/io.hpp"
#include "record/recorder.hpp"

namespace opsight::record::testing {

inline trace::Trace record_and_read(const std::function<void()>& body,
                                    RecordingOptions options = {}) {
  auto sink = std::make_unique<MemorySink>();
  EXPECT_FALSE(start_recording([&](std::string*) { return std::move(sink); }, std::move(options))
                   .has_value());
  body();
  auto stopped = stop_recording();
  EXPECT_TRUE(stopped.sink);
  auto result = io::read_native(static_cast<MemorySink&>(*stopped.sink).bytes());
  EXPECT_TRUE(result.ok());
  EXPECT_FALSE(result.damage.has_value()) << result.damage->message;
  return std::move(result.trace);
}

}  // namespace opsight::record::testing
