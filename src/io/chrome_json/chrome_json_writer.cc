// Writer of the Chrome Trace Event Format, in the object form that chrome://tracing and
// Perfetto UI open:
//   {"traceEvents": [M process/thread names, sort indices and labels, X slices, b/e async
//                    slices, s/f flows, i instants, C counters],
//    "displayTimeUnit": "ns", "otherData": {"writer": "opsight", ...run info...}}
// Times are written in microseconds with exactly three decimals, so every nanosecond
// survives a round trip through read_chrome_json. Each slice carries its span id (and its
// parent's) as 16-hex-digit args "opsight.span_id" / "opsight.parent_span_id" (prefixed, so
// they never collide with a slice's own args); the reader turns them back into ids when
// "otherData" says the file came from this writer. Timestamps are written relative to the
// trace's first one ("otherData.time_base_ns" holds it), so they stay small enough for a
// double to keep every nanosecond on the way back.
//
// An async lane (trace::Track::is_async) is written as a thread of its own, so that
// Perfetto shows one row per task: a synthetic tid not used by any thread of the trace
// (from 2^29 up, above Linux's pid_max of 2^22), named by a thread_name event whose args
// also carry "opsight.async_key" (16 hex digits) and "opsight.tid" (the thread that ran
// it); the reader turns such a thread back into an async lane.
//
// A process-wide async track (TrackKind::kAsync) is written as nestable async events: each
// slice a "b" and an "e" (in nesting order, so that pairing them by time gives the same
// tree back) with "id2": {"local": N}, N an id of the track's own (its index), and the
// track named by an "opsight_async_track" M event (its name, its key "opsight.async_key",
// N as "opsight.id", its sort index) that other viewers ignore.
//
// A flow is an "s" event at its first slice's start and an "f" with "bp":"e" at its second
// slice's start (what Perfetto binds to those slices unless a child starts at the same
// time), each with an "opsight.slice" arg naming its slice's span id, which the reader uses
// to bind it exactly. Instants keep their scope ("s": "t", "p", "g"). The series of a
// counter group that share a timestamp are one "C" event with an arg per series.
//
// Speed: every interned string is escaped once into a pool, numbers are formatted with
// fmt::format_int, and the output goes into a buffer (no iostreams) handed to the sink
// whenever it passes 1 MiB at the end of an event: writing holds that buffer, not the
// whole output.
//
// Thread-safety: write_chrome_json only reads the trace; it may run concurrently with
// other readers of the same trace.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "io/io.hpp"
#include "trace/trace.hpp"
#include "wire/json_escape.hpp"
#include "wire/json_numbers.hpp"

namespace opsight::io {
namespace {

class ChromeJsonWriter {
 public:
  ChromeJsonWriter(const trace::Trace& trace, ByteSink& sink) : trace_(trace), sink_(sink) {}

  // The bytes a write of `trace` about takes (to reserve a string for).
  static size_t estimated_bytes(const trace::Trace& trace) {
    return 256 + trace.slices.size() * 200 + trace.instants.size() * 120 +
           trace.counters.size() * 90;
  }

  // false: the sink refused bytes (what it was given is a prefix of the output).
  bool write() {
    try {
      write_all();
    } catch (const SinkRefused&) {
      return false;
    }
    return true;
  }

 private:
  struct SinkRefused {};

  void write_all() {
    time_base_ns_ = trace_.time_bounds().first;
    assign_written_tids();
    escape_string_table();
    index_args(trace_.slice_args, trace_.slices.args_begin, trace_.slices.size(),
               slice_args_index_);
    index_args(trace_.instant_args, trace_.instants.args_begin, trace_.instants.size(),
               instant_args_index_);
    out_.reserve(kSinkPieceBytes + 4096);
    raw("{\"traceEvents\":[\n");
    write_metadata_events();
    write_slices();
    write_async_slices();
    write_flows();
    write_instants();
    write_counters();
    if (wrote_event_) out_.resize(out_.size() - 2);  // the last event's ",\n"
    raw("\n],\"displayTimeUnit\":\"ns\",\"otherData\":");
    write_run_info();
    raw("}\n");
    hand_over(0);
  }

  // Gives the sink all but the last `keep` bytes of the buffer, which stay in it.
  void hand_over(size_t keep) {
    const size_t ready = out_.size() - keep;
    if (!sink_.write(std::string_view(out_.data(), ready))) throw SinkRefused{};
    std::memmove(out_.data(), out_.data() + ready, keep);
    out_.resize(keep);
  }

  // Escapes every interned string once; events then copy the escaped bytes.
  void escape_string_table() {
    const size_t count = trace_.strings.size();
    escaped_begin_.resize(count + 1);
    std::string pool;
    for (size_t id = 0; id < count; ++id) {
      escaped_begin_[id] = pool.size();
      wire::append_json_escaped(pool, trace_.str(static_cast<trace::StringId>(id)));
    }
    escaped_begin_[count] = pool.size();
    escaped_pool_ = std::move(pool);
  }

  // Where the args of each owner row are: the owner table's args_begin when finalize()
  // filled it (args then sorted by owner), otherwise (a trace never finalized) offsets and
  // an order built here with a counting sort by owner.
  struct ArgIndex {
    std::vector<size_t> begin;  // owner_rows + 1 offsets into `order` (or into the table)
    std::vector<size_t> order;  // empty: the table is already in owner order
    size_t arg_at(size_t position) const { return order.empty() ? position : order[position]; }
  };

  static void index_args(const trace::ArgTable& args, const trace::Column<trace::RowIndex>& given,
                         size_t owner_rows, ArgIndex& index) {
    index.begin.assign(owner_rows + 1, 0);
    index.order.clear();
    if (given.size() == owner_rows + 1 && given.back() == args.size()) {
      for (size_t row = 0; row <= owner_rows; ++row) index.begin[row] = given[row];
      return;
    }
    for (trace::RowIndex owner : args.owner)
      if (owner < owner_rows) ++index.begin[owner + 1];
    for (size_t row = 0; row < owner_rows; ++row) index.begin[row + 1] += index.begin[row];
    std::vector<size_t> next(index.begin.begin(), index.begin.end() - 1);
    index.order.resize(index.begin[owner_rows]);
    for (size_t arg = 0; arg < args.size(); ++arg)
      if (args.owner[arg] < owner_rows) index.order[next[args.owner[arg]]++] = arg;
  }

  void append_string(trace::StringId id) {
    out_.push_back('"');
    if (id + 1 < escaped_begin_.size())
      out_.append(escaped_pool_.data() + escaped_begin_[id],
                  escaped_pool_.data() + escaped_begin_[id + 1]);
    out_.push_back('"');
  }

  void raw(std::string_view text) { out_.append(text.data(), text.data() + text.size()); }

  void append_quoted(std::string_view text) {
    std::string escaped;
    wire::append_json_escaped(escaped, text);
    out_.push_back('"');
    out_.append(escaped.data(), escaped.data() + escaped.size());
    out_.push_back('"');
  }

  // Numbers without a format string to parse (wire/json_numbers.hpp, shared with the
  // streaming converter).
  void append_int(int64_t value) { wire::append_json_integer(out_, value); }
  void append_uint(uint64_t value) { wire::append_json_unsigned(out_, value); }
  void append_micros(int64_t nanos) { wire::append_json_micros(out_, nanos); }
  void append_double(double value) { wire::append_json_double(out_, value); }
  void append_hex64(uint64_t value) { wire::append_json_quoted_hex64(out_, value); }

  void append_arg_value(const trace::ArgValue& value) {
    switch (value.type) {
      case trace::ArgType::kInt:
        append_int(value.int_value);
        break;
      case trace::ArgType::kDouble:
        append_double(value.double_value);
        break;
      case trace::ArgType::kString:
        append_string(value.string_value);
        break;
      case trace::ArgType::kBool:
        raw(value.int_value != 0 ? std::string_view("true") : std::string_view("false"));
        break;
    }
  }

  // Appends "key":value members for the args of `row`; `first` tells whether a member
  // precedes them in the object.
  void append_args(const trace::ArgTable& args, const ArgIndex& index, size_t row, bool first) {
    for (size_t position = index.begin[row]; position < index.begin[row + 1]; ++position) {
      size_t arg = index.arg_at(position);
      if (!first) out_.push_back(',');
      first = false;
      append_string(args.key[arg]);
      out_.push_back(':');
      append_arg_value(args.value[arg]);
    }
  }

  void begin_event() { wrote_event_ = true; }
  // An event's end; the buffer goes to the sink once it is large, keeping the ",\n" that
  // the last event of the array drops.
  void end_event() {
    raw(std::string_view("},\n"));
    if (out_.size() >= kSinkPieceBytes) hand_over(2);
  }

  // The tid each track is written with: its own, or a synthetic one for an async lane.
  void assign_written_tids() {
    written_tid_.resize(trace_.tracks.size());
    std::unordered_set<int64_t> taken;
    for (const trace::Track& track : trace_.tracks)
      if (!track.is_async()) taken.insert(track.tid);
    int64_t next = kFirstSyntheticTid;
    for (size_t id = 0; id < trace_.tracks.size(); ++id) {
      const trace::Track& track = trace_.tracks[id];
      if (!track.is_async()) {
        written_tid_[id] = track.tid;
        continue;
      }
      while (taken.count(next) != 0) ++next;
      written_tid_[id] = next++;
    }
  }

  void append_track(trace::TrackId track) {
    int64_t pid = 0;
    int64_t tid = 0;
    if (track < trace_.tracks.size()) {
      pid = trace_.tracks[track].pid;
      tid = written_tid_[track];
    }
    raw(std::string_view("\"pid\":"));
    append_int(pid);
    raw(std::string_view(",\"tid\":"));
    append_int(tid);
  }

  // {"ph":"M","name":"<name>","pid":P,"tid":T,"args":{  (the caller closes it)
  void begin_metadata(std::string_view name, int64_t pid, int64_t tid) {
    begin_event();
    raw(std::string_view("{\"ph\":\"M\",\"name\":\""));
    raw(name);
    raw(std::string_view("\",\"pid\":"));
    append_int(pid);
    raw(std::string_view(",\"tid\":"));
    append_int(tid);
    raw(std::string_view(",\"args\":{"));
  }

  void write_metadata_events() {
    for (const trace::Process& process : trace_.processes) {
      if (process.name != 0) {
        begin_metadata("process_name", process.pid, 0);
        raw(std::string_view("\"name\":"));
        append_string(process.name);
        out_.push_back('}');
        end_event();
      }
      if (process.sort_index != 0) {
        begin_metadata("process_sort_index", process.pid, 0);
        raw(std::string_view("\"sort_index\":"));
        append_int(process.sort_index);
        out_.push_back('}');
        end_event();
      }
      if (!process.labels.empty()) {
        std::string labels;
        for (trace::StringId label : process.labels) {
          if (!labels.empty()) labels += ',';
          labels += trace_.str(label);
        }
        begin_metadata("process_labels", process.pid, 0);
        raw(std::string_view("\"labels\":"));
        append_quoted(labels);
        out_.push_back('}');
        end_event();
      }
    }
    for (size_t id = 0; id < trace_.tracks.size(); ++id) {
      const trace::Track& track = trace_.tracks[id];
      if (track.kind == trace::TrackKind::kAsync) {
        begin_metadata("opsight_async_track", track.pid, 0);
        raw(std::string_view("\"name\":"));
        append_quoted(trace_.track_label(static_cast<trace::TrackId>(id)));
        raw(std::string_view(",\"opsight.async_key\":"));
        append_hex64(track.async_key);
        raw(std::string_view(",\"opsight.id\":"));
        append_int(static_cast<int64_t>(id));
        raw(std::string_view(",\"sort_index\":"));
        append_int(track.sort_index);
        out_.push_back('}');
        end_event();
        continue;
      }
      if (track.sort_index != 0) {
        begin_metadata("thread_sort_index", track.pid, written_tid_[id]);
        raw(std::string_view("\"sort_index\":"));
        append_int(track.sort_index);
        out_.push_back('}');
        end_event();
      }
      if (track.name == 0 && !track.is_async()) continue;
      begin_event();
      raw(std::string_view("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":"));
      append_int(track.pid);
      raw(std::string_view(",\"tid\":"));
      append_int(written_tid_[id]);
      raw(std::string_view(",\"args\":{\"name\":"));
      if (track.name != 0)
        append_string(track.name);
      else
        append_quoted(trace_.track_label(static_cast<trace::TrackId>(id)));
      if (track.is_async()) {
        raw(std::string_view(",\"opsight.async_key\":"));
        append_hex64(track.async_key);
        raw(std::string_view(",\"opsight.tid\":"));
        append_int(track.tid);
      }
      out_.push_back('}');
      end_event();
    }
  }

  bool on_process_async_track(trace::RowIndex row) const {
    trace::TrackId track = trace_.slices.track[row];
    return track < trace_.tracks.size() && trace_.tracks[track].kind == trace::TrackKind::kAsync;
  }

  // ,"name":...,"cat":...,"args":{opsight markers, args}}
  void append_slice_body(size_t row) {
    const trace::SliceTable& slices = trace_.slices;
    raw(std::string_view(",\"name\":"));
    append_string(slices.name[row]);
    if (slices.category[row] != 0) {
      raw(std::string_view(",\"cat\":"));
      append_string(slices.category[row]);
    }
    raw(std::string_view(",\"args\":{\"opsight.span_id\":"));
    append_hex64(row < slices.span_id.size() ? slices.span_id[row] : 0);
    trace::RowIndex parent = row < slices.parent.size() ? slices.parent[row] : trace::kNoRow;
    if (parent != trace::kNoRow && parent < slices.span_id.size()) {
      raw(std::string_view(",\"opsight.parent_span_id\":"));
      append_hex64(slices.span_id[parent]);
    }
    if (slices.flags[row] & trace::kSliceUnfinished) raw(",\"opsight.unfinished\":true");
    append_args(trace_.slice_args, slice_args_index_, row, false);
    out_.push_back('}');
  }

  void write_slices() {
    const trace::SliceTable& slices = trace_.slices;
    for (size_t row = 0; row < slices.size(); ++row) {
      if (on_process_async_track(static_cast<trace::RowIndex>(row))) {
        has_async_slices_ = true;
        continue;
      }
      begin_event();
      raw(std::string_view("{\"ph\":\"X\","));
      append_track(slices.track[row]);
      raw(std::string_view(",\"ts\":"));
      append_micros(slices.ts[row] - time_base_ns_);
      raw(std::string_view(",\"dur\":"));
      append_micros(slices.dur[row]);
      append_slice_body(row);
      end_event();
    }
  }

  // The slices of process-wide async tracks as b/e pairs, a track at a time in nesting
  // order: a slice's "e" comes once the next slice that is not inside it begins.
  void write_async_slices() {
    if (!has_async_slices_) return;
    const trace::SliceTable& slices = trace_.slices;
    std::vector<std::vector<trace::RowIndex>> rows_of_track(trace_.tracks.size());
    for (trace::RowIndex row = 0; row < slices.size(); ++row)
      if (on_process_async_track(row)) rows_of_track[slices.track[row]].push_back(row);
    std::vector<trace::RowIndex> open;
    for (trace::TrackId track = 0; track < rows_of_track.size(); ++track) {
      const auto& rows = rows_of_track[track];
      if (rows.empty()) continue;
      bool nested = slices.parent.size() == slices.size();
      open.clear();
      for (trace::RowIndex row : rows) {
        trace::RowIndex parent = nested ? slices.parent[row] : trace::kNoRow;
        while (!open.empty() && open.back() != parent) {
          write_async_event('e', open.back());
          open.pop_back();
        }
        write_async_event('b', row);
        open.push_back(row);
      }
      while (!open.empty()) {
        write_async_event('e', open.back());
        open.pop_back();
      }
    }
  }

  void write_async_event(char phase, trace::RowIndex row) {
    const trace::SliceTable& slices = trace_.slices;
    begin_event();
    raw(phase == 'b' ? std::string_view("{\"ph\":\"b\",\"pid\":")
                     : std::string_view("{\"ph\":\"e\",\"pid\":"));
    append_int(trace_.tracks[slices.track[row]].pid);
    raw(std::string_view(",\"tid\":0,\"id2\":{\"local\":"));
    append_int(slices.track[row]);
    raw(std::string_view("},\"ts\":"));
    append_micros((phase == 'b' ? slices.ts[row] : slices.end(row)) - time_base_ns_);
    if (phase == 'b') {
      append_slice_body(row);
    } else {
      raw(std::string_view(",\"name\":"));
      append_string(slices.name[row]);
      if (slices.category[row] != 0) {
        raw(std::string_view(",\"cat\":"));
        append_string(slices.category[row]);
      }
    }
    end_event();
  }

  // Each flow as an "s" at its first slice and an "f" ("bp":"e") at its second.
  void write_flows() {
    const trace::FlowTable& flows = trace_.flows;
    const size_t slice_count = trace_.slices.size();
    for (size_t row = 0; row < flows.size(); ++row) {
      if (flows.slice_out[row] >= slice_count || flows.slice_in[row] >= slice_count) continue;
      write_flow_end('s', row, flows.slice_out[row]);
      write_flow_end('f', row, flows.slice_in[row]);
    }
  }

  void write_flow_end(char phase, size_t flow, trace::RowIndex slice) {
    const trace::FlowTable& flows = trace_.flows;
    const trace::SliceTable& slices = trace_.slices;
    begin_event();
    raw(phase == 's' ? std::string_view("{\"ph\":\"s\",")
                     : std::string_view("{\"ph\":\"f\",\"bp\":\"e\","));
    append_track(slices.track[slice]);
    raw(std::string_view(",\"ts\":"));
    append_micros(slices.ts[slice] - time_base_ns_);
    raw(std::string_view(",\"id\":"));
    append_hex64(flows.id[flow]);
    raw(std::string_view(",\"name\":"));
    append_string(flows.name[flow]);
    if (flows.category[flow] != 0) {
      raw(std::string_view(",\"cat\":"));
      append_string(flows.category[flow]);
    }
    raw(std::string_view(",\"args\":{\"opsight.slice\":"));
    append_hex64(slices.span_id[slice]);
    raw(std::string_view("}"));
    end_event();
  }

  void write_instants() {
    const trace::InstantTable& instants = trace_.instants;
    for (size_t row = 0; row < instants.size(); ++row) {
      begin_event();
      trace::InstantScope scope =
          row < instants.scope.size() ? instants.scope[row] : trace::InstantScope::kThread;
      raw(scope == trace::InstantScope::kGlobal ? std::string_view("{\"ph\":\"i\",\"s\":\"g\",")
          : scope == trace::InstantScope::kProcess
              ? std::string_view("{\"ph\":\"i\",\"s\":\"p\",")
              : std::string_view("{\"ph\":\"i\",\"s\":\"t\","));
      append_track(instants.track[row]);
      raw(std::string_view(",\"ts\":"));
      append_micros(instants.ts[row] - time_base_ns_);
      raw(std::string_view(",\"name\":"));
      append_string(instants.name[row]);
      if (instants.category[row] != 0) {
        raw(std::string_view(",\"cat\":"));
        append_string(instants.category[row]);
      }
      raw(std::string_view(",\"args\":{"));
      append_args(trace_.instant_args, instant_args_index_, row, true);
      out_.push_back('}');
      end_event();
    }
  }

  // A sample of a one-series counter is {"value": v}; the samples of a counter group's
  // series that follow one another with the same time are one event, an arg per series.
  void write_counters() {
    const trace::CounterTable& counters = trace_.counters;
    const auto& tracks = trace_.counter_tracks;
    auto usable = [&](size_t row) {
      return std::isfinite(counters.value[row]) && counters.counter_track[row] < tracks.size();
    };
    for (size_t row = 0; row < counters.size(); ++row) {
      if (!usable(row)) continue;
      const trace::CounterTrack& track = tracks[counters.counter_track[row]];
      begin_event();
      raw(std::string_view("{\"ph\":\"C\",\"pid\":"));
      append_int(track.pid);
      raw(std::string_view(",\"ts\":"));
      append_micros(counters.ts[row] - time_base_ns_);
      raw(std::string_view(",\"name\":"));
      if (track.group == 0) {
        append_string(track.name);
        raw(std::string_view(",\"args\":{\"value\":"));
        append_double(counters.value[row]);
        out_.push_back('}');
        end_event();
        continue;
      }
      append_string(track.group);
      raw(std::string_view(",\"args\":{"));
      append_string(track.series);
      out_.push_back(':');
      append_double(counters.value[row]);
      while (row + 1 < counters.size() && usable(row + 1) &&
             counters.ts[row + 1] == counters.ts[row]) {
        const trace::CounterTrack& next = tracks[counters.counter_track[row + 1]];
        if (next.group != track.group || next.pid != track.pid || next.series == track.series)
          break;
        ++row;
        out_.push_back(',');
        append_string(next.series);
        out_.push_back(':');
        append_double(counters.value[row]);
      }
      out_.push_back('}');
      end_event();
    }
  }

  void write_run_info() {
    const trace::RunInfo& run = trace_.run;
    auto text_member = [&](std::string_view key, std::string_view value) {
      raw(std::string_view(",\""));
      raw(key);
      raw(std::string_view("\":"));
      append_quoted(value);
    };
    auto number_member = [&](std::string_view key, int64_t value) {
      raw(std::string_view(",\""));
      raw(key);
      raw(std::string_view("\":"));
      append_int(value);
    };
    raw(std::string_view("{\"writer\":\"opsight\""));
    text_member("source_format", run.source_format);
    text_member("opsight_version", run.opsight_version);
    text_member("command_line", run.command_line);
    text_member("host", run.host);
    text_member("clock", run.clock);
    text_member("trace_id", run.trace_id.to_hex());
    number_member("pid", run.pid);
    number_member("time_base_ns", time_base_ns_);
    number_member("start_unix_ns", run.start_unix_ns);
    if (run.has_unix_offset) number_member("unix_offset_ns", run.unix_offset_ns);
    number_member("overhead_ns", run.overhead_ns);
    number_member("traced_ns", run.traced_ns);
    raw(std::string_view(",\"events_dropped\":"));
    append_uint(run.events_dropped);
    raw(run.complete ? std::string_view(",\"complete\":true")
                     : std::string_view(",\"complete\":false"));
    raw(std::string_view(",\"extra\":{"));
    bool first = true;
    for (const auto& [key, value] : run.extra) {
      if (!first) out_.push_back(',');
      first = false;
      append_quoted(key);
      out_.push_back(':');
      append_quoted(value);
    }
    raw(std::string_view("}}"));
  }

  static constexpr int64_t kFirstSyntheticTid = int64_t{1} << 29;

  const trace::Trace& trace_;
  ByteSink& sink_;
  std::vector<int64_t> written_tid_;  // per track
  int64_t time_base_ns_ = 0;          // subtracted from every timestamp written
  fmt::memory_buffer out_;
  std::string escaped_pool_;
  std::vector<size_t> escaped_begin_;
  ArgIndex slice_args_index_;
  ArgIndex instant_args_index_;
  bool wrote_event_ = false;
  bool has_async_slices_ = false;
};

}  // namespace

std::string write_chrome_json(const trace::Trace& trace) {
  try {
    StringSink sink;
    sink.out.reserve(ChromeJsonWriter::estimated_bytes(trace));
    ChromeJsonWriter(trace, sink).write();
    return std::move(sink.out);
  } catch (...) {
    return {};  // out of memory: nothing sensible can be written
  }
}

bool write_chrome_json(const trace::Trace& trace, ByteSink& sink) {
  return ChromeJsonWriter(trace, sink).write();
}

}  // namespace opsight::io
