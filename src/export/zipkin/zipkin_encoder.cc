#include "export/zipkin/zipkin_encoder.hpp"

#include <fmt/format.h>

#include <vector>

#include "wire/json_escape.hpp"

namespace opsight::exporting {

namespace {
// Floor and ceiling division by 1000 for possibly negative nanoseconds.
int64_t floor_us(int64_t ns) { return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000); }
int64_t ceil_us(int64_t ns) { return -floor_us(-ns); }
}  // namespace

std::string encode_zipkin_json(const SpanView& view, std::span<const trace::RowIndex> rows) {
  std::string out;
  out.reserve(rows.size() * 350 + 16);
  out += '[';
  std::vector<Attribute> attributes;
  bool first = true;
  for (trace::RowIndex row : rows) {
    if (!first) out += ',';
    first = false;
    fmt::format_to(std::back_inserter(out), "{{\"traceId\":\"{}\",\"id\":\"{}\"",
                   view.trace_id(row).to_hex(), trace::span_id_to_hex(view.span_id(row)));
    if (uint64_t parent = view.parent_span_id(row))
      fmt::format_to(std::back_inserter(out), ",\"parentId\":\"{}\"",
                     trace::span_id_to_hex(parent));
    out += ",\"name\":";
    wire::append_json_string(out, view.name(row));
    SpanKind kind = view.kind(row);
    if (kind != SpanKind::kInternal && kind != SpanKind::kUnspecified)
      fmt::format_to(std::back_inserter(out), ",\"kind\":\"{}\"", span_kind_name(kind));
    int64_t start_us = floor_us(view.start_unix_ns(row));
    int64_t duration_us = std::max<int64_t>(1, ceil_us(view.end_unix_ns(row)) - start_us);
    fmt::format_to(std::back_inserter(out), ",\"timestamp\":{},\"duration\":{}", start_us,
                   duration_us);
    out += ",\"localEndpoint\":{\"serviceName\":";
    wire::append_json_string(out, view.resources()[view.resource_of(row)].service_name);
    out += "},\"tags\":{";
    view.attributes(row, attributes);
    bool first_tag = true;
    auto tag = [&](std::string_view key, std::string_view value) {
      if (!first_tag) out += ',';
      first_tag = false;
      wire::append_json_string(out, key);
      out += ':';
      wire::append_json_string(out, value);
    };
    for (const Attribute& attribute : attributes) tag(attribute.key, attribute.value.to_string());
    if (view.has_error(row)) tag("error", view.error_message(row));
    auto links = view.links(row);
    if (!links.empty()) {
      std::string linked;
      for (trace::RowIndex link : links) {
        if (!linked.empty()) linked += ',';
        linked += trace::span_id_to_hex(view.span_id(link));
      }
      tag("opsight.linked_from", linked);
    }
    out += "}}";
  }
  out += ']';
  return out;
}

}  // namespace opsight::exporting
