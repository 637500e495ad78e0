// The OTLP sinks: OTLP/HTTP with protobuf bodies (`otlp`, also `otlp-protobuf`), OTLP/HTTP
// with JSON bodies (`otlp-json`) and OTLP/gRPC (`otlp-grpc`) for spans, OTLP/HTTP and
// OTLP/gRPC for metrics (`otlp-metrics`, `otlp-metrics-grpc`) and for the program's log
// records (`otlp-logs`, `otlp-logs-grpc`). One parse function serves the three span sinks:
// it reads the OpenTelemetry exporter variables (OTEL_EXPORTER_OTLP_*: protocol, endpoint,
// headers, compression, timeout, TLS files; a signal-specific TRACES_ variable wins over the
// general one) and picks the sibling the protocol names; metrics and logs read their own
// METRICS_ and LOGS_ variables the same way, each pair sharing a parse function. The gRPC
// sinks share one sender (grpc_sender.hpp), each calling its signal's Export method.
#pragma once

#include "export/sink.hpp"

namespace opsight::exporting::otlp {

const SinkDescription& protobuf_sink();
const SinkDescription& json_sink();
const SinkDescription& grpc_sink();
// `otlp-metrics[=URL]`: the run's metrics (otlp_metrics_encoder.hpp) over OTLP/HTTP.
const SinkDescription& metrics_sink();
// `otlp-logs[=URL]`: the program's log records (otlp_logs_encoder.hpp) over OTLP/HTTP.
const SinkDescription& logs_sink();
// `otlp-metrics-grpc[=URL]`, `otlp-logs-grpc[=URL]`: the same requests over OTLP/gRPC.
const SinkDescription& metrics_grpc_sink();
const SinkDescription& logs_grpc_sink();

}  // namespace opsight::exporting::otlp
