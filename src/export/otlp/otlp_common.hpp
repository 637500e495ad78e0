// What the OTLP encoders of spans and of metrics share: ids as OTLP's bytes, and an
// attribute as a KeyValue.
#pragma once

#include <string_view>

#include "export/otlp/otlp_fields.hpp"
#include "export/span_view.hpp"
#include "trace/trace.hpp"
#include "wire/proto_encoder.hpp"

namespace opsight::exporting::otlp {

using wire::ProtoEncoder;

inline void put_trace_id(char* out, trace::TraceId id) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(id.high >> (56 - 8 * i));
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<char>(id.low >> (56 - 8 * i));
}
inline void put_span_id(char* out, uint64_t id) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(id >> (56 - 8 * i));
}

inline void write_attribute(ProtoEncoder& encoder, uint32_t field, const Attribute& attribute) {
  size_t key_value = encoder.begin_message(field);
  encoder.bytes_field(otlp::key_value::kKey, attribute.key);
  size_t value = encoder.begin_message(otlp::key_value::kValue);
  const AttributeValue& v = attribute.value;
  switch (v.type) {
    case AttributeValue::Type::kString:
      encoder.bytes_field(otlp::any_value::kStringValue, v.string_value);
      break;
    case AttributeValue::Type::kBool:
      encoder.bool_field(otlp::any_value::kBoolValue, v.int_value != 0);
      break;
    case AttributeValue::Type::kInt:
      encoder.int_field(otlp::any_value::kIntValue, v.int_value);
      break;
    case AttributeValue::Type::kDouble:
      encoder.double_field(otlp::any_value::kDoubleValue, v.double_value);
      break;
  }
  encoder.end_message(value);
  encoder.end_message(key_value);
}

}  // namespace opsight::exporting::otlp
