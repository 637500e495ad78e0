// The Loki sinks: `loki[=URL]`, one JSON log line per span through Loki's push API
// (loki_encoder.hpp), streams labelled service_name, span_name and status; and
// `loki-logs[=URL]`, the program's own log records (log_view.hpp) as lines with the trace
// and span ids of the span each was logged in, streams labelled service_name and level.
// Both: Loki's tenant header from OPSIGHT_LOKI_TENANT and basic authentication from the URL
// or OPSIGHT_LOKI_BASIC_AUTH. VictoriaLogs takes the same API under /insert/loki/api/v1/push.
#pragma once

#include "export/sink.hpp"

namespace opsight::exporting::loki {

const SinkDescription& sink();
const SinkDescription& logs_sink();

}  // namespace opsight::exporting::loki
