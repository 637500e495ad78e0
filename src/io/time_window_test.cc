// `--window FROM:TO` (io/time_window.hpp): units, and errors that name the option.
#include "io/time_window.hpp"

#include <gtest/gtest.h>

namespace {

using opsight::io::parse_time_window;

TEST(TimeWindow, ParsesEachUnit) {
  std::string problem;
  auto window = parse_time_window("2.5s:3.0s", &problem);
  ASSERT_TRUE(window) << problem;
  EXPECT_EQ(window->from_ns, 2'500'000'000);
  EXPECT_EQ(window->to_ns, 3'000'000'000);
  window = parse_time_window("0:500ms", &problem);
  ASSERT_TRUE(window) << problem;
  EXPECT_EQ(window->from_ns, 0);
  EXPECT_EQ(window->to_ns, 500'000'000);
  window = parse_time_window("10us:12000ns", &problem);
  ASSERT_TRUE(window) << problem;
  EXPECT_EQ(window->from_ns, 10'000);
  EXPECT_EQ(window->to_ns, 12'000);
  window = parse_time_window("1ms:1ms", &problem);
  ASSERT_TRUE(window) << problem;
  EXPECT_EQ(window->from_ns, window->to_ns);
}

TEST(TimeWindow, BadInputSaysWhatIsWrong) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& bad :
       {Case{"2.5s", "expected FROM:TO"}, Case{"1s:2s:3s", "expected FROM:TO"},
        Case{"2.5:3s", "needs a unit"}, Case{"1m:2m", "unknown unit 'm'"},
        Case{"3s:2s", "the end comes before the start"}, Case{"-1s:2s", "is not a time"},
        Case{"s:2s", "is not a time"}, Case{"1.2.3s:4s", "is not a time"},
        Case{"1e30s:2e30s", "unknown unit"}, Case{"99999999999s:999999999999s", "too large"}}) {
    std::string problem;
    EXPECT_FALSE(parse_time_window(bad.text, &problem)) << bad.text;
    EXPECT_NE(problem.find("--window"), std::string::npos) << problem;
    EXPECT_NE(problem.find(bad.says), std::string::npos) << bad.text << ": " << problem;
  }
}

}  // namespace
