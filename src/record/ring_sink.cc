#include "record/ring_sink.hpp"

#include <time.h>

#include <charconv>
#include <cstring>

#include "format/chunk_codec.hpp"

namespace opsight::record {

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

namespace {

// Counts events (not their payload slots) in a kEvents payload.
uint64_t count_events(std::string_view payload) {
  if (payload.size() < sizeof(format::EventsHeader)) return 0;
  format::EventsHeader header;
  std::memcpy(&header, payload.data(), sizeof(header));
  const size_t slots = (payload.size() - sizeof(header)) / sizeof(format::Slot);
  const char* base = payload.data() + sizeof(header);
  uint64_t events = 0;
  for (size_t i = 0; i < std::min<size_t>(slots, header.slot_count);) {
    format::Slot slot;
    std::memcpy(&slot, base + i * sizeof(format::Slot), sizeof(slot));
    i += 1 + format::extra_slots_of(slot);
    ++events;
  }
  return events;
}

// One part of a ring spec: a number and its unit.
std::optional<std::string> parse_part(std::string_view part, RingLimits& limits, bool& has_age,
                                      bool& has_bytes) {
  size_t digits = 0;
  while (digits < part.size() &&
         ((part[digits] >= '0' && part[digits] <= '9') || part[digits] == '.'))
    ++digits;
  double value = 0;
  auto parsed = std::from_chars(part.data(), part.data() + digits, value);
  if (digits == 0 || parsed.ec != std::errc() || parsed.ptr != part.data() + digits || !(value > 0))
    return "'" + std::string(part) + "' is not a positive number with a unit";
  std::string_view unit = part.substr(digits);
  static constexpr std::pair<std::string_view, double> kTimes[] = {
      {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"min", 60e9}, {"h", 3600e9}};
  static constexpr std::pair<std::string_view, double> kSizes[] = {
      {"B", 1},    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"KB", 1e3}, {"MB", 1e6},     {"GB", 1e9}};
  for (auto [name, scale] : kTimes)
    if (unit == name) {
      if (has_age) return std::string("two ages");
      has_age = true;
      limits.max_age_ns = static_cast<int64_t>(value * scale);
      return std::nullopt;
    }
  for (auto [name, scale] : kSizes)
    if (unit == name) {
      if (has_bytes) return std::string("two sizes");
      has_bytes = true;
      limits.max_bytes = static_cast<uint64_t>(value * scale);
      if (limits.max_bytes < (uint64_t{1} << 20))
        return "'" + std::string(part) + "' is below the smallest ring (1MiB)";
      return std::nullopt;
    }
  return "'" + std::string(part) + "' has no unit (an age: ms, s, m, h; a size: MiB, GiB, MB...)";
}

}  // namespace

std::optional<RingLimits> parse_ring_limits(std::string_view spec, std::string* error) {
  RingLimits limits;
  bool has_age = false, has_bytes = false;
  const std::string whole(spec);
  auto fail = [&](std::string problem) -> std::optional<RingLimits> {
    *error = "ring '" + whole + "': " + problem +
             " (expected an age like 60s, a size like 256MiB, or both: 60s,1GiB)";
    return std::nullopt;
  };
  if (spec.empty()) return fail("empty");
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view part = spec.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (auto problem = parse_part(part, limits, has_age, has_bytes)) return fail(*problem);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
  }
  if (!has_bytes) limits.max_bytes = kDefaultRingBytes;
  return limits;
}

RingSink::RingSink(RingLimits limits, Clock clock)
    : limits_(limits), clock_(clock ? std::move(clock) : Clock(monotonic_ns)) {}

void RingSink::set_observer(std::function<void(std::string_view bytes)> observer) {
  std::lock_guard lock(observer_mutex_);
  observer_ = std::move(observer);
}

bool RingSink::write(std::string_view bytes) { return write_pieces({bytes}); }

bool RingSink::write_pieces(const std::vector<std::string_view>& pieces) {
  joined_.clear();
  for (std::string_view piece : pieces) joined_.append(piece);
  Round round;
  round.arrived_ns = clock_();
  {
    std::lock_guard lock(mutex_);
    take(joined_, round);
    if (!round.bytes.empty()) {
      stats_.bytes_held += round.bytes.size();
      rounds_.push_back(std::move(round));
    }
    evict(clock_());
  }
  std::lock_guard lock(observer_mutex_);
  if (observer_) observer_(joined_);
  return true;
}

// Sorts the chunks of one write: what every snapshot needs goes to the metadata, events and
// later clock syncs to the round, the latest stats aside.
void RingSink::take(std::string_view bytes, Round& round) {
  size_t offset = 0;
  if (metadata_.empty() && bytes.size() >= sizeof(format::FileHeader) &&
      std::memcmp(bytes.data(), format::kFileMagic, sizeof(format::kFileMagic)) == 0) {
    metadata_.append(bytes.substr(0, sizeof(format::FileHeader)));
    offset = sizeof(format::FileHeader);
  }
  while (bytes.size() - offset >= sizeof(format::ChunkHeader)) {
    format::ChunkHeader header;
    std::memcpy(&header, bytes.data() + offset, sizeof(header));
    size_t size = sizeof(header) + size_t{header.payload_bytes};
    if (bytes.size() - offset < size) break;  // the writer writes whole chunks: never
    std::string_view chunk = bytes.substr(offset, size);
    std::string_view payload = chunk.substr(sizeof(header));
    offset += size;
    switch (static_cast<format::ChunkType>(header.type)) {
      case format::ChunkType::kEvents:
        round.bytes.append(chunk);
        round.events += count_events(payload);
        break;
      case format::ChunkType::kClockSync:
        if (first_sync_kept_) {
          round.bytes.append(chunk);
        } else {
          metadata_.append(chunk);  // the session's start: where stale events end
          first_sync_kept_ = true;
        }
        break;
      case format::ChunkType::kStats:
      case format::ChunkType::kDropsSoFar:
        latest_stats_.assign(payload);
        break;
      case format::ChunkType::kIndex:  // its offsets are the stream's, not a snapshot's
      case format::ChunkType::kIndexTrailer:
        break;
      default:  // run info, names, threads, and kinds a newer writer adds
        metadata_.append(chunk);
        stats_.metadata_bytes = metadata_.size();
        break;
    }
  }
}

void RingSink::evict(int64_t now_ns) {
  // The newest round stays whatever its size: the bound is max_bytes plus one round (which
  // the recorder's own memory bound limits).
  while (rounds_.size() > 1 &&
         (stats_.bytes_held > limits_.max_bytes ||
          (limits_.max_age_ns > 0 && now_ns - rounds_.front().arrived_ns > limits_.max_age_ns))) {
    const Round& oldest = rounds_.front();
    ++stats_.rounds_dropped;
    stats_.events_dropped += oldest.events;
    stats_.bytes_dropped += oldest.bytes.size();
    stats_.bytes_held -= oldest.bytes.size();
    rounds_.pop_front();
  }
  stats_.rounds_held = rounds_.size();
  stats_.oldest_round_ns = rounds_.empty() ? 0 : rounds_.front().arrived_ns;
}

RingStats RingSink::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::string RingSink::snapshot(
    const std::vector<std::pair<std::string, std::string>>& run_info) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(metadata_.size() + stats_.bytes_held + 4096);
  out.append(metadata_);
  if (out.empty()) format::append_file_header(out);
  for (const Round& round : rounds_) out.append(round.bytes);
  auto entries = run_info;
  entries.emplace_back("ring_max_age_ns", std::to_string(limits_.max_age_ns));
  entries.emplace_back("ring_max_bytes", std::to_string(limits_.max_bytes));
  entries.emplace_back("ring_dropped_rounds", std::to_string(stats_.rounds_dropped));
  entries.emplace_back("ring_dropped_events", std::to_string(stats_.events_dropped));
  entries.emplace_back("ring_dropped_bytes", std::to_string(stats_.bytes_dropped));
  int64_t now = clock_();
  entries.emplace_back("ring_held_ns",
                       std::to_string(rounds_.empty() ? 0 : now - rounds_.front().arrived_ns));
  format::append_run_info_chunk(out, entries);
  if (!latest_stats_.empty()) {
    format::append_chunk(out, format::ChunkType::kStats, latest_stats_);
  } else {
    format::SessionStats empty{};
    format::append_chunk(out, format::ChunkType::kStats,
                         std::string_view(reinterpret_cast<const char*>(&empty), sizeof(empty)));
  }
  return out;
}

}  // namespace opsight::record
