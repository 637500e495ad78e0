// The OTLP sinks: OTLP/HTTP with protobuf bodies (`otlp`, also `otlp-protobuf`), OTLP/HTTP
// with JSON bodies (`otlp-json`) and OTLP/gRPC (`otlp-grpc`). One parse function serves
// the three: it reads the OpenTelemetry exporter variables (OTEL_EXPORTER_OTLP_*: protocol,
// endpoint, headers, compression, timeout, TLS files; a signal-specific TRACES_ variable
// wins over the general one) and picks the sibling the protocol names.
#pragma once

#include "export/sink.hpp"

namespace opsight::exporting::otlp {

const SinkDescription& protobuf_sink();
const SinkDescription& json_sink();
const SinkDescription& grpc_sink();

}  // namespace opsight::exporting::otlp
