// Loki's push API body (POST /loki/api/v1/push, application/json): one log line per span,
// in streams labelled by service, span name and status:
//
//   {"streams":[{"stream":{"service_name":"serve.py","span_name":"request","status":"ok"},
//                "values":[["1700000000000001000","{\"trace_id\":\"...\",...}"], ...]}, ...]}
//
// A value's timestamp is the span's start in Unix nanoseconds (a decimal string, as the
// API wants); values are sorted by it within each stream. The line is a JSON object:
// trace_id, span_id, parent_span_id (absent for a root), name, kind (absent for internal
// spans), pid, duration_ns, error ("Type: message", only for spans that raised), links
// (the span ids that handed work to this one, when any) and attributes (the span's, typed:
// numbers stay numbers; NaN and infinities become strings).
//
// Label cardinality: every label value multiplies Loki's streams, so only three labels are
// written, each from a small set: service_name (one per process's service), span_name and
// status ("ok" or "error"). Span names come from call sites, not from data, but a trace
// can still hold thousands: LokiStreams keeps the `max_span_names` most frequent names as
// label values and labels the rest "(other)" (their line still has the real name).
// Label values are cut to 1024 bytes (Loki's default limit is 2048). Label names are
// Prometheus-style (service_name, not service.name), as Loki requires.
//
// Thread-safety: LokiStreams is immutable after construction; the encoder keeps no state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "export/log_view.hpp"
#include "export/span_view.hpp"

namespace opsight::exporting {

// The stream of every span of a view, decided once per trace so that every batch of it
// agrees (the span-name cap counts the whole trace, not one batch).
class LokiStreams {
 public:
  static constexpr size_t kDefaultMaxSpanNames = 200;
  static constexpr size_t kMaxLabelValueBytes = 1024;
  static constexpr std::string_view kOtherSpanName = "(other)";

  explicit LokiStreams(const SpanView& view, size_t max_span_names = kDefaultMaxSpanNames);

  size_t stream_count() const { return labels_json_.size(); }
  // The stream of `row` (a row of the view's trace).
  uint32_t stream_of(trace::RowIndex row) const { return stream_of_row_[row]; }
  // The stream's labels, written as a JSON object: {"service_name":"..","span_name":"..",
  // "status":"ok"}.
  const std::string& labels_json(uint32_t stream) const { return labels_json_[stream]; }

 private:
  std::vector<uint32_t> stream_of_row_;
  std::vector<std::string> labels_json_;
};

std::string encode_loki_json(const SpanView& view, const LokiStreams& streams,
                             std::span<const trace::RowIndex> rows);

// The program's log records (log_view.hpp) as Loki's push body: streams labelled
// service_name and level (the level's name in lower case: "warning", which Grafana reads
// as a level), each one's values sorted by time (the record's, in Unix ns); the line a JSON
// object: message, trace_id and span_id of the span the record was logged in (absent
// outside spans; what Grafana's derived fields link to the trace), and attributes
// (logger.name, code.*, exception.*, the program's extra fields, thread.id, thread.name).
std::string encode_loki_log_records(const LogView& logs, std::span<const uint32_t> records);

// A log line that is not a span's (opsight explain's one line per graph break), with its
// own labels; record_export.hpp sends them.
struct LogLine {
  std::vector<std::pair<std::string, std::string>> labels;  // Prometheus-style names
  int64_t unix_ns = 0;
  std::string line;
};

// Loki's push body for `lines`: one stream per distinct label set, in order of first
// appearance, values sorted by time; label values cut to kMaxLabelValueBytes.
std::string encode_loki_lines(std::span<const LogLine> lines);

}  // namespace opsight::exporting
