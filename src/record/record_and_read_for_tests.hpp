// Test-only: records `body` in a session of its own into memory and reads the native
// bytes back with the io module's reader (the record tests that check what a trace shows
// link io for that), and the lookups those tests share.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

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

// The first slice named `name`, or kNoRow.
inline trace::RowIndex row_named(const trace::Trace& trace, std::string_view name) {
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == name) return row;
  return trace::kNoRow;
}

}  // namespace opsight::record::testing
