// A native file to Chrome JSON in bounded memory: the file is read a window at a time by a
// NativeTail (its clock set to the whole file's first and last syncs, found by a scan of
// the chunk headers, so that times are the whole-file reader's), and every event is written
// as soon as it is complete: a span when it ends ("X", or a "b"/"e" pair for an async span),
// an instant once the args that follow it are read, a counter sample at once. What is held:
// the tail's open spans and names, the thread list, and the output buffer (about 1 MiB).
//
// What differs from read_native + write_chrome_json (docs/formats.md, "Streaming
// conversion"): events are in the order they end, not by track (readers sort them); flows
// are left out and counted; a counter group's series are one "C" event each; the process
// name and layout hints of the run info are not applied.
#include <fmt/format.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "io/io.hpp"
#include "io/native/native_tail.hpp"
#include "opsight/internal/native_layout.hpp"
#include "wire/json_escape.hpp"
#include "wire/json_numbers.hpp"

namespace opsight::io {

namespace {

// Lanes get tids from here up (as write_chrome_json's synthetic tids): far above a Linux tid.
constexpr int64_t kFirstLaneTid = int64_t{1} << 29;

// The Chrome JSON output: events appended with a separator, the buffer handed to the sink
// once it passes 1 MiB. A refused write stops everything (the caller checks refused()).
class JsonEvents {
 public:
  explicit JsonEvents(ByteSink& sink) : sink_(sink) { out_.reserve(kSinkPieceBytes + 64 * 1024); }

  void raw(std::string_view text) { out_.append(text); }
  void quoted(std::string_view text) { wire::append_json_string(out_, text); }
  // Numbers without a format string to parse (wire/json_numbers.hpp): the converter writes
  // several per event.
  void integer(int64_t value) { wire::append_json_integer(out_, value); }
  void micros(int64_t nanos) { wire::append_json_micros(out_, nanos); }
  void hex64(uint64_t value) { wire::append_json_quoted_hex64(out_, value); }
  void number(double value) { wire::append_json_double(out_, value); }
  void args(const std::vector<TailArg>& args, bool first) {
    for (const TailArg& arg : args) {
      if (!first) out_.push_back(',');
      first = false;
      quoted(arg.key);
      out_.push_back(':');
      switch (arg.value.type) {
        case trace::ArgType::kInt:
          integer(arg.value.int_value);
          break;
        case trace::ArgType::kDouble:
          number(arg.value.double_value);
          break;
        case trace::ArgType::kString:
          quoted(arg.text);
          break;
        case trace::ArgType::kBool:
          raw(arg.value.int_value != 0 ? "true" : "false");
          break;
      }
    }
  }

  // Before an event: the separator after the one before.
  void begin_event() {
    if (events_++ > 0) raw(",\n");
  }
  void end_event() {
    out_.push_back('}');
    if (out_.size() >= kSinkPieceBytes) flush();
  }
  void flush() {
    if (!refused_ && !out_.empty() && !sink_.write(out_)) refused_ = true;
    out_.clear();
  }
  bool refused() const { return refused_; }

 private:
  ByteSink& sink_;
  std::string out_;
  uint64_t events_ = 0;
  bool refused_ = false;
};

}  // namespace

std::optional<std::string> convert_native_to_chrome_json(const std::string& path, ByteSink& sink,
                                                         StreamedConversion* counts) {
  FileClock clock;
  if (auto problem = scan_file_clock(path, &clock)) return problem;
  NativeTail tail(path);
  if (clock.found) tail.use_clock(clock.first, clock.last);
  // Times are written relative to the first sync, in the monotonic clock's terms (what
  // time_base_ns restores), so that reading the output back gives the reader's times.
  const int64_t unix_offset = clock.found ? clock.first.realtime_ns - clock.first.monotonic_ns : 0;
  const int64_t base_unix = clock.found ? clock.first.realtime_ns : 0;
  StreamedConversion local;
  StreamedConversion& count = counts != nullptr ? *counts : local;
  count = {};

  JsonEvents out(sink);
  out.raw("{\"traceEvents\":[\n");
  std::map<std::tuple<int64_t, int64_t, uint64_t>, int64_t> lane_tids;  // (pid, tid, lane)
  std::map<std::tuple<int64_t, int64_t, uint64_t>, std::string> lane_names;
  auto tid_of = [&](int64_t pid, int64_t tid, uint64_t lane, std::string_view lane_name) {
    if (lane == 0) return tid;
    auto key = std::tuple{pid, tid, lane};
    auto [found, added] =
        lane_tids.emplace(key, kFirstLaneTid + static_cast<int64_t>(lane_tids.size()));
    if (added || !lane_name.empty())
      lane_names[key] = lane_name.empty() ? "track " + std::to_string(lane) : lane_name;
    return found->second;
  };
  auto track = [&](int64_t pid, int64_t tid) {
    out.raw("\"pid\":");
    out.integer(pid);
    out.raw(",\"tid\":");
    out.integer(tid);
  };
  auto name_and_category = [&](std::string_view name, std::string_view category) {
    out.raw(",\"name\":");
    out.quoted(name);
    if (!category.empty()) {
      out.raw(",\"cat\":");
      out.quoted(category);
    }
  };

  TailVisitor visitor;
  visitor.on_span = [&](const EndedSpan& span) {
    const int64_t start = span.start_unix_ns - base_unix;
    auto body = [&] {
      name_and_category(span.name, span.category);
      out.raw(",\"args\":{\"opsight.span_id\":");
      out.hex64(span.span_id);
      if (span.parent_span_id != 0 && !span.remote_parent) {
        out.raw(",\"opsight.parent_span_id\":");
        out.hex64(span.parent_span_id);
      }
      if (span.unfinished) out.raw(",\"opsight.unfinished\":true");
      if (span.args != nullptr) out.args(*span.args, false);
      out.raw("}");
    };
    if (span.async) {  // a "b"/"e" pair on the process's async track of that id
      for (char phase : {'b', 'e'}) {
        out.begin_event();
        out.raw(phase == 'b' ? "{\"ph\":\"b\"," : "{\"ph\":\"e\",");
        track(span.pid, 0);
        out.raw(",\"id2\":{\"local\":");
        out.hex64(span.async_id);
        out.raw("},\"ts\":");
        out.micros((phase == 'b' ? span.start_unix_ns : span.end_unix_ns) - base_unix);
        if (phase == 'b')
          body();
        else
          name_and_category(span.name, span.category);
        out.end_event();
      }
      ++count.async_slices;
      return;
    }
    out.begin_event();
    out.raw("{\"ph\":\"X\",");
    track(span.pid, tid_of(span.pid, span.tid, span.lane, span.lane_name));
    out.raw(",\"ts\":");
    out.micros(start);
    out.raw(",\"dur\":");
    out.micros(span.end_unix_ns - span.start_unix_ns);  // the reader's times, both ends
    body();
    out.end_event();
    ++count.slices;
  };
  visitor.on_instant = [&](const TailInstant& instant) {
    out.begin_event();
    out.raw(instant.scope == static_cast<uint8_t>(trace::InstantScope::kGlobal)
                ? "{\"ph\":\"i\",\"s\":\"g\","
            : instant.scope == static_cast<uint8_t>(trace::InstantScope::kProcess)
                ? "{\"ph\":\"i\",\"s\":\"p\","
                : "{\"ph\":\"i\",\"s\":\"t\",");
    track(instant.pid, tid_of(instant.pid, instant.tid, instant.lane, instant.lane_name));
    out.raw(",\"ts\":");
    out.micros(instant.unix_ns - base_unix);
    name_and_category(instant.name, instant.category);
    out.raw(",\"args\":{");
    if (instant.args != nullptr) out.args(*instant.args, true);
    out.raw("}");
    out.end_event();
    ++count.instants;
  };
  visitor.on_counter_sample = [&](const TailCounterSample& sample) {
    if (!std::isfinite(sample.value)) return;
    out.begin_event();
    out.raw("{\"ph\":\"C\",\"pid\":");
    out.integer(sample.pid);
    out.raw(",\"ts\":");
    out.micros(sample.unix_ns - base_unix);
    out.raw(",\"name\":");
    out.quoted(sample.name);
    out.raw(",\"args\":{\"value\":");
    out.number(sample.value);
    out.raw("}");
    out.end_event();
    ++count.counter_samples;
  };
  visitor.on_flow = [&] { ++count.flows_left_out; };

  if (!tail.poll(visitor)) return tail.error();
  if (out.refused()) return std::string("the output refused bytes");
  tail.finish(visitor);

  // Names last: the threads' (kThread records), then the lanes'.
  for (const TailThread& thread : tail.threads()) {
    if (thread.name.empty()) continue;
    out.begin_event();
    out.raw("{\"ph\":\"M\",\"name\":\"thread_name\",");
    track(thread.pid, thread.tid);
    out.raw(",\"args\":{\"name\":");
    out.quoted(thread.name);
    out.raw("}");
    out.end_event();
  }
  for (const auto& [key, tid] : lane_tids) {
    auto [pid, thread_tid, lane] = key;
    out.begin_event();
    out.raw("{\"ph\":\"M\",\"name\":\"thread_name\",");
    track(pid, tid);
    out.raw(",\"args\":{\"name\":");
    out.quoted(lane_names[key]);
    out.raw(",\"opsight.async_key\":");
    out.hex64(lane);
    out.raw(",\"opsight.tid\":");
    out.integer(thread_tid);
    out.raw("}");
    out.end_event();
  }

  // The run info, as write_chrome_json's otherData: what the reader restores.
  out.raw(
      "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"writer\":\"opsight\","
      "\"source_format\":\"opsight\",\"streamed\":true");
  std::vector<std::pair<std::string, std::string>> extra;
  for (const auto& [key, value] : tail.run_info()) {
    if (key == "command_line" || key == "host" || key == "clock" || key == "opsight_version") {
      out.raw(",");
      out.quoted(key);
      out.raw(":");
      out.quoted(value);
    } else if (key == "pid") {
      out.raw(",\"pid\":");
      out.integer(std::strtoll(value.c_str(), nullptr, 10));
    } else if (key != "trace_id") {
      extra.emplace_back(key, value);
    }
  }
  out.raw(",\"trace_id\":");
  out.quoted(tail.trace_id().to_hex());
  out.raw(",\"time_base_ns\":");
  out.integer(clock.found ? clock.first.monotonic_ns : 0);
  out.raw(",\"start_unix_ns\":");
  out.integer(base_unix);
  if (clock.found) {
    out.raw(",\"unix_offset_ns\":");
    out.integer(unix_offset);
  }
  // The tracer's overhead and traced time as the whole-file reader computes them: events
  // decoded times the calibrated cost, plus the slow paths' time; the syncs' span.
  const double slope =
      clock.found && clock.last.ticks > clock.first.ticks
          ? static_cast<double>(clock.last.monotonic_ns - clock.first.monotonic_ns) /
                static_cast<double>(clock.last.ticks - clock.first.ticks)
          : 1.0;
  const double overhead = static_cast<double>(tail.events_decoded()) * tail.event_cost_ns() +
                          static_cast<double>(tail.slow_path_ticks()) * slope;
  out.raw(",\"overhead_ns\":");
  out.integer(overhead > 0 && overhead < 4e18 ? static_cast<int64_t>(std::llround(overhead)) : 0);
  out.raw(",\"traced_ns\":");
  out.integer(clock.found ? clock.last.monotonic_ns - clock.first.monotonic_ns : 0);
  out.raw(",\"events_dropped\":");
  out.integer(static_cast<int64_t>(tail.events_dropped()));
  out.raw(tail.finished() ? ",\"complete\":true" : ",\"complete\":false");
  out.raw(",\"extra\":{");
  bool first = true;
  for (const auto& [key, value] : extra) {
    if (!first) out.raw(",");
    first = false;
    out.quoted(key);
    out.raw(":");
    out.quoted(value);
  }
  out.raw("}}}\n");
  out.flush();
  if (out.refused()) return std::string("the output refused bytes");
  count.complete = tail.finished();
  return std::nullopt;
}

}  // namespace opsight::io
