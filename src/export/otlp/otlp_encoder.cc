#include "export/otlp/otlp_encoder.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "export/otlp/otlp_common.hpp"
#include "export/otlp/otlp_fields.hpp"
#include "wire/json_escape.hpp"
#include "wire/proto_encoder.hpp"

namespace opsight::exporting {

namespace {

using otlp::put_span_id;
using otlp::put_trace_id;
using otlp::write_attribute;
using wire::ProtoEncoder;

// Calls `each(resource_index, rows)` for every run of rows of one process.
template <typename Each>
void for_each_process_run(const SpanView& view, std::span<const trace::RowIndex> rows, Each each) {
  size_t begin = 0;
  while (begin < rows.size()) {
    uint32_t resource = view.resource_of(rows[begin]);
    size_t end = begin + 1;
    while (end < rows.size() && view.resource_of(rows[end]) == resource) ++end;
    each(resource, rows.subspan(begin, end - begin));
    begin = end;
  }
}

// W3C trace flags, and whether the parent is remote (known either way).
uint32_t span_flags(const SpanView& view, trace::RowIndex row) {
  return (view.trace_flags(row) & 0xFFu) | otlp::kFlagContextHasIsRemote |
         (view.has_remote_parent(row) ? otlp::kFlagContextIsRemote : 0u);
}

}  // namespace

std::string encode_otlp_protobuf(const SpanView& view, std::span<const trace::RowIndex> rows) {
  std::string out;
  out.reserve(rows.size() * 160 + 512);
  ProtoEncoder encoder(out);
  std::vector<Attribute> attributes;
  char trace_id[16];
  char span_id[8];
  for_each_process_run(view, rows, [&](uint32_t resource_index, auto process_rows) {
    const ProcessResource& resource = view.resources()[resource_index];
    size_t resource_spans = encoder.begin_message(otlp::export_request::kResourceSpans);
    size_t resource_message = encoder.begin_message(otlp::resource_spans::kResource);
    for (const Attribute& attribute : resource.attributes)
      write_attribute(encoder, otlp::resource::kAttributes, attribute);
    encoder.end_message(resource_message);
    size_t scope_spans = encoder.begin_message(otlp::resource_spans::kScopeSpans);
    size_t scope = encoder.begin_message(otlp::scope_spans::kScope);
    encoder.bytes_field(otlp::scope::kName, "opsight");
    encoder.end_message(scope);
    for (trace::RowIndex row : process_rows) {
      size_t span = encoder.begin_message(otlp::scope_spans::kSpans);
      put_trace_id(trace_id, view.trace_id(row));
      encoder.bytes_field(otlp::span::kTraceId, std::string_view(trace_id, 16));
      put_span_id(span_id, view.span_id(row));
      encoder.bytes_field(otlp::span::kSpanId, std::string_view(span_id, 8));
      if (uint64_t parent = view.parent_span_id(row)) {
        put_span_id(span_id, parent);
        encoder.bytes_field(otlp::span::kParentSpanId, std::string_view(span_id, 8));
      }
      encoder.fixed32_field(otlp::span::kFlags, span_flags(view, row));
      encoder.bytes_field(otlp::span::kName, view.name(row));
      encoder.varint_field(otlp::span::kKind, static_cast<uint64_t>(view.kind(row)));
      encoder.fixed64_field(otlp::span::kStartTimeUnixNano,
                            static_cast<uint64_t>(view.start_unix_ns(row)));
      encoder.fixed64_field(otlp::span::kEndTimeUnixNano,
                            static_cast<uint64_t>(view.end_unix_ns(row)));
      view.attributes(row, attributes);
      for (const Attribute& attribute : attributes)
        write_attribute(encoder, otlp::span::kAttributes, attribute);
      if (view.has_exception(row)) {
        view.exception_attributes(row, attributes);
        size_t event = encoder.begin_message(otlp::span::kEvents);
        encoder.fixed64_field(otlp::event::kTimeUnixNano,
                              static_cast<uint64_t>(view.end_unix_ns(row)));
        encoder.bytes_field(otlp::event::kName, "exception");
        for (const Attribute& attribute : attributes)
          write_attribute(encoder, otlp::event::kAttributes, attribute);
        encoder.end_message(event);
      }
      for (trace::RowIndex linked : view.links(row)) {
        size_t link = encoder.begin_message(otlp::span::kLinks);
        put_trace_id(trace_id, view.trace_id(linked));
        encoder.bytes_field(otlp::link::kTraceId, std::string_view(trace_id, 16));
        put_span_id(span_id, view.span_id(linked));
        encoder.bytes_field(otlp::link::kSpanId, std::string_view(span_id, 8));
        write_attribute(encoder, otlp::link::kAttributes,
                        {"opsight.link", AttributeValue::of(std::string_view("handoff"))});
        encoder.fixed32_field(otlp::link::kFlags,
                              view.trace_flags(linked) | otlp::kFlagContextHasIsRemote);
        encoder.end_message(link);
      }
      if (view.has_error(row)) {
        size_t status = encoder.begin_message(otlp::span::kStatus);
        encoder.bytes_field(otlp::status::kMessage, view.error_message(row));
        encoder.varint_field(otlp::status::kCode, otlp::status::kCodeError);
        encoder.end_message(status);
      }
      encoder.end_message(span);
    }
    encoder.end_message(scope_spans);
    encoder.end_message(resource_spans);
  });
  return out;
}

namespace {

void json_attribute(std::string& out, const Attribute& attribute) {
  out += "{\"key\":";
  wire::append_json_string(out, attribute.key);
  out += ",\"value\":{";
  const AttributeValue& v = attribute.value;
  switch (v.type) {
    case AttributeValue::Type::kString:
      out += "\"stringValue\":";
      wire::append_json_string(out, v.string_value);
      break;
    case AttributeValue::Type::kBool:
      out += v.int_value ? "\"boolValue\":true" : "\"boolValue\":false";
      break;
    case AttributeValue::Type::kInt:
      fmt::format_to(std::back_inserter(out), "\"intValue\":\"{}\"", v.int_value);
      break;
    case AttributeValue::Type::kDouble:
      if (std::isfinite(v.double_value))
        fmt::format_to(std::back_inserter(out), "\"doubleValue\":{}", v.double_value);
      else  // the JSON mapping's names for the values JSON cannot write
        out += std::isnan(v.double_value) ? "\"doubleValue\":\"NaN\""
               : v.double_value > 0       ? "\"doubleValue\":\"Infinity\""
                                          : "\"doubleValue\":\"-Infinity\"";
      break;
  }
  out += "}}";
}

void json_attributes(std::string& out, const std::vector<Attribute>& attributes) {
  out += '[';
  for (size_t i = 0; i < attributes.size(); ++i) {
    if (i) out += ',';
    json_attribute(out, attributes[i]);
  }
  out += ']';
}

}  // namespace

std::string encode_otlp_json(const SpanView& view, std::span<const trace::RowIndex> rows) {
  std::string out;
  out.reserve(rows.size() * 400 + 512);
  out += "{\"resourceSpans\":[";
  std::vector<Attribute> attributes;
  bool first_resource = true;
  for_each_process_run(view, rows, [&](uint32_t resource_index, auto process_rows) {
    if (!first_resource) out += ',';
    first_resource = false;
    out += "{\"resource\":{\"attributes\":";
    json_attributes(out, view.resources()[resource_index].attributes);
    out += "},\"scopeSpans\":[{\"scope\":{\"name\":\"opsight\"},\"spans\":[";
    bool first_span = true;
    for (trace::RowIndex row : process_rows) {
      if (!first_span) out += ',';
      first_span = false;
      fmt::format_to(std::back_inserter(out), "{{\"traceId\":\"{}\",\"spanId\":\"{}\"",
                     view.trace_id(row).to_hex(), trace::span_id_to_hex(view.span_id(row)));
      if (uint64_t parent = view.parent_span_id(row))
        fmt::format_to(std::back_inserter(out), ",\"parentSpanId\":\"{}\"",
                       trace::span_id_to_hex(parent));
      fmt::format_to(std::back_inserter(out), ",\"flags\":{}", span_flags(view, row));
      out += ",\"name\":";
      wire::append_json_string(out, view.name(row));
      fmt::format_to(std::back_inserter(out),
                     ",\"kind\":{},\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\"",
                     static_cast<int>(view.kind(row)), view.start_unix_ns(row),
                     view.end_unix_ns(row));
      out += ",\"attributes\":";
      view.attributes(row, attributes);
      json_attributes(out, attributes);
      if (view.has_exception(row)) {
        view.exception_attributes(row, attributes);
        fmt::format_to(std::back_inserter(out),
                       ",\"events\":[{{\"timeUnixNano\":\"{}\",\"name\":\"exception\","
                       "\"attributes\":",
                       view.end_unix_ns(row));
        json_attributes(out, attributes);
        out += "}]";
      }
      if (view.has_error(row)) {
        out += ",\"status\":{\"message\":";
        wire::append_json_string(out, view.error_message(row));
        out += ",\"code\":2}";
      }
      auto links = view.links(row);
      if (!links.empty()) {
        out += ",\"links\":[";
        for (size_t i = 0; i < links.size(); ++i) {
          if (i) out += ',';
          fmt::format_to(
              std::back_inserter(out),
              "{{\"traceId\":\"{}\",\"spanId\":\"{}\",\"flags\":{},\"attributes\":"
              "[{{\"key\":\"opsight.link\",\"value\":{{\"stringValue\":\"handoff\"}}}}]}}",
              view.trace_id(links[i]).to_hex(), trace::span_id_to_hex(view.span_id(links[i])),
              view.trace_flags(links[i]) | otlp::kFlagContextHasIsRemote);
        }
        out += ']';
      }
      out += '}';
    }
    out += "]}]}";
  });
  out += "]}";
  return out;
}

namespace {

// The protobuf wire format, read as far as a partial success needs: varints and
// length-delimited fields; false at anything malformed.
bool read_varint(std::string_view& in, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    *value |= uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Calls `field(number, wire_type, varint, bytes)` for each field of `message`; false when
// it is not a protobuf message.
template <typename Field>
bool for_each_field(std::string_view message, Field field) {
  while (!message.empty()) {
    uint64_t key = 0, value = 0;
    if (!read_varint(message, &key)) return false;
    switch (key & 7) {
      case 0:
        if (!read_varint(message, &value)) return false;
        field(static_cast<uint32_t>(key >> 3), 0, value, std::string_view());
        break;
      case 2:
        if (!read_varint(message, &value) || value > message.size()) return false;
        field(static_cast<uint32_t>(key >> 3), 2, 0, message.substr(0, value));
        message.remove_prefix(value);
        break;
      case 1:
        if (message.size() < 8) return false;
        message.remove_prefix(8);
        break;
      case 5:
        if (message.size() < 4) return false;
        message.remove_prefix(4);
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace

PartialSuccess decode_partial_success(std::string_view response_body) {
  PartialSuccess result;
  std::string_view partial;
  bool ok = for_each_field(response_body,
                           [&](uint32_t number, int type, uint64_t, std::string_view bytes) {
                             if (number == otlp::export_response::kPartialSuccess && type == 2)
                               partial = bytes;
                           });
  if (!ok || partial.empty()) return {};
  ok = for_each_field(partial,
                      [&](uint32_t number, int type, uint64_t value, std::string_view bytes) {
                        if (number == otlp::partial_success::kRejectedSpans && type == 0)
                          result.rejected_spans = value;
                        if (number == otlp::partial_success::kErrorMessage && type == 2)
                          result.error_message = std::string(bytes);
                      });
  return ok ? result : PartialSuccess{};
}

}  // namespace opsight::exporting
