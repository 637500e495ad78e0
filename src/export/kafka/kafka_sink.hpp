// The Kafka sink (`kafka[=BROKER[,BROKER...]][?topic=NAME&PROPERTY=VALUE...]`): one message
// per batch of spans of one trace, an OTLP ExportTraceServiceRequest in protobuf keyed by
// that trace's id, sent by librdkafka's producer (kafka_sender.hpp). Every query parameter
// but `topic` is a librdkafka property, checked when the target is parsed.
#pragma once

#include "export/sink.hpp"

namespace opsight::exporting::kafka {

const SinkDescription& sink();

}  // namespace opsight::exporting::kafka
