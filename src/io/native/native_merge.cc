// The native files of one run's processes merged into one native file in bounded memory
// (what `opsight run` does when the program ends): read_trace_files + write_native held the
// whole run (13.8 GiB for 60 M spans); this rewrites the files' events slot by slot instead.
//
// Two passes over each file, both through the one slot decoder (slot_decoder.hpp):
//  1. the small chunks (run info, clock syncs, names, threads, stats) and the events'
//     time bounds, event counts and problems, as the whole-file reader sees them;
//  2. every event again, re-timed to ns on the merged file's clock (each file's ticks
//     through the reader's line through its first and last sync) and written to its new
//     thread with its name's new id, a kSpanId after each begin whose derived id changes
//     with the thread's new index.
// The output is laid out as write_native lays out a merged trace (header, run info, one
// clock in ns from the earliest event, names, threads, events, stats, time index), so
// that reading it back gives the trace read_trace_files gives, whose run info is merged as
// trace::append_trace merges it. What differs in bytes: events stay in their threads'
// chunks as recorded (an async span stays on the thread that began it, so its derived id
// differs); docs/native-format.md, "Streaming merge".
//
// Memory: the files are mapped and their pages handed back every kMergeReleaseBytes; the
// output buffer hands on at 1 MiB, the index holds one part (4 MiB); besides, the names,
// threads and clock syncs of the files (not their events).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/io.hpp"
#include "io/native/derived_span_id.hpp"
#include "io/native/native_output.hpp"
#include "io/native/slot_decoder.hpp"

namespace opsight::io {

namespace {

using native::EventsEncoder;
using native::NativeOutput;
using native::slot_word;

// Pages of an input behind the read position are handed back in steps of this many bytes.
constexpr uint64_t kMergeReleaseBytes = uint64_t{8} << 20;

// A file mapped read-only, its pages handed back (MADV_DONTNEED) as a pass leaves them.
class MergeMappedFile {
 public:
  MergeMappedFile() = default;
  MergeMappedFile(const MergeMappedFile&) = delete;
  MergeMappedFile& operator=(const MergeMappedFile&) = delete;
  ~MergeMappedFile() { close(); }

  std::optional<std::string> open(const std::string& path) {
    int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return path + ": cannot open: " + std::strerror(errno);
    struct stat status {};
    if (::fstat(descriptor, &status) != 0) {
      std::string problem = path + ": cannot stat: " + std::strerror(errno);
      ::close(descriptor);
      return problem;
    }
    size_ = static_cast<size_t>(status.st_size);
    if (size_ > 0) {
      void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, descriptor, 0);
      if (mapped == MAP_FAILED) {
        std::string problem = path + ": cannot map: " + std::strerror(errno);
        ::close(descriptor);
        return problem;
      }
      data_ = static_cast<const char*>(mapped);
      ::madvise(mapped, size_, MADV_SEQUENTIAL);
    }
    ::close(descriptor);
    released_ = 0;
    return std::nullopt;
  }
  std::string_view bytes() const { return std::string_view(data_ ? data_ : "", size_); }
  // The pages before `offset` are no longer needed (they are read again from the file if
  // they are: a later pass).
  void release_before(uint64_t offset) {
    if (data_ == nullptr || offset < released_ + kMergeReleaseBytes) return;
    uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    uint64_t end = offset / page * page;
    if (end <= released_) return;
    ::madvise(const_cast<char*>(data_) + released_, end - released_, MADV_DONTNEED);
    released_ = end;
  }
  void rewind() {
    release_before(size_);
    released_ = 0;
  }
  void close() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  uint64_t released_ = 0;
};

// The whole-file reader's clock: the line through the first and last sync, its slope in
// 16.48 fixed point (native_reader.cc's fit_clock and to_ns, which this must match).
struct MergeClock {
  uint64_t base_ticks = 0;
  int64_t base_ns = 0;
  int64_t slope_fixed = int64_t{1} << 48;
  double slope = 1.0;

  void fit(const std::vector<format::ClockSync>& syncs, double ticks_per_second) {
    if (syncs.empty()) {
      slope = 1.0;
      slope_fixed = 0;  // the reader leaves it unset (zero) without a sync
      return;
    }
    const format::ClockSync& first = syncs.front();
    const format::ClockSync& last = syncs.back();
    base_ticks = first.ticks;
    base_ns = first.monotonic_ns;
    if (syncs.size() >= 2 && last.ticks > first.ticks && last.monotonic_ns > first.monotonic_ns)
      slope = (static_cast<double>(last.monotonic_ns) - static_cast<double>(first.monotonic_ns)) /
              static_cast<double>(last.ticks - first.ticks);
    else
      slope = ticks_per_second > 0 ? 1e9 / ticks_per_second : 1.0;
    slope_fixed = static_cast<int64_t>(std::llround(std::ldexp(std::min(slope, 32767.0), 48)));
  }
  int64_t to_ns(uint64_t ticks) const {
    __extension__ using Wide = __int128;
    constexpr Wide kLimit = Wide{1} << 62;
    auto delta = static_cast<Wide>(static_cast<int64_t>(ticks - base_ticks));
    Wide ns = base_ns + ((delta * slope_fixed + (Wide{1} << 47)) >> 48);
    return static_cast<int64_t>(std::clamp(ns, -kLimit, kLimit));
  }
};

struct MergeThread {
  int64_t pid = 0;
  int64_t tid = 0;
  std::string name;
  uint32_t output_index = 0;
  uint64_t events = 0;     // events decoded (the reader's events_recorded)
  bool has_track = false;  // a span or instant began on it: the reader gives it a track
  native::ThreadSlotState slots;
  uint64_t output_begins = 0;  // begins written: the output's derived span ids
  uint64_t output_sequence = 0;
};

// What the first pass learns of one file.
struct MergeFile {
  std::string path;
  MergeMappedFile mapped;
  std::vector<std::pair<std::string, std::string>> extra;  // run info the reader keeps as is
  std::vector<std::pair<std::string, std::string>> layout;
  std::string command_line, host, opsight_version, clock_name, process_name, source_format;
  int64_t pid = 0;
  int64_t parent_pid = 0;
  trace::TraceId trace_id;
  double ticks_per_second = 0;
  double event_cost_ns = 0;
  std::vector<format::ClockSync> syncs;
  MergeClock clock;
  uint64_t events_dropped = 0;
  std::vector<format::ThreadStats> thread_stats;
  bool saw_stats = false;
  std::optional<Diagnostic> damage;
  uint64_t end_offset = 0;  // where reading stopped (damage) or the file's end
  std::map<uint32_t, MergeThread> threads;
  std::vector<uint32_t> thread_order;                      // input indices in order of first sight
  std::vector<std::pair<std::string, std::string>> names;  // by input id (empty: none)
  std::vector<bool> named;
  std::vector<uint32_t> output_name;  // input id -> output id (0: not yet given one)
  std::map<uint32_t, uint32_t> unknown_name_output;
  // Event time bounds in ns (the merged clock's), as trace::Trace::time_bounds.
  int64_t first_ns = std::numeric_limits<int64_t>::max();
  int64_t last_ns = std::numeric_limits<int64_t>::min();
  uint64_t undecodable = 0, unknown_names = 0, late_ends = 0;

  bool has_events() const { return first_ns <= last_ns; }
  bool has_session_start() const { return !syncs.empty(); }
  uint64_t session_start_ticks() const { return syncs.empty() ? 0 : syncs.front().ticks; }
  uint64_t span_salt() const { return native::span_id_salt(trace_id); }
  MergeThread& thread(uint32_t index) {
    auto [it, inserted] = threads.try_emplace(index);
    if (inserted) thread_order.push_back(index);
    return it->second;
  }
  bool has_name(uint32_t id) const { return id < named.size() && named[id]; }
};

struct MergeCursor {
  std::string_view bytes;
  size_t position = 0;
  bool failed = false;
  template <typename T>
  T take() {
    T value{};
    if (bytes.size() - position < sizeof(T)) {
      failed = true;
      return value;
    }
    std::memcpy(&value, bytes.data() + position, sizeof(T));
    position += sizeof(T);
    return value;
  }
  std::string_view take_bytes(size_t count) {
    if (bytes.size() - position < count) {
      failed = true;
      return {};
    }
    std::string_view view = bytes.substr(position, count);
    position += count;
    return view;
  }
};

void merge_damage(MergeFile& file, uint64_t offset, std::string message) {
  if (!file.damage || offset < file.damage->byte_offset)
    file.damage = Diagnostic{std::move(message), offset, true};
}

void merge_read_run_info(MergeFile& file, std::string_view payload, uint64_t chunk_offset) {
  MergeCursor cursor{payload};
  auto count = cursor.take<uint32_t>();
  for (uint32_t i = 0; i < count && !cursor.failed; ++i) {
    std::string_view key = cursor.take_bytes(cursor.take<uint32_t>());
    std::string_view value = cursor.take_bytes(cursor.take<uint32_t>());
    if (cursor.failed) break;
    std::string text(value);
    if (key == "command_line")
      file.command_line = text;
    else if (key == "host")
      file.host = text;
    else if (key == "opsight_version")
      file.opsight_version = text;
    else if (key == "clock")
      file.clock_name = text;
    else if (key == "pid")
      file.pid = std::strtoll(text.c_str(), nullptr, 10);
    else if (key.starts_with("process.") || key.starts_with("thread.") ||
             key.starts_with("async_track.") || key.starts_with("counter_series."))
      file.layout.emplace_back(std::string(key), text);
    else if (key == "parent_pid")
      file.parent_pid = std::strtoll(text.c_str(), nullptr, 10);
    else if (key == "process_name")
      file.process_name = text;
    else if (key == "ticks_per_second")
      file.ticks_per_second = std::strtod(text.c_str(), nullptr);
    else if (key == "event_cost_ns")
      file.event_cost_ns = std::strtod(text.c_str(), nullptr);
    else if (key == "trace_id" && value.size() == 32) {
      file.trace_id.high = std::strtoull(text.substr(0, 16).c_str(), nullptr, 16);
      file.trace_id.low = std::strtoull(text.substr(16).c_str(), nullptr, 16);
    } else if (key == "source_format")
      file.source_format = text;
    else
      file.extra.emplace_back(std::string(key), text);
  }
  if (cursor.failed) merge_damage(file, chunk_offset, "run-info chunk is malformed");
}

void merge_read_names(MergeFile& file, std::string_view payload, uint64_t chunk_offset) {
  MergeCursor cursor{payload};
  while (cursor.position < cursor.bytes.size()) {
    auto record = cursor.take<format::NameRecordHeader>();
    std::string_view name = cursor.take_bytes(record.name_bytes);
    std::string_view category = cursor.take_bytes(record.category_bytes);
    cursor.take_bytes(record.file_bytes);
    if (cursor.failed) {
      merge_damage(file, chunk_offset, "names chunk is malformed");
      return;
    }
    if (record.id == 0 || record.id > (1u << 24)) {
      merge_damage(file, chunk_offset,
                   "names chunk has an impossible name id " + std::to_string(record.id));
      return;
    }
    if (record.id >= file.names.size()) {
      file.names.resize(size_t{record.id} + 1);
      file.named.resize(size_t{record.id} + 1);
    }
    file.names[record.id] = {std::string(name), std::string(category)};
    file.named[record.id] = true;
  }
}

void merge_read_stats(MergeFile& file, std::string_view payload) {
  MergeCursor cursor{payload};
  auto stats = cursor.take<format::SessionStats>();
  if (cursor.failed) return;
  file.events_dropped = stats.events_dropped;
  if (stats.event_cost_ns > 0) file.event_cost_ns = stats.event_cost_ns;
  file.thread_stats.clear();
  for (uint64_t i = 0; i < stats.thread_count && !cursor.failed; ++i) {
    auto thread = cursor.take<format::ThreadStats>();
    if (cursor.failed || thread.thread_index > (1u << 24)) break;
    file.thread_stats.push_back(thread);
  }
}

// Walks a file's chunks from its header: `on_chunk(type, payload, chunk_offset)` for each
// whole one. Returns false when the file is not one to read (error set).
template <typename OnChunk>
bool merge_walk_chunks(MergeFile& file, std::string* error, OnChunk&& on_chunk) {
  std::string_view bytes = file.mapped.bytes();
  if (bytes.size() < sizeof(format::FileHeader) ||
      std::memcmp(bytes.data(), format::kFileMagic, sizeof(format::kFileMagic)) != 0) {
    *error =
        Diagnostic{bytes.empty() ? "file is empty" : "not an opsight file (bad magic)", 0, true}
            .to_string(file.path);
    return false;
  }
  format::FileHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.version > format::kFormatVersion) {
    *error = Diagnostic{"opsight format version " + std::to_string(header.version) +
                            " is newer than this reader (" +
                            std::to_string(format::kFormatVersion) + ")",
                        8, true}
                 .to_string(file.path);
    return false;
  }
  uint64_t offset = std::max<uint64_t>(header.header_bytes, sizeof(format::FileHeader));
  while (offset < bytes.size()) {
    std::string problem;
    auto chunk = format::read_chunk(bytes, offset, &problem);
    if (!chunk) {
      merge_damage(file, offset,
                   problem + "; the " + std::to_string(offset) + " bytes before it were read");
      break;
    }
    uint64_t chunk_offset = offset;
    offset = chunk->payload_offset + chunk->payload.size();
    on_chunk(chunk->type, chunk->payload, chunk_offset);
    file.mapped.release_before(chunk_offset);
  }
  file.end_offset = offset;
  file.mapped.rewind();
  return true;
}

// Decodes one events chunk of `file` with `on_event(thread, event)`.
template <typename OnEvent>
void merge_decode_events(MergeFile& file, std::string_view payload, uint64_t chunk_offset,
                         OnEvent&& on_event) {
  MergeCursor cursor{payload};
  auto header = cursor.take<format::EventsHeader>();
  if (cursor.failed || header.thread_index > (1u << 24) ||
      (payload.size() - sizeof(header)) / sizeof(format::Slot) < header.slot_count) {
    merge_damage(file, chunk_offset, "events chunk is malformed");
    return;
  }
  MergeThread& thread = file.thread(header.thread_index);
  native::SlotFileContext context{header.thread_index, file.has_session_start(),
                                  file.session_start_ticks(), file.span_salt()};
  uint32_t decoded = native::decode_slots(
      payload.data() + sizeof(header), header.slot_count, thread.slots, context,
      [&](const native::SlotEvent& event) { on_event(thread, event); });
  if (decoded < header.slot_count)
    merge_damage(file,
                 chunk_offset + sizeof(format::ChunkHeader) + sizeof(header) +
                     size_t{decoded} * sizeof(format::Slot),
                 "event payload runs past its chunk");
}

// Pass 1 over one file.
bool merge_scan_file(MergeFile& file, std::string* error) {
  if (auto problem = file.mapped.open(file.path)) {
    *error = *problem;
    return false;
  }
  // The small chunks first (the reader reads every other chunk before any event).
  bool ok = merge_walk_chunks(
      file, error, [&](format::ChunkType type, std::string_view payload, uint64_t chunk_offset) {
        switch (type) {
          case format::ChunkType::kRunInfo:
            merge_read_run_info(file, payload, chunk_offset);
            break;
          case format::ChunkType::kClockSync: {
            MergeCursor cursor{payload};
            while (cursor.bytes.size() - cursor.position >= sizeof(format::ClockSync))
              file.syncs.push_back(cursor.take<format::ClockSync>());
            break;
          }
          case format::ChunkType::kNames:
            merge_read_names(file, payload, chunk_offset);
            break;
          case format::ChunkType::kThread: {
            MergeCursor cursor{payload};
            auto record = cursor.take<format::ThreadRecordHeader>();
            std::string_view name = cursor.take_bytes(record.name_bytes);
            if (cursor.failed || record.thread_index > (1u << 24)) {
              merge_damage(file, chunk_offset, "thread chunk is malformed");
              break;
            }
            MergeThread& thread = file.thread(record.thread_index);
            thread.pid = record.pid;
            thread.tid = record.tid;
            thread.name = name;
            break;
          }
          case format::ChunkType::kStats:
            merge_read_stats(file, payload);
            file.saw_stats = true;
            break;
          case format::ChunkType::kDropsSoFar:
            merge_read_stats(file, payload);
            break;
          default:
            break;
        }
      });
  if (!ok) return false;
  if (!file.saw_stats && !file.damage)
    merge_damage(file, file.end_offset,
                 "the recording has no end (the process stopped before the session did)");
  file.clock.fit(file.syncs, file.ticks_per_second);
  // The events: their time bounds, counts and problems.
  merge_walk_chunks(
      file, error, [&](format::ChunkType type, std::string_view payload, uint64_t chunk_offset) {
        if (type != format::ChunkType::kEvents) return;
        merge_decode_events(
            file, payload, chunk_offset, [&](MergeThread& thread, const native::SlotEvent& event) {
              ++thread.events;
              if (event.malformed) {
                ++file.undecodable;
                return;
              }
              switch (event.kind) {
                case format::SlotKind::kBegin:
                case format::SlotKind::kInstant:
                  thread.has_track = true;
                  if (event.name_id != 0 && !file.has_name(event.name_id)) ++file.unknown_names;
                  [[fallthrough]];
                case format::SlotKind::kCounter:
                case format::SlotKind::kAsyncBegin: {
                  int64_t ns = file.clock.to_ns(event.ticks);
                  file.first_ns = std::min(file.first_ns, ns);
                  file.last_ns = std::max(file.last_ns, ns);
                  if (event.kind == format::SlotKind::kAsyncBegin && event.name_id != 0 &&
                      !file.has_name(event.name_id))
                    ++file.unknown_names;
                  break;
                }
                case format::SlotKind::kEnd:
                case format::SlotKind::kAsyncEnd:
                  if (event.late) ++file.late_ends;
                  file.last_ns = std::max(file.last_ns, file.clock.to_ns(event.ticks));
                  break;
                default:
                  break;
              }
            });
      });
  // Each pass starts a thread's slot state afresh.
  for (auto& entry : file.threads) {
    entry.second.slots = native::ThreadSlotState{};
  }
  return true;
}

// A file's run info as the reader leaves it in trace::RunInfo, with its events' time
// bounds; several merge by trace::merge_run_info (append_trace's rule).
struct MergeRun {
  trace::RunInfo info;
  int64_t first_ns = std::numeric_limits<int64_t>::max();  // the events' bounds
  int64_t last_ns = std::numeric_limits<int64_t>::min();

  std::optional<std::pair<int64_t, int64_t>> event_bounds() const {
    if (first_ns > last_ns) return std::nullopt;
    return std::pair{first_ns, last_ns};
  }

  void merge(const MergeRun& other) {
    trace::merge_run_info(info, event_bounds(), other.info, other.event_bounds());
    first_ns = std::min(first_ns, other.first_ns);
    last_ns = std::max(last_ns, other.last_ns);
  }
};

constexpr int64_t kMergeMaxOverheadNs = int64_t{1} << 61;
int64_t merge_overhead_ns(double value) {
  if (!(value > 0)) return 0;
  if (value >= static_cast<double>(kMergeMaxOverheadNs)) return kMergeMaxOverheadNs;
  return static_cast<int64_t>(std::llround(value));
}

// The overhead the reader gives a thread's track (native_reader.cc, finish_threads).
int64_t merge_thread_overhead(const MergeFile& file, uint32_t index, const MergeThread& thread) {
  double value = static_cast<double>(thread.events) * file.event_cost_ns;
  for (const format::ThreadStats& stats : file.thread_stats)
    if (stats.thread_index == index)
      value = static_cast<double>(thread.events) * file.event_cost_ns +
              static_cast<double>(stats.slow_path_ticks) * file.clock.slope;
  return merge_overhead_ns(value);
}

uint64_t merge_thread_dropped(const MergeFile& file, uint32_t index) {
  uint64_t dropped = 0;
  for (const format::ThreadStats& stats : file.thread_stats)
    if (stats.thread_index == index) dropped = stats.events_dropped;
  return dropped;
}

MergeRun merge_run_of(const MergeFile& file) {
  MergeRun run;
  run.info.command_line = file.command_line;
  run.info.host = file.host;
  run.info.opsight_version = file.opsight_version;
  run.info.source_format = "opsight";
  run.info.clock = file.clock_name;
  run.info.pid = file.pid;
  run.info.trace_id = file.trace_id;
  run.info.events_dropped = file.events_dropped;
  run.info.extra = file.extra;
  if (!file.syncs.empty()) {
    // As fit_clock: a sync-fitted clock error (three syncs or more), the recording's start.
    const format::ClockSync& first = file.syncs.front();
    const format::ClockSync& last = file.syncs.back();
    double worst = 0;
    for (const auto& sync : file.syncs)
      worst = std::max(worst, std::fabs(static_cast<double>(file.clock.to_ns(sync.ticks)) -
                                        static_cast<double>(sync.monotonic_ns)));
    if (file.syncs.size() >= 3 && worst < 1e15)
      run.info.extra.emplace_back("clock_max_error_ns",
                                  std::to_string(static_cast<int64_t>(std::llround(worst))));
    run.info.start_unix_ns = first.realtime_ns;
    run.info.has_unix_offset =
        !__builtin_sub_overflow(first.realtime_ns, first.monotonic_ns, &run.info.unix_offset_ns);
    if (!run.info.has_unix_offset) run.info.unix_offset_ns = 0;
    if (__builtin_sub_overflow(last.monotonic_ns, first.monotonic_ns, &run.info.traced_ns))
      run.info.traced_ns = 0;
  }
  for (const auto& entry : file.threads)
    if (entry.second.has_track)
      run.info.overhead_ns =
          std::min(run.info.overhead_ns + merge_thread_overhead(file, entry.first, entry.second),
                   kMergeMaxOverheadNs);
  auto note = [&](const char* key, uint64_t count) {
    if (count > 0) run.info.extra.emplace_back(key, std::to_string(count));
  };
  note("unknown_names", file.unknown_names);
  note("undecodable_slots", file.undecodable);
  note("ends_written_late_after_drops", file.late_ends);
  if (!file.source_format.empty())
    run.info.extra.emplace_back("converted_from", file.source_format);
  run.first_ns = file.first_ns;
  run.last_ns = file.last_ns;
  return run;
}

// Pass 2 over one file: its events into the output, a chunk of theirs at a time.
class MergeEventWriter {
 public:
  MergeEventWriter(NativeOutput& output, MergeFile& file, uint64_t output_salt, int64_t first_ns,
                   uint32_t& next_name_id, std::string& late_names)
      : output_(output),
        file_(file),
        output_salt_(output_salt),
        first_ns_(first_ns),
        next_name_id_(next_name_id),
        late_names_(late_names) {}

  void write_chunk(std::string_view payload, uint64_t chunk_offset) {
    std::optional<EventsEncoder> events;
    MergeThread* current = nullptr;
    merge_decode_events(file_, payload, chunk_offset,
                        [&](MergeThread& thread, const native::SlotEvent& event) {
                          if (current == nullptr) {
                            current = &thread;
                            events.emplace(output_, thread.output_index, thread.output_sequence);
                          }
                          if (!event.malformed) write_event(*events, thread, event);
                        });
    if (events) {
      events->flush();
      current->output_sequence = events->sequence();
    }
  }

 private:
  uint64_t ticks_of(uint64_t input_ticks) const {
    return static_cast<uint64_t>(file_.clock.to_ns(input_ticks)) - static_cast<uint64_t>(first_ns_);
  }
  // A name id of the input as the output's; an id the file never named gets a record of
  // the reader's "<unknown name N>", written after the others.
  uint32_t name_id(uint32_t input) {
    if (file_.has_name(input)) return file_.output_name[input];
    auto [it, inserted] = file_.unknown_name_output.try_emplace(input, 0);
    if (inserted) {
      it->second = next_name_id_++;
      std::string text = "<unknown name " + std::to_string(input) + ">";
      format::append_pod(
          late_names_,
          format::NameRecordHeader{it->second, 0, static_cast<uint16_t>(text.size()), 0, 0, 0});
      late_names_.append(text);
    }
    return it->second;
  }

  void write_event(EventsEncoder& events, MergeThread& thread, const native::SlotEvent& event) {
    using format::SlotKind;
    switch (event.kind) {
      case SlotKind::kTrack:
        events.add(event.id, slot_word(static_cast<uint32_t>(event.text.size()), SlotKind::kTrack),
                   event.text);
        return;
      case SlotKind::kBegin: {
        if (event.name_id != 0 || event.text.empty())
          events.add(ticks_of(event.ticks), slot_word(name_id(event.name_id), SlotKind::kBegin));
        else
          events.add(ticks_of(event.ticks),
                     slot_word(static_cast<uint32_t>(event.text.size()), SlotKind::kBeginNamed),
                     event.text);
        uint64_t derived =
            native::derived_span_id(thread.output_index, ++thread.output_begins, output_salt_);
        if (derived != event.span_id) events.add(event.span_id, slot_word(0, SlotKind::kSpanId));
        return;
      }
      case SlotKind::kEnd:
        events.add(ticks_of(event.ticks),
                   slot_word(0, SlotKind::kEnd, event.unfinished ? format::kEndOfUnfinished : 0));
        return;
      case SlotKind::kInstant:
        if (event.name_id != 0 || event.text.empty())
          events.add(ticks_of(event.ticks),
                     slot_word(name_id(event.name_id), SlotKind::kInstant, event.detail));
        else
          events.add(ticks_of(event.ticks),
                     slot_word(static_cast<uint32_t>(event.text.size()), SlotKind::kInstantNamed,
                               event.detail),
                     event.text);
        return;
      case SlotKind::kCounter: {
        format::Slot value{};
        std::memcpy(&value, &event.value, sizeof(event.value));
        events.add(ticks_of(event.ticks),
                   slot_word(static_cast<uint32_t>(event.text.size()), SlotKind::kCounter),
                   event.text, &value);
        return;
      }
      case SlotKind::kAsyncBegin: {
        format::Slot key{};
        std::memcpy(&key, &event.id, sizeof(event.id));
        if (event.name_id != 0 || event.text.empty())
          events.add(ticks_of(event.ticks),
                     slot_word(name_id(event.name_id), SlotKind::kAsyncBegin, format::kAsyncNameId),
                     {}, &key);
        else
          events.add(ticks_of(event.ticks),
                     slot_word(static_cast<uint32_t>(event.text.size()), SlotKind::kAsyncBegin),
                     event.text, &key);
        return;
      }
      case SlotKind::kAsyncEnd: {
        format::Slot key{};
        std::memcpy(&key, &event.id, sizeof(event.id));
        events.add(
            ticks_of(event.ticks),
            slot_word(0, SlotKind::kAsyncEnd, event.unfinished ? format::kEndOfUnfinished : 0), {},
            &key);
        return;
      }
      case SlotKind::kArg: {
        uint64_t bits = 0;
        if (event.arg.type == trace::ArgType::kDouble)
          std::memcpy(&bits, &event.arg.double_value, 8);
        else if (event.arg.type == trace::ArgType::kString)
          bits = event.string_value.size();
        else
          bits = static_cast<uint64_t>(event.arg.int_value);
        std::string bytes(event.text);
        bytes.append(event.string_value);
        uint32_t id = static_cast<uint32_t>(event.text.size()) |
                      (static_cast<uint32_t>(event.string_value.size()) << 16);
        events.add(bits, slot_word(id, SlotKind::kArg, event.detail), bytes);
        return;
      }
      case SlotKind::kFlow:
        events.add(event.id, slot_word(0, SlotKind::kFlow, event.detail));
        return;
      case SlotKind::kSpanId:
        events.add(event.id, slot_word(0, SlotKind::kSpanId));
        return;
      case SlotKind::kSpanContext: {
        format::Slot trace_id{};
        std::memcpy(&trace_id, &event.trace_id.high, 8);
        std::memcpy(reinterpret_cast<char*>(&trace_id) + 8, &event.trace_id.low, 8);
        events.add(event.id, slot_word(event.name_id, SlotKind::kSpanContext, event.detail), {},
                   &trace_id);
        return;
      }
      default:
        return;
    }
  }

  NativeOutput& output_;
  MergeFile& file_;
  uint64_t output_salt_;
  int64_t first_ns_;
  uint32_t& next_name_id_;
  std::string& late_names_;
};

}  // namespace

MergeFilesResult merge_native_files(
    const std::vector<std::string>& paths, ByteSink& sink,
    const std::vector<std::pair<std::string, std::string>>& more_run_info) {
  MergeFilesResult result;
  if (paths.empty()) {
    result.error = "no trace file given";
    return result;
  }
  std::vector<MergeFile> files(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    files[i].path = paths[i];
    std::string error;
    if (!merge_scan_file(files[i], &error)) {
      result.error = error;
      return result;
    }
    if (files[i].damage) result.damage.push_back(files[i].damage->to_string(paths[i]));
    files[i].mapped.close();
  }

  // The merged run info (append_trace's rules, file by file).
  MergeRun run = merge_run_of(files.front());
  for (size_t i = 1; i < files.size(); ++i) run.merge(merge_run_of(files[i]));

  // Output threads and names, file by file in the order the reader meets them.
  uint32_t next_thread = 0;
  uint32_t next_name_id = 1;
  std::string names_payload;
  for (MergeFile& file : files) {
    for (uint32_t index : file.thread_order) file.threads[index].output_index = next_thread++;
    file.output_name.assign(file.names.size(), 0);
    for (uint32_t id = 0; id < file.names.size(); ++id) {
      if (!file.named[id]) continue;
      file.output_name[id] = next_name_id;
      std::string_view name = std::string_view(file.names[id].first).substr(0, 0xFFFF);
      std::string_view category = std::string_view(file.names[id].second).substr(0, 0xFFFF);
      format::append_pod(names_payload, format::NameRecordHeader{
                                            next_name_id, 0, static_cast<uint16_t>(name.size()),
                                            static_cast<uint16_t>(category.size()), 0, 0});
      names_payload.append(name);
      names_payload.append(category);
      ++next_name_id;
    }
  }

  NativeOutput output;
  output.sink = &sink;
  output.bytes.reserve((size_t{1} << 20) + 4096);
  std::string& out = output.bytes;
  format::append_file_header(out);
  std::vector<std::pair<std::string, std::string>> info = {
      {"command_line", run.info.command_line},
      {"host", run.info.host},
      {"opsight_version", run.info.opsight_version},
      {"clock", run.info.clock.empty() ? "ns" : run.info.clock},
      {"pid", std::to_string(run.info.pid)},
      {"trace_id", run.info.trace_id.to_hex()},
      {"ticks_per_second", "1000000000"},
      {"source_format", run.info.source_format},
  };
  for (const auto& entry : more_run_info) {
    auto same = std::find_if(run.info.extra.begin(), run.info.extra.end(),
                             [&](const auto& mine) { return mine.first == entry.first; });
    if (same != run.info.extra.end())
      same->second = entry.second;
    else
      run.info.extra.push_back(entry);
  }
  for (const auto& entry : run.info.extra) info.push_back(entry);
  for (const MergeFile& file : files) {
    for (const auto& entry : file.layout) info.push_back(entry);
    std::string prefix = "process." + std::to_string(file.pid) + ".";
    if (file.pid != 0 && !file.process_name.empty())
      info.emplace_back(prefix + "name", file.process_name);
    if (file.pid != 0 && file.parent_pid != 0)
      info.emplace_back(prefix + "parent_pid", std::to_string(file.parent_pid));
  }
  format::append_run_info_chunk(out, info);

  // The clock as write_native writes it: ticks are ns from the earliest event.
  int64_t first_ns = run.first_ns <= run.last_ns ? run.first_ns : 0;
  int64_t last_ns = run.first_ns <= run.last_ns ? run.last_ns : 0;
  int64_t offset = run.info.has_unix_offset ? run.info.unix_offset_ns : 0;
  auto plus = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  };
  int64_t bounds_ns = plus(last_ns, plus(~first_ns, 1));
  int64_t span_ns = run.info.traced_ns > 0 ? run.info.traced_ns : std::max<int64_t>(bounds_ns, 1);
  format::ClockSync syncs[2] = {{0, first_ns, plus(first_ns, offset)},
                                {static_cast<uint64_t>(span_ns), plus(first_ns, span_ns),
                                 plus(plus(first_ns, span_ns), offset)}};
  format::append_chunk(out, format::ChunkType::kClockSync,
                       std::string_view(reinterpret_cast<const char*>(syncs), sizeof(syncs)));
  if (!names_payload.empty()) format::append_chunk(out, format::ChunkType::kNames, names_payload);
  std::string().swap(names_payload);

  std::vector<format::ThreadStats> stats;
  for (MergeFile& file : files) {
    for (uint32_t index : file.thread_order) {
      const MergeThread& thread = file.threads[index];
      size_t header = format::begin_chunk(out);
      format::append_pod(out, format::ThreadRecordHeader{thread.output_index,
                                                         static_cast<uint32_t>(thread.name.size()),
                                                         thread.pid, thread.tid});
      out.append(thread.name);
      format::end_chunk(out, header, format::ChunkType::kThread);
      int64_t overhead = thread.has_track ? merge_thread_overhead(file, index, thread) : 0;
      stats.push_back({thread.output_index, 0, thread.events, merge_thread_dropped(file, index),
                       static_cast<uint64_t>(overhead)});
    }
  }
  output.hand_over_if_large();

  // The events, file by file.
  const uint64_t output_salt = native::span_id_salt(run.info.trace_id);
  std::string late_names;
  for (MergeFile& file : files) {
    if (auto problem = file.mapped.open(file.path)) {
      result.error = *problem;
      return result;
    }
    MergeEventWriter writer(output, file, output_salt, first_ns, next_name_id, late_names);
    std::string error;
    file.damage.reset();
    merge_walk_chunks(file, &error,
                      [&](format::ChunkType type, std::string_view payload, uint64_t chunk_offset) {
                        if (type == format::ChunkType::kEvents)
                          writer.write_chunk(payload, chunk_offset);
                      });
    file.mapped.close();
    if (output.refused) break;
  }
  if (!late_names.empty()) format::append_chunk(out, format::ChunkType::kNames, late_names);

  // Footer, as write_native's (ticks in ns: each thread's overhead is its slow-path time).
  size_t header = format::begin_chunk(out);
  format::append_pod(out, format::SessionStats{static_cast<uint64_t>(last_ns - first_ns),
                                               stats.size(), run.info.events_dropped, 0.0});
  for (const auto& entry : stats) format::append_pod(out, entry);
  format::end_chunk(out, header, format::ChunkType::kStats);
  output.append_index();
  output.hand_over();
  if (output.refused) result.error = "cannot write the merged trace (the output refused bytes)";
  return result;
}

}  // namespace opsight::io
