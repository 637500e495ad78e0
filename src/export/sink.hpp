// A sink is one kind of export target (OTLP/HTTP, OTLP/gRPC, Zipkin, Loki, Kafka, a
// Pushgateway, the live /metrics endpoint, OTLP logs), described once by a SinkDescription:
// the names users call it, the syntax of a target, how the text after its name becomes an
// ExportTarget, how a batch of spans (or of log records) is encoded for it, what sends the
// batches, and how rows are cut into batches. The table of every sink is sinks(); the
// export entry (export.cc), the live exporter and the Python package (through the binding)
// read the table and never branch on which sink a target is. Each sink lives in its own folder
// (otlp/, zipkin/, loki/, kafka/, prometheus/) beside its encoder and sender; adding one is
// docs/architecture.md's "Add an exporter".
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "export/batch_exporter.hpp"
#include "export/log_view.hpp"
#include "export/span_view.hpp"
#include "trace/trace.hpp"

namespace opsight::exporting {

struct ExportTarget;
struct MetricsSnapshot;

// Reads an environment variable (nullptr when unset); tests pass their own.
using Environment = std::function<const char*(const char*)>;

// What a target of the sink receives.
enum class SinkPayload {
  kSpans,    // batches of spans, encoded by make_encoder's encoder
  kMetrics,  // the run's metrics, once, as metrics_body makes them (a Pushgateway)
  kServed,   // nothing is sent: opsight run serves it (the live /metrics endpoint)
  kLogs,     // the program's log records (log_view.hpp), in batches that logs_body encodes
};

// Encodes the batches of one export (one call of export_trace, one live poll) for a sink.
// It may keep state across the batches of that export (Loki decides its streams once).
class SpanBatchEncoder {
 public:
  virtual ~SpanBatchEncoder() = default;
  // Fills `out.body` (and `out.key` where the sink keys its messages) for `rows`.
  virtual void encode(std::span<const trace::RowIndex> rows, EncodedBatch& out) = 0;
};

// The encoder of a sink whose batches are one function of the view and the rows (OTLP
// protobuf and JSON, Zipkin): `.make_encoder = stateless_encoder<encode_zipkin_json>`.
template <std::string (*Encode)(const SpanView&, std::span<const trace::RowIndex>)>
std::unique_ptr<SpanBatchEncoder> stateless_encoder(const SpanView& view) {
  class Encoder : public SpanBatchEncoder {
   public:
    explicit Encoder(const SpanView& source) : view_(source) {}
    void encode(std::span<const trace::RowIndex> rows, EncodedBatch& out) override {
      out.body = Encode(view_, rows);
    }

   private:
    const SpanView& view_;
  };
  return std::make_unique<Encoder>(view);
}

struct SinkDescription {
  std::string_view name = {};  // the label reports use: "otlp", "otlp-json", "zipkin", ...
  // Other names a target may start with ("otlp-protobuf" for "otlp").
  std::vector<std::string_view> aliases = {};
  std::string_view syntax = {};   // "zipkin[=URL]"
  std::string_view summary = {};  // one line: what is sent and how
  SinkPayload payload = SinkPayload::kSpans;
  // What its reports count, singular: "span" ("11 of 11 spans sent"), "log record".
  std::string_view item = "span";
  // A batch holds the spans of one trace only (a Kafka message is keyed by its trace id).
  bool one_trace_per_batch = false;
  // One sender per target whatever TraceExportOptions::requests_in_flight asks (a sender
  // that pipelines on its own, like Kafka's producer).
  bool single_sender = false;

  // Fills `target` from what follows the name (`rest`: "" , "=URL" or "?query") and the
  // environment, or returns why it cannot. `spelling` is the name the user wrote. May
  // point target.sink at a sibling description (`otlp` becomes OTLP/JSON or OTLP/gRPC
  // when OTEL_EXPORTER_OTLP_PROTOCOL says so).
  std::optional<std::string> (*parse)(std::string_view spelling, std::string_view rest,
                                      const Environment& environment,
                                      ExportTarget& target) = nullptr;
  // kSpans: the encoder of one export's batches.
  std::unique_ptr<SpanBatchEncoder> (*make_encoder)(const SpanView& view) = nullptr;
  // kMetrics: the body sent once for the whole trace, and the target completed for it
  // (a Pushgateway's default grouping path names the trace's host). `items` holds the
  // trace's span count on entry; a sink whose reports count something else (`item`: OTLP's
  // data points) sets it to the body's count.
  std::string (*metrics_body)(const trace::Trace& trace, const SpanView& view,
                              const ExportTarget& target, uint64_t* items) = nullptr;
  void (*complete_for_trace)(ExportTarget& target, const trace::Trace& trace) = nullptr;
  // kMetrics sinks that also send while the program runs (otlp-metrics, live export): the
  // body of one export of `metrics` (already the difference since the last export when
  // target.delta_temporality), over [start, end] in Unix ns; `items` gets its count.
  std::string (*live_metrics_body)(const MetricsSnapshot& metrics,
                                   std::span<const Attribute> resource, uint64_t start_unix_ns,
                                   uint64_t end_unix_ns, const ExportTarget& target,
                                   uint64_t* items) = nullptr;
  // kLogs: the body of one batch of log records (indexes into the view's records).
  std::string (*logs_body)(const LogView& logs, std::span<const uint32_t> records) = nullptr;
  // The sender of a target; nullptr: HTTP (http_sender.hpp) with the fields below.
  std::unique_ptr<BatchSender> (*make_sender)(const ExportTarget& target, double timeout_s,
                                              std::string_view opsight_version) = nullptr;
  std::string_view http_content_type = {};
  std::string_view http_method = "POST";
  bool reads_otlp_partial_success = false;  // the answer may be OTLP's partial success

  // Every name a target may start with: `name`, then the aliases.
  std::vector<std::string_view> spellings() const;
};

// Every sink, in the order help texts list them.
std::span<const SinkDescription* const> sinks();

// The sink a target starting with `spelling` names; nullptr when none does.
const SinkDescription* find_sink(std::string_view spelling);

// "otlp, otlp-json, ... or loki": every spelling, for messages.
std::string sink_spellings_for_messages();

// For the sinks' parse functions.
// The variable's value; empty when unset.
std::string_view environment_value(const Environment& environment, const char* name);
// "10000" -> 10000; nullopt for anything but a whole number (spaces around allowed).
std::optional<uint64_t> parse_whole_number(std::string_view text);
// Sets target.endpoint from `url` (`default_path` when it has none); why not, if it cannot.
std::optional<std::string> set_http_endpoint(ExportTarget& target, std::string_view url,
                                             std::string_view default_path);
// A sender that fails every batch with one message (a producer or channel that could not be
// made): the spans are counted as dropped and the report says why.
std::unique_ptr<BatchSender> make_failing_sender(std::string description, std::string message);

}  // namespace opsight::exporting
