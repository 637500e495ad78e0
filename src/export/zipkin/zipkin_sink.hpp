// The Zipkin sink (`zipkin[=URL]`): Zipkin v2 JSON spans (zipkin_encoder.hpp) POSTed to a
// Zipkin server's /api/v2/spans.
#pragma once

#include "export/sink.hpp"

namespace opsight::exporting::zipkin {

const SinkDescription& sink();

}  // namespace opsight::exporting::zipkin
