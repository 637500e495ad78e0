// The log records of a trace as the log exporters send them (OTLP logs, Loki): the
// instants in category "log" (schema/log_names.hpp: the logging bridge's), each with the
// span that was open on its track at its time, computed once so that the encoders only
// walk records and write bytes.
//
// For each record: its time in Unix-epoch nanoseconds; its track (the one it was logged
// on: the track its log.lane argument names among its thread's, else the instant's own);
// its span (the innermost slice of that track that holds its time), whose trace id, span
// id and trace flags are the ones the span exporters send for that slice (SpanView), or
// none for a record logged outside every span; its level (Python's number and name),
// message and logger; and its attributes (every other argument of the instant, then
// thread.id and thread.name of its track, as the spans carry them). Records are grouped by
// process (each is one resource, the span exporters' resource of that process), by time
// within one.
//
// Thread-safety: immutable after construction; it refers to the SpanView and its trace,
// which must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "export/span_view.hpp"

namespace opsight::exporting {

// OpenTelemetry's SeverityNumber for a level on Python's scale, as OTel's logging bridge
// maps it: below 10 unspecified (0); 10 DEBUG (5), 20 INFO (9), 30 WARN (13), 40 ERROR
// (17), 50 FATAL (21), each of the three numbers above a level one step up (11 is DEBUG2,
// 6), the rest of its ten the fourth step (15 is DEBUG4, 8); above 53 FATAL4 (24).
int severity_number(int64_t level);

// A record's span as its reader saw it (live export: the span NativeTail had open on the
// record's track when it was logged, which may not have ended yet); span_id 0: none.
struct LogSpanIds {
  trace::TraceId trace_id;
  uint64_t span_id = 0;
  uint8_t trace_flags = 0;
};

class LogView {
 public:
  explicit LogView(const SpanView& spans);
  // Each record's span given, by its instant's row (`given[row]`), not looked up among the
  // trace's slices.
  LogView(const SpanView& spans, std::vector<LogSpanIds> given);
  LogView(const LogView&) = delete;
  LogView& operator=(const LogView&) = delete;

  const SpanView& spans() const { return spans_; }
  size_t size() const { return records_.size(); }
  // Record indexes 0..size()-1, grouped by process (resources() order), by time within one.
  std::span<const uint32_t> records() const { return order_; }

  uint32_t resource_of(uint32_t record) const;  // index into spans().resources()
  trace::RowIndex instant(uint32_t record) const { return records_[record].instant; }
  int64_t time_unix_ns(uint32_t record) const;
  // The track it was logged on (a thread's, or an asyncio task's lane).
  trace::TrackId track(uint32_t record) const { return records_[record].track; }
  // The innermost span open on the record's track at its time; kNoRow: none.
  trace::RowIndex span(uint32_t record) const { return records_[record].span; }
  bool has_span(uint32_t record) const;
  // The span's ids and trace flags, as the span exporters send them (zero without a span).
  trace::TraceId trace_id(uint32_t record) const;
  uint64_t span_id(uint32_t record) const;
  uint8_t trace_flags(uint32_t record) const;

  int64_t level(uint32_t record) const { return records_[record].level; }
  std::string_view level_name(uint32_t record) const;  // the instant's name: "WARNING"
  std::string_view message(uint32_t record) const;
  std::string_view logger(uint32_t record) const;
  // Every argument of the record but its level and message (logger.name, code.*,
  // exception.*, the program's extra fields), then thread.id and thread.name; `out` is
  // cleared first.
  void attributes(uint32_t record, std::vector<Attribute>& out) const;

 private:
  struct Record {
    trace::RowIndex instant = trace::kNoRow;
    trace::TrackId track = 0;
    trace::RowIndex span = trace::kNoRow;
    int64_t level = 0;
    trace::StringId message = 0;
    trace::StringId logger = 0;
  };

  const SpanView& spans_;
  std::vector<LogSpanIds> given_;  // by instant row; empty: the spans are the trace's
  std::vector<Record> records_;
  std::vector<uint32_t> order_;
  trace::StringId level_key_ = 0, message_key_ = 0, lane_key_ = 0;
  bool has_level_key_ = false, has_message_key_ = false, has_lane_key_ = false;
};

}  // namespace opsight::exporting
