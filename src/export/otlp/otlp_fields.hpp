// Field numbers of the OTLP messages the exporter writes, from the OpenTelemetry protocol's
// .proto files (opentelemetry/proto/{collector/trace,trace,collector/metrics,metrics,
// collector/logs,logs,resource,common}/v1). Facts of
// the wire format, shared by the encoder and its tests.
#pragma once

#include <cstdint>

namespace opsight::exporting::otlp {

namespace export_request {  // ExportTraceServiceRequest
inline constexpr uint32_t kResourceSpans = 1;
}
namespace export_response {  // ExportTraceServiceResponse (a collector's answer)
inline constexpr uint32_t kPartialSuccess = 1;
}
namespace partial_success {  // ExportTracePartialSuccess
inline constexpr uint32_t kRejectedSpans = 1;
inline constexpr uint32_t kErrorMessage = 2;
}  // namespace partial_success
namespace resource_spans {  // ResourceSpans
inline constexpr uint32_t kResource = 1;
inline constexpr uint32_t kScopeSpans = 2;
inline constexpr uint32_t kSchemaUrl = 3;
}  // namespace resource_spans
namespace resource {  // Resource
inline constexpr uint32_t kAttributes = 1;
}
namespace scope_spans {  // ScopeSpans
inline constexpr uint32_t kScope = 1;
inline constexpr uint32_t kSpans = 2;
}  // namespace scope_spans
namespace scope {  // InstrumentationScope
inline constexpr uint32_t kName = 1;
inline constexpr uint32_t kVersion = 2;
}  // namespace scope
namespace span {  // Span
inline constexpr uint32_t kTraceId = 1;
inline constexpr uint32_t kSpanId = 2;
inline constexpr uint32_t kTraceState = 3;
inline constexpr uint32_t kParentSpanId = 4;
inline constexpr uint32_t kName = 5;
inline constexpr uint32_t kKind = 6;
inline constexpr uint32_t kStartTimeUnixNano = 7;  // fixed64
inline constexpr uint32_t kEndTimeUnixNano = 8;    // fixed64
inline constexpr uint32_t kAttributes = 9;
inline constexpr uint32_t kEvents = 11;
inline constexpr uint32_t kLinks = 13;
inline constexpr uint32_t kStatus = 15;
inline constexpr uint32_t kFlags = 16;  // fixed32
}  // namespace span
namespace event {                             // Span.Event
inline constexpr uint32_t kTimeUnixNano = 1;  // fixed64
inline constexpr uint32_t kName = 2;
inline constexpr uint32_t kAttributes = 3;
}  // namespace event
namespace link {  // Span.Link
inline constexpr uint32_t kTraceId = 1;
inline constexpr uint32_t kSpanId = 2;
inline constexpr uint32_t kAttributes = 4;
inline constexpr uint32_t kFlags = 6;  // fixed32
}  // namespace link
namespace status {  // Status
inline constexpr uint32_t kMessage = 2;
inline constexpr uint32_t kCode = 3;
inline constexpr uint64_t kCodeError = 2;
}  // namespace status
namespace key_value {  // KeyValue
inline constexpr uint32_t kKey = 1;
inline constexpr uint32_t kValue = 2;
}  // namespace key_value
namespace any_value {  // AnyValue
inline constexpr uint32_t kStringValue = 1;
inline constexpr uint32_t kBoolValue = 2;
inline constexpr uint32_t kIntValue = 3;
inline constexpr uint32_t kDoubleValue = 4;
}  // namespace any_value

// Metrics (opentelemetry/proto/{collector/metrics,metrics}/v1).
namespace export_metrics_request {  // ExportMetricsServiceRequest
inline constexpr uint32_t kResourceMetrics = 1;
}
namespace resource_metrics {  // ResourceMetrics
inline constexpr uint32_t kResource = 1;
inline constexpr uint32_t kScopeMetrics = 2;
}  // namespace resource_metrics
namespace scope_metrics {  // ScopeMetrics
inline constexpr uint32_t kScope = 1;
inline constexpr uint32_t kMetrics = 2;
}  // namespace scope_metrics
namespace metric {  // Metric
inline constexpr uint32_t kName = 1;
inline constexpr uint32_t kDescription = 2;
inline constexpr uint32_t kUnit = 3;
inline constexpr uint32_t kGauge = 5;
inline constexpr uint32_t kSum = 7;
inline constexpr uint32_t kHistogram = 9;
}  // namespace metric
namespace gauge {  // Gauge
inline constexpr uint32_t kDataPoints = 1;
}
namespace sum {  // Sum
inline constexpr uint32_t kDataPoints = 1;
inline constexpr uint32_t kAggregationTemporality = 2;
inline constexpr uint32_t kIsMonotonic = 3;
}  // namespace sum
namespace histogram {  // Histogram
inline constexpr uint32_t kDataPoints = 1;
inline constexpr uint32_t kAggregationTemporality = 2;
}  // namespace histogram
namespace number_data_point {                      // NumberDataPoint
inline constexpr uint32_t kStartTimeUnixNano = 2;  // fixed64
inline constexpr uint32_t kTimeUnixNano = 3;       // fixed64
inline constexpr uint32_t kAsDouble = 4;
inline constexpr uint32_t kAsInt = 6;  // sfixed64
inline constexpr uint32_t kAttributes = 7;
}  // namespace number_data_point
namespace histogram_data_point {                   // HistogramDataPoint
inline constexpr uint32_t kStartTimeUnixNano = 2;  // fixed64
inline constexpr uint32_t kTimeUnixNano = 3;       // fixed64
inline constexpr uint32_t kCount = 4;              // fixed64
inline constexpr uint32_t kSum = 5;                // double
inline constexpr uint32_t kBucketCounts = 6;       // packed fixed64
inline constexpr uint32_t kExplicitBounds = 7;     // packed double
inline constexpr uint32_t kExemplars = 8;
inline constexpr uint32_t kAttributes = 9;
}  // namespace histogram_data_point
namespace exemplar {                          // Exemplar
inline constexpr uint32_t kTimeUnixNano = 2;  // fixed64
inline constexpr uint32_t kAsDouble = 3;
inline constexpr uint32_t kSpanId = 4;
inline constexpr uint32_t kTraceId = 5;
}  // namespace exemplar
// AggregationTemporality
inline constexpr uint64_t kTemporalityDelta = 1;
inline constexpr uint64_t kTemporalityCumulative = 2;

// Logs (opentelemetry/proto/{collector/logs,logs}/v1). A collector's answer,
// ExportLogsServiceResponse, has its partial success (rejected_log_records, error_message)
// under the same field numbers as the traces' (export_response, partial_success above).
namespace export_logs_request {  // ExportLogsServiceRequest
inline constexpr uint32_t kResourceLogs = 1;
}
namespace resource_logs {  // ResourceLogs
inline constexpr uint32_t kResource = 1;
inline constexpr uint32_t kScopeLogs = 2;
}  // namespace resource_logs
namespace scope_logs {  // ScopeLogs
inline constexpr uint32_t kScope = 1;
inline constexpr uint32_t kLogRecords = 2;
}  // namespace scope_logs
namespace log_record {                                 // LogRecord
inline constexpr uint32_t kTimeUnixNano = 1;           // fixed64
inline constexpr uint32_t kSeverityNumber = 2;         // enum SeverityNumber
inline constexpr uint32_t kSeverityText = 3;           // string
inline constexpr uint32_t kBody = 5;                   // AnyValue
inline constexpr uint32_t kAttributes = 6;             // KeyValue
inline constexpr uint32_t kFlags = 8;                  // fixed32: the W3C trace flags (low 8 bits)
inline constexpr uint32_t kTraceId = 9;                // bytes (16)
inline constexpr uint32_t kSpanId = 10;                // bytes (8)
inline constexpr uint32_t kObservedTimeUnixNano = 11;  // fixed64
}  // namespace log_record

// Span.flags: the low 8 bits are the W3C trace flags (bit 0: sampled); bits 8 and 9 say
// whether the parent is known to be remote (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK = 0x100,
// SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK = 0x200).
inline constexpr uint32_t kFlagSampled = 0x01;
inline constexpr uint32_t kFlagContextHasIsRemote = 0x100;
inline constexpr uint32_t kFlagContextIsRemote = 0x200;

}  // namespace opsight::exporting::otlp
