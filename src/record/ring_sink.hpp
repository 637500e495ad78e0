// The flight recorder's sink: instead of a file, a bounded ring of the most recent rounds
// the stream writer hands it (one round per flush: the events of every thread recorded
// since the last one, and a clock sync), plus what every snapshot needs whatever its age:
// the file header, the run info, the first clock sync, the names and the thread records.
// A round is dropped, whole and oldest first, once it is older than the ring's age limit or
// the ring holds more than its byte limit; what was dropped is counted (rounds, events,
// bytes) and stated in every snapshot. A snapshot is an ordinary .opsight file of what the
// ring holds now: every reader reads it; a span whose begin was dropped shows as an
// unmatched end, one still open as unfinished.
//
// The age of a round is the time it arrived: its events were recorded before that and after
// the round before it, so a ring of 60 s keeps every event of the last 60 s and at most one
// flush interval more.
//
// Thread-safety: writes come from the stream writer (one at a time); snapshot(), stats()
// and the observer's registration may run on any thread meanwhile.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "record/recorder.hpp"

namespace opsight::record {

struct RingLimits {
  int64_t max_age_ns = 0;  // 0: no age limit
  uint64_t max_bytes = 0;  // always set: the memory bound
};

// CLOCK_MONOTONIC in ns: the ring's default clock (and the flight recorder's).
int64_t monotonic_ns();

// The byte limit of a ring given only an age ("60s").
inline constexpr uint64_t kDefaultRingBytes = uint64_t{256} << 20;

// Parses a ring spec: an age ("60s", "500ms", "5m", "1h"), a size ("256MiB", "1GiB",
// "512MB", "65536B") or both, comma separated ("60s,1GiB"). nullopt with *error naming what
// is wrong.
std::optional<RingLimits> parse_ring_limits(std::string_view spec, std::string* error);

// What the ring dropped so far, and what it holds.
struct RingStats {
  uint64_t rounds_dropped = 0;
  uint64_t events_dropped = 0;  // events (not their payload slots) in dropped rounds
  uint64_t bytes_dropped = 0;
  uint64_t rounds_held = 0;
  uint64_t bytes_held = 0;      // the rounds' bytes (the metadata apart)
  uint64_t metadata_bytes = 0;  // header, run info, names, threads: kept for every snapshot
  int64_t oldest_round_ns = 0;  // when the oldest round held arrived (monotonic ns); 0: none
};

class RingSink : public ByteSink {
 public:
  using Clock = std::function<int64_t()>;  // monotonic ns
  explicit RingSink(RingLimits limits, Clock clock = {});

  bool write(std::string_view bytes) override;
  bool write_pieces(const std::vector<std::string_view>& pieces) override;
  std::string error() const override { return {}; }

  // An .opsight file of what the ring holds now, with `run_info` and the ring's counts
  // ("ring_dropped_events", ...) in a run-info chunk, ended by the latest stats the writer
  // sent (or an empty footer before any).
  std::string snapshot(const std::vector<std::pair<std::string, std::string>>& run_info) const;
  RingStats stats() const;
  const RingLimits& limits() const { return limits_; }

  // Called with the bytes of each write (whole chunks; the first write begins with the file
  // header), on the writer's thread, after the ring took them and with no lock held: where
  // the dump triggers watch the events go by.
  void set_observer(std::function<void(std::string_view bytes)> observer);

 private:
  struct Round {
    int64_t arrived_ns = 0;
    uint64_t events = 0;
    std::string bytes;
  };
  void take(std::string_view bytes, Round& round);
  void evict(int64_t now_ns);

  RingLimits limits_;
  Clock clock_;
  mutable std::mutex mutex_;
  std::string metadata_;
  bool first_sync_kept_ = false;
  std::string latest_stats_;  // the payload of the latest kStats or kDropsSoFar
  std::deque<Round> rounds_;
  RingStats stats_;
  std::function<void(std::string_view)> observer_;  // under observer_mutex_
  std::mutex observer_mutex_;
  std::string joined_;  // the current write's pieces, for the observer (writer's thread only)
};

}  // namespace opsight::record
