// The OpenTelemetry view of a trace: what every span exporter (OTLP, Zipkin) sends for a
// slice, computed once per trace so that the encoders only walk rows and write bytes.
//
// For each slice: its trace id (the run's), span id and parent span id (the model's
// 64-bit ids; 0 for a root), start and end in Unix-epoch nanoseconds, kind (from the
// `span.kind` argument, else internal), its attributes (the slice's arguments, the
// thread, the category, an unfinished mark), its links (the flows that arrive at it: the
// span that handed the work off), an error status when it carries `exception.type` or
// `error.type`, and an `exception` event for `exception.type`. Spans are grouped by
// process: each process is one resource (service.name, host.name, process.pid,
// process.command_line, telemetry.sdk.*, and what OTEL_RESOURCE_ATTRIBUTES adds).
//
// Thread-safety: immutable after construction; any number of threads may encode from one
// view at once. It refers to the trace, which must outlive it.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/trace.hpp"
#include "trace/trace_membership.hpp"

namespace opsight::exporting {

// OTLP's SpanKind values (opentelemetry/proto/trace/v1/trace.proto).
enum class SpanKind : uint8_t {
  kUnspecified = 0,
  kInternal = 1,
  kServer = 2,
  kClient = 3,
  kProducer = 4,
  kConsumer = 5,
};
std::string_view span_kind_name(SpanKind kind);  // "INTERNAL", "SERVER", ...

// One attribute value, with its string held by the trace or the view.
struct AttributeValue {
  enum class Type : uint8_t { kString, kBool, kInt, kDouble };
  Type type = Type::kString;
  int64_t int_value = 0;  // kInt, kBool
  double double_value = 0;
  std::string_view string_value;

  static AttributeValue of(std::string_view text) { return {Type::kString, 0, 0, text}; }
  static AttributeValue of(int64_t value) { return {Type::kInt, value, 0, {}}; }
  static AttributeValue of_bool(bool value) { return {Type::kBool, value ? 1 : 0, 0, {}}; }
  static AttributeValue of(double value) { return {Type::kDouble, 0, value, {}}; }
  std::string to_string() const;  // for formats whose values are strings (Zipkin tags)
};

struct Attribute {
  std::string_view key;
  AttributeValue value;
};

// What the exporters are told beyond the trace: the service name and extra resource
// attributes (from the command line, else OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES),
// and the optional semantic conventions asked for.
struct ResourceOptions {
  std::string service_name;  // empty: the program's name from the run's command line
  std::vector<std::pair<std::string, std::string>> attributes;
  std::string opsight_version;  // telemetry.sdk.version
  // OpenTelemetry's GenAI conventions on model-inference spans (see SpanView::attributes):
  // OTEL_SEMCONV_STABILITY_OPT_IN names gen_ai_latest_experimental, their opt-in.
  bool gen_ai_conventions = false;
};

// The resource of one process.
struct ProcessResource {
  int64_t pid = 0;
  std::string service_name;
  std::vector<Attribute> attributes;  // service.name first
};

// A span's place in its trace, given from outside for traces whose rows do not hold it
// (the live exporter's batches: a span's parent was often sent in an earlier batch).
struct SpanIdentity {
  trace::TraceId trace_id;  // all zero: the run's
  uint64_t parent_span_id = 0;
  uint8_t trace_flags = 1;
  bool remote_parent = false;
  bool model_root = false;  // a model's outermost module call (its parent is no module span)
};

class SpanView {
 public:
  SpanView(const trace::Trace& trace, const ResourceOptions& options);
  // With one identity per slice, which then decides trace_id, parent_span_id,
  // has_remote_parent and trace_flags.
  SpanView(const trace::Trace& trace, const ResourceOptions& options,
           std::vector<SpanIdentity> identities);
  SpanView(const SpanView&) = delete;
  SpanView& operator=(const SpanView&) = delete;

  const trace::Trace& trace() const { return trace_; }
  size_t span_count() const { return rows_.size(); }
  // Every slice, grouped by process (in the order of `resources()`), by time within one.
  std::span<const trace::RowIndex> rows() const { return rows_; }
  // The resource of rows()[i] .. : resources are contiguous runs of rows().
  const std::vector<ProcessResource>& resources() const { return resources_; }
  // Index into resources() of the process of `row`.
  uint32_t resource_of(trace::RowIndex row) const {
    return resource_of_track_[trace_.slices.track[row]];
  }
  // Index into resources() of the process a track belongs to (an instant's: LogView).
  uint32_t resource_of_track(trace::TrackId track) const { return resource_of_track_[track]; }
  // The thread.name attribute of a track.
  std::string_view thread_name(trace::TrackId track) const { return thread_names_[track]; }

  // The span's trace: the trace it or its nearest ancestor joined or began
  // (Trace::span_contexts), else its root's own (trace::TraceMembership).
  trace::TraceId trace_id(trace::RowIndex row) const {
    if (!identities_.empty())
      return identities_[row].trace_id == trace::TraceId{} ? trace_.run.trace_id
                                                           : identities_[row].trace_id;
    return membership_.trace_id(row);
  }
  uint8_t trace_flags(trace::RowIndex row) const {
    return identities_.empty() ? membership_.trace_flags(row) : identities_[row].trace_flags;
  }
  uint64_t span_id(trace::RowIndex row) const { return trace_.slices.span_id[row]; }
  // The remote parent for a span that joined a trace, else the enclosing span (0: a root).
  uint64_t parent_span_id(trace::RowIndex row) const {
    if (!identities_.empty()) return identities_[row].parent_span_id;
    if (int32_t context = membership_.context_of(row); context >= 0)
      return trace_.span_contexts.parent_span_id[static_cast<size_t>(context)];
    trace::RowIndex parent = trace_.slices.parent[row];
    return parent == trace::kNoRow ? 0 : trace_.slices.span_id[parent];
  }
  bool has_remote_parent(trace::RowIndex row) const {
    if (!identities_.empty()) return identities_[row].remote_parent;
    int32_t context = membership_.context_of(row);
    return context >= 0 && trace_.span_contexts.parent_span_id[static_cast<size_t>(context)] != 0;
  }
  int64_t start_unix_ns(trace::RowIndex row) const {
    return trace_.slices.ts[row] + unix_offset_ns_;
  }
  int64_t end_unix_ns(trace::RowIndex row) const {
    return trace_.slices.end(row) + unix_offset_ns_;
  }
  std::string_view name(trace::RowIndex row) const { return trace_.str(trace_.slices.name[row]); }
  SpanKind kind(trace::RowIndex row) const;

  // The span's attributes, appended to `out` (cleared first). With the GenAI conventions
  // on, a model-inference span also gets gen_ai.operation.name "inference" (none of the
  // conventions' values names a forward pass), gen_ai.provider.name ("pytorch",
  // "onnxruntime") and gen_ai.request.model (the model's class or file name), unless the
  // span carries them already.
  void attributes(trace::RowIndex row, std::vector<Attribute>& out) const;
  // A model inference: an ONNX Runtime session run (category "session"), or a model's
  // outermost module call (category "module", under no module span).
  bool is_model_inference(trace::RowIndex row) const;

  // An error status: the span carries exception.type (an exception left it), or error.type
  // (OpenTelemetry's semantic conventions set it only on failure: an HTTP server span
  // answering 5xx has error.type "500"). Its message: "Type: message" for an exception,
  // else the error.type value.
  bool has_error(trace::RowIndex row) const;
  std::string error_message(trace::RowIndex row) const;
  // Set when the span carries exception.type: the exception event's attributes
  // (exception.type, exception.message, and exception.stacktrace when recorded).
  bool has_exception(trace::RowIndex row) const;
  void exception_attributes(trace::RowIndex row, std::vector<Attribute>& out) const;

  // The rows of the spans whose flows arrive at `row` (OTLP links).
  std::span<const trace::RowIndex> links(trace::RowIndex row) const {
    return {link_rows_.data() + link_begin_[row], link_rows_.data() + link_begin_[row + 1]};
  }

 private:
  void add_gen_ai_attributes(trace::RowIndex row, std::vector<Attribute>& out) const;

  const trace::Trace& trace_;
  int64_t unix_offset_ns_ = 0;
  std::vector<trace::RowIndex> rows_;
  std::vector<ProcessResource> resources_;
  std::vector<uint32_t> resource_of_track_;
  std::vector<SpanIdentity> identities_;  // empty: from the trace's rows
  // Each row's trace (its own context's, else its parent's, a root's own).
  trace::TraceMembership membership_;
  std::vector<uint32_t> link_begin_;  // span_count()+1 entries (CSR over rows)
  std::vector<trace::RowIndex> link_rows_;
  // Per track: the thread.name attribute.
  std::vector<std::string> thread_names_;
  // Strings the attributes point into (a deque: its elements never move).
  std::deque<std::string> owned_strings_;
  // Interned argument keys the view treats specially (0 where the trace lacks them).
  trace::StringId kind_key_ = 0, exception_type_key_ = 0, exception_message_key_ = 0,
                  exception_stack_key_ = 0, error_type_key_ = 0;
  bool has_kind_key_ = false, has_exception_keys_ = false, has_error_type_key_ = false;
  // The GenAI conventions (0 categories: the trace has no such spans).
  bool gen_ai_conventions_ = false;
  trace::StringId module_category_ = 0, session_category_ = 0;
  bool has_module_category_ = false, has_session_category_ = false;
};

// "%20" -> " ": every %XX decoded, anything else (a lone '%' too) kept as is.
std::string percent_decode(std::string_view text);

// "a=b,c=d" as OTEL_RESOURCE_ATTRIBUTES writes it (values percent-decoded); a malformed
// entry is skipped and named in `errors`.
std::vector<std::pair<std::string, std::string>> parse_key_value_list(
    std::string_view text, std::vector<std::string>* errors = nullptr);

}  // namespace opsight::exporting
