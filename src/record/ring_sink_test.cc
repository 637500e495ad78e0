// The flight recorder's ring: it keeps exactly the rounds of its window (by age, by bytes),
// drops the rest with a count, stays within its memory bound however long the recording,
// and its snapshot is an ordinary .opsight file the reader reads.
#include "record/ring_sink.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "io/io.hpp"
#include "opsight/opsight.hpp"

namespace {

using opsight::record::parse_ring_limits;
using opsight::record::RingLimits;
using opsight::record::RingSink;

TEST(RingLimits, ParsesAgesSizesAndBoth) {
  std::string error;
  auto age = parse_ring_limits("60s", &error);
  ASSERT_TRUE(age) << error;
  EXPECT_EQ(age->max_age_ns, int64_t{60'000'000'000});
  EXPECT_EQ(age->max_bytes, opsight::record::kDefaultRingBytes);
  auto size = parse_ring_limits("256MiB", &error);
  ASSERT_TRUE(size) << error;
  EXPECT_EQ(size->max_age_ns, 0);
  EXPECT_EQ(size->max_bytes, uint64_t{256} << 20);
  auto both = parse_ring_limits("1.5m, 1GiB", &error);
  ASSERT_TRUE(both) << error;
  EXPECT_EQ(both->max_age_ns, int64_t{90'000'000'000});
  EXPECT_EQ(both->max_bytes, uint64_t{1} << 30);
  EXPECT_EQ(parse_ring_limits("500ms", &error)->max_age_ns, 500'000'000);
  EXPECT_EQ(parse_ring_limits("2h", &error)->max_age_ns, int64_t{7'200'000'000'000});
}

TEST(RingLimits, NamesWhatIsWrong) {
  for (const char* spec : {"", "60", "sixty seconds", "-5s", "0s", "60s,30s", "10KiB", "60x"}) {
    std::string error;
    EXPECT_FALSE(parse_ring_limits(spec, &error)) << spec;
    EXPECT_NE(error.find("ring '" + std::string(spec) + "'"), std::string::npos) << error;
    EXPECT_NE(error.find("60s,1GiB"), std::string::npos) << error;
  }
}

// A session recording into a ring whose clock the test moves: batch k of spans is flushed
// as its own round at time k seconds.
class RingSession {
 public:
  explicit RingSession(RingLimits limits) {
    auto ring = std::make_unique<RingSink>(limits, [this] { return now_ns.load(); });
    ring_ = ring.get();
    opsight::record::RecordingOptions options;
    options.flush_interval_ms = 600'000;  // rounds only when the test flushes
    EXPECT_FALSE(opsight::record::start_recording(
                     [&](std::string*) {
                       return std::unique_ptr<opsight::record::ByteSink>(std::move(ring));
                     },
                     options)
                     .has_value());
  }
  ~RingSession() { stop(); }
  void stop() {
    if (!stopped_) stopped_sink_ = opsight::record::stop_recording().sink;
    stopped_ = true;
  }
  RingSink& ring() { return *ring_; }
  std::atomic<int64_t> now_ns{0};

 private:
  RingSink* ring_;
  bool stopped_ = false;
  std::unique_ptr<opsight::record::ByteSink> stopped_sink_;
};

// Records batch `batch`: `spans` spans, each with its batch number as an argument.
void record_batch(int batch, int spans) {
  for (int i = 0; i < spans; ++i) {
    OPSIGHT_SPAN("request");
    opsight::add_arg("batch", int64_t{batch});
  }
}

std::map<int64_t, int> spans_per_batch(const opsight::trace::Trace& trace) {
  std::map<int64_t, int> counts;
  for (size_t arg = 0; arg < trace.slice_args.size(); ++arg)
    if (trace.str(trace.slice_args.key[arg]) == "batch")
      ++counts[trace.slice_args.value[arg].int_value];
  return counts;
}

std::string run_info(const opsight::trace::Trace& trace, std::string_view key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return "";
}

TEST(RingSink, KeepsTheLastSecondsExactlyAndCountsWhatItDropped) {
  RingLimits limits;
  limits.max_age_ns = 10'000'000'000;  // 10 s
  limits.max_bytes = uint64_t{64} << 20;
  RingSession session(limits);
  constexpr int kBatches = 30, kSpans = 50;
  for (int batch = 0; batch < kBatches; ++batch) {
    session.now_ns = int64_t{batch} * 1'000'000'000;
    record_batch(batch, kSpans);
    opsight::record::flush_recording();
  }
  std::string dump = session.ring().snapshot({{"dump_trigger", "test"}});
  auto read = opsight::io::read_native(dump);
  ASSERT_TRUE(read.ok()) << read.error->message;
  EXPECT_FALSE(read.damage) << read.damage->message;
  // At 29 s, the rounds of the last 10 s are those of 19 s to 29 s: every span of them,
  // and nothing older.
  std::map<int64_t, int> expected;
  for (int batch = kBatches - 11; batch < kBatches; ++batch) expected[batch] = kSpans;
  EXPECT_EQ(spans_per_batch(read.trace), expected);
  // Each span is a begin, an arg and an end: 3 events.
  EXPECT_EQ(run_info(read.trace, "ring_dropped_events"),
            std::to_string((kBatches - 11) * kSpans * 3));
  EXPECT_EQ(run_info(read.trace, "ring_dropped_rounds"), std::to_string(kBatches - 11));
  EXPECT_EQ(run_info(read.trace, "dump_trigger"), "test");
  EXPECT_EQ(run_info(read.trace, "ring_max_age_ns"), "10000000000");
  EXPECT_EQ(read.trace.slices.size(), size_t{11} * kSpans);
  session.stop();
  // After the stop the footer came in: the snapshot is what the session ended with.
  auto last = opsight::io::read_native(session.ring().snapshot({}));
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last.trace.run.complete);
  EXPECT_EQ(spans_per_batch(last.trace), expected);
}

TEST(RingSink, ABoundedRingHoldsItsBytesOverAnyNumberOfRounds) {
  RingLimits limits;
  limits.max_bytes = uint64_t{1} << 20;
  RingSession session(limits);
  uint64_t largest_round = 0, previous_dropped = 0;
  for (int batch = 0; batch < 400; ++batch) {  // ~20 MB through a 1 MiB ring
    record_batch(batch, 1000);
    opsight::record::flush_recording();
    auto stats = session.ring().stats();
    uint64_t round = stats.bytes_held + stats.bytes_dropped - previous_dropped;
    previous_dropped = stats.bytes_held + stats.bytes_dropped;
    largest_round = std::max(largest_round, round);
    ASSERT_LE(stats.bytes_held, limits.max_bytes + largest_round) << "batch " << batch;
  }
  auto stats = session.ring().stats();
  EXPECT_GT(stats.rounds_dropped, 300u);
  EXPECT_GT(stats.bytes_dropped, uint64_t{15} << 20);
  auto read = opsight::io::read_native(session.ring().snapshot({}));
  ASSERT_TRUE(read.ok());
  auto batches = spans_per_batch(read.trace);
  ASSERT_FALSE(batches.empty());
  EXPECT_EQ(batches.rbegin()->first, 399);  // the newest are kept, whole
  EXPECT_EQ(batches.rbegin()->second, 1000);
  // Kept and dropped add up to what was recorded (a round may end inside a span: the
  // writer also drains when a thread hands a full chunk over).
  uint64_t kept_events = 0;
  for (const auto& track : read.trace.tracks) kept_events += track.events_recorded;
  EXPECT_EQ(kept_events + stats.events_dropped, uint64_t{400} * 1000 * 3);
}

// The process's resident memory, in bytes.
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// Whether a sanitizer runs this test: ASan keeps freed memory in its quarantine (256 MiB)
// and TSan maps shadow memory, so resident memory says nothing about the ring there.
constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

TEST(RingSink, MemoryStaysBoundedWhileSeveralTimesTheRingIsRecorded) {
  if (kSanitized)
    GTEST_SKIP() << "resident memory is the sanitizer's here (ASan's quarantine, TSan's "
                    "shadow): the release build's run of this test checks the bound";
  RingLimits limits;
  limits.max_bytes = uint64_t{8} << 20;
  RingSession session(limits);
  record_batch(0, 10'000);
  opsight::record::flush_recording();
  uint64_t before = resident_bytes();
  for (int batch = 0; batch < 300; ++batch) {  // ~150 MB recorded: 18 times the ring
    record_batch(batch, 10'000);
    opsight::record::flush_recording();
  }
  uint64_t grown = resident_bytes() - std::min(before, resident_bytes());
  auto stats = session.ring().stats();
  EXPECT_GT(stats.bytes_dropped, uint64_t{100} << 20);
  EXPECT_LT(grown, uint64_t{40} << 20) << "resident memory grew by " << grown << " bytes";
}

}  // namespace
