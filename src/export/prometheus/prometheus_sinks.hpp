// The Prometheus sinks. `pushgateway=URL`: the run's metrics (prometheus_text.hpp) PUT once
// to a Pushgateway, under /metrics/job/opsight/instance/<host> unless the URL has a path.
// `prometheus=[HOST:]PORT`: the live /metrics endpoint that `opsight run` serves while the
// program runs (metrics_endpoint.hpp); it is served, not sent, so an export of a finished
// trace refuses it with a message saying where it belongs.
#pragma once

#include "export/sink.hpp"

namespace opsight::exporting::prometheus {

const SinkDescription& pushgateway_sink();
const SinkDescription& served_sink();

}  // namespace opsight::exporting::prometheus
