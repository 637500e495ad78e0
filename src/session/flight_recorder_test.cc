// The flight recorder through opsight::Session: each dump trigger writes an ordinary run of
// what the ring holds (dump(), SIGUSR2, `opsight ctl PID dump`, an exception or a slow span
// at the root, the session's end), automatic triggers are rate-limited, and bad specs are
// refused with a message naming them.
#include "session/flight_recorder.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "io/io.hpp"
#include "opsight/opsight.hpp"
#include "session/control.hpp"

namespace {

namespace fs = std::filesystem;

fs::path fresh_directory(const std::string& name) {
  fs::path directory =
      fs::temp_directory_path() / ("opsight-flight-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory);
  return directory;
}

std::string run_info(const opsight::trace::Trace& trace, std::string_view key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return "";
}

size_t count_named(const opsight::trace::Trace& trace, std::string_view name) {
  size_t count = 0;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    count += trace.str(trace.slices.name[row]) == name;
  return count;
}

// Waits up to 5 s for `path` to exist.
bool wait_for_file(const fs::path& path) {
  for (int i = 0; i < 500 && !fs::exists(path); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return fs::exists(path);
}

opsight::SessionOptions ring_options(const fs::path& directory) {
  opsight::SessionOptions options;
  options.output = (directory / "run.opsight").string();
  options.ring = "60s";
  options.flush_interval_ms = 10;
  return options;
}

TEST(SlowSpanRules, ParseAndNameWhatIsWrong) {
  std::string error;
  auto rules = opsight::session::parse_slow_span_rules("handle_request>200ms, step>1.5s", &error);
  ASSERT_TRUE(rules) << error;
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].name, "handle_request");
  EXPECT_EQ((*rules)[0].threshold_ns, 200'000'000);
  EXPECT_EQ((*rules)[1].threshold_ns, 1'500'000'000);
  for (const char* bad : {"handle_request", ">200ms", "handle>", "handle>200", "handle>2parsecs"}) {
    EXPECT_FALSE(opsight::session::parse_slow_span_rules(bad, &error)) << bad;
    EXPECT_NE(error.find(bad), std::string::npos) << error;
  }
}

TEST(FlightRecorder, ABadRingIsRefusedWithItsSpec) {
  auto directory = fresh_directory("bad");
  auto options = ring_options(directory);
  options.ring = "sixty";
  opsight::Session session(options);
  EXPECT_FALSE(session.ok());
  EXPECT_NE(session.error().find("ring 'sixty'"), std::string::npos) << session.error();
  EXPECT_FALSE(opsight::recording());
}

TEST(FlightRecorder, DumpsOnRequestAndAtTheEndAndWritesNothingElse) {
  auto directory = fresh_directory("dump");
  opsight::Session session(ring_options(directory));
  ASSERT_TRUE(session.ok()) << session.error();
  for (int i = 0; i < 100; ++i) {
    OPSIGHT_SPAN("before the dump");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(fs::exists(directory / "run.opsight"));  // a ring writes nothing by itself
  std::string error;
  std::string path = session.dump("test", &error);
  ASSERT_EQ(path, (directory / "run.dump-1.opsight").string()) << error;
  auto dumped = opsight::io::read_trace_file(path);
  ASSERT_TRUE(dumped.ok());
  EXPECT_EQ(count_named(dumped.trace, "before the dump"), 100u);  // flushed before the dump
  EXPECT_EQ(run_info(dumped.trace, "dump_trigger"), "test");
  EXPECT_EQ(run_info(dumped.trace, "ring_dropped_events"), "0");
  for (int i = 0; i < 10; ++i) {
    OPSIGHT_SPAN("after the dump");
  }
  ASSERT_TRUE(session.stop()) << session.error();
  auto final = opsight::io::read_trace_file((directory / "run.opsight").string());
  ASSERT_TRUE(final.ok());
  EXPECT_TRUE(final.trace.run.complete);
  EXPECT_EQ(count_named(final.trace, "before the dump"), 100u);
  EXPECT_EQ(count_named(final.trace, "after the dump"), 10u);
  EXPECT_EQ(run_info(final.trace, "dump_trigger"), "session end");
  EXPECT_EQ(run_info(final.trace, "dumps_written"), "1");
  EXPECT_FALSE(fs::exists(directory / "run.dump-2.opsight"));
}

TEST(FlightRecorder, WithoutARingThereIsNothingToDump) {
  auto directory = fresh_directory("none");
  opsight::Session session((directory / "run.opsight").string());
  std::string error;
  EXPECT_EQ(session.dump("test", &error), "");
  EXPECT_NE(error.find("no flight recorder"), std::string::npos) << error;
}

TEST(FlightRecorder, SigUsr2Dumps) {
  auto directory = fresh_directory("signal");
  opsight::Session session(ring_options(directory));
  ASSERT_TRUE(session.ok()) << session.error();
  { OPSIGHT_SPAN("served"); }
  ASSERT_EQ(raise(SIGUSR2), 0);
  ASSERT_TRUE(wait_for_file(directory / "run.dump-1.opsight"));
  auto dumped = opsight::io::read_trace_file((directory / "run.dump-1.opsight").string());
  ASSERT_TRUE(dumped.ok());
  EXPECT_EQ(run_info(dumped.trace, "dump_trigger"), "SIGUSR2");
  EXPECT_EQ(count_named(dumped.trace, "served"), 1u);
  session.stop();
  struct sigaction after {};
  sigaction(SIGUSR2, nullptr, &after);
  EXPECT_EQ(after.sa_handler, SIG_DFL);  // the program's disposition is back
}

TEST(FlightRecorder, ASlowRootSpanDumpsOnceAndLaterTriggersAreCounted) {
  auto directory = fresh_directory("slow");
  auto options = ring_options(directory);
  options.dump_on_slow = "handle>20ms";
  opsight::Session session(options);
  ASSERT_TRUE(session.ok()) << session.error();
  {
    OPSIGHT_SPAN("outer");
    OPSIGHT_SPAN("handle");  // slow, but not a root: no dump
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  { OPSIGHT_SPAN("handle"); }  // a root, fast
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(fs::exists(directory / "run.dump-1.opsight"));
  for (int i = 0; i < 2; ++i) {
    OPSIGHT_SPAN("handle");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  ASSERT_TRUE(wait_for_file(directory / "run.dump-1.opsight"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto dumped = opsight::io::read_trace_file((directory / "run.dump-1.opsight").string());
  ASSERT_TRUE(dumped.ok());
  std::string trigger = run_info(dumped.trace, "dump_trigger");
  EXPECT_EQ(trigger.rfind("slow span: handle took ", 0), 0u) << trigger;
  EXPECT_NE(trigger.find("(rule: > 20.0 ms)"), std::string::npos) << trigger;
  session.stop();
  EXPECT_FALSE(fs::exists(directory / "run.dump-2.opsight"));  // the second was absorbed
  auto final = opsight::io::read_trace_file((directory / "run.opsight").string());
  ASSERT_TRUE(final.ok());
  EXPECT_EQ(run_info(final.trace, "dump_triggers_absorbed"), "1");
}

TEST(FlightRecorder, AnExceptionLeavingARootSpanDumps) {
  auto directory = fresh_directory("exception");
  opsight::Session session(ring_options(directory));
  ASSERT_TRUE(session.ok()) << session.error();
  {
    OPSIGHT_SPAN("handle");
    opsight::add_arg("exception.type", std::string_view("ValueError"));
  }
  ASSERT_TRUE(wait_for_file(directory / "run.dump-1.opsight"));
  auto dumped = opsight::io::read_trace_file((directory / "run.dump-1.opsight").string());
  ASSERT_TRUE(dumped.ok());
  EXPECT_EQ(run_info(dumped.trace, "dump_trigger"), "exception ValueError in handle");
}

TEST(FlightRecorder, OpsightCtlDumpAnswersWithThePath) {
  auto directory = fresh_directory("ctl");
  setenv("OPSIGHT_CONTROL_DIR", (directory / "control").c_str(), 1);
  opsight::Session session(ring_options(directory));
  ASSERT_TRUE(session.ok()) << session.error();
  ASSERT_TRUE(opsight::session::start_control_watcher([](bool) {}, true));
  { OPSIGHT_SPAN("served"); }
  ASSERT_FALSE(opsight::session::request_state(getpid(), "dump").has_value());
  std::optional<std::pair<std::string, int64_t>> answer;
  for (int i = 0; i < 500 && !answer; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    answer = opsight::session::dumped_state(getpid());
  }
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->first, (directory / "run.dump-1.opsight").string());
  auto dumped = opsight::io::read_trace_file(answer->first);
  ASSERT_TRUE(dumped.ok());
  EXPECT_EQ(run_info(dumped.trace, "dump_trigger"), "opsight ctl dump");
  opsight::session::stop_control_watcher();
  session.stop();
  unsetenv("OPSIGHT_CONTROL_DIR");
}

}  // namespace
