// Zipkin v2 JSON (POST /api/v2/spans): an array of spans, each with traceId, id, parentId,
// name, kind (absent for internal spans), timestamp and duration in microseconds (the
// format's unit: the start rounds down, the end up, so a span never shrinks; a duration
// under 1 µs is written as 1, as Zipkin requires), localEndpoint.serviceName, tags (every
// attribute as a string; "error" holds the exception) and, for the spans that picked up
// handed-off work, the tag opsight.linked_from (Zipkin has no links).
//
// Thread-safety: keeps no state.
#pragma once

#include <span>
#include <string>

#include "export/span_view.hpp"

namespace opsight::exporting {

std::string encode_zipkin_json(const SpanView& view, std::span<const trace::RowIndex> rows);

}  // namespace opsight::exporting
