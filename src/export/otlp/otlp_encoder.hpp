// OTLP trace export requests (opentelemetry/proto/collector/trace/v1), in the two bodies
// OTLP over HTTP accepts: binary protobuf (application/x-protobuf, the default) and its
// JSON mapping (application/json: ids as hex, 64-bit integers as decimal strings, enums as
// numbers, lowerCamelCase keys).
//
// One request holds the given rows of a SpanView: one ResourceSpans per run of rows of
// the same process, one ScopeSpans (scope "opsight") in each. The protobuf is written by
// hand with wire::ProtoEncoder (field numbers in otlp_fields.hpp, from the published
// .proto files); the JSON with fmt, strings escaped per RFC 8259.
//
// Thread-safety: the functions keep no state; each call writes its own string.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "export/span_view.hpp"

namespace opsight::exporting {

std::string encode_otlp_protobuf(const SpanView& view, std::span<const trace::RowIndex> rows);
std::string encode_otlp_json(const SpanView& view, std::span<const trace::RowIndex> rows);

// A collector's protobuf answer to a request that it took only in part
// (ExportTraceServiceResponse.partial_success): the spans it rejected and why. Zero and
// empty for a full success, an empty body, or bytes that are not such a message.
struct PartialSuccess {
  uint64_t rejected_spans = 0;
  std::string error_message;
};
PartialSuccess decode_partial_success(std::string_view response_body);

}  // namespace opsight::exporting
