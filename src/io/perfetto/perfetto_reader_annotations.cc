// Perfetto reader: debug annotations -> args. Scalars (int, uint, bool, double, string,
// interned string, pointer as "0x...") become typed args; nested values, dicts, arrays and
// proto values become JSON text, nested at most kMaxNesting deep.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "io/perfetto/perfetto_reader_internal.hpp"
#include "wire/json_escape.hpp"

namespace opsight::io::perfetto_reading {

void PerfettoReader::decode_annotations(Sequence& seq) {
  decoded_args_.clear();
  for (std::string_view bytes : annotations_) {
    ProtoReader reader(bytes, begin_, "DebugAnnotation");
    ProtoField field;
    StringId key = 0;
    ArgValue value = ArgValue::of_string(0);
    bool rendered = false;  // the value is the whole annotation as JSON text
    while (!rendered && reader.next(field)) {
      switch (field.number) {
        case fields::annotation::kNameIid:
          expect_wire_type(reader, field, wire::kWireVarint);
          key = lookup(seq.annotation_names, field.value);
          break;
        case fields::annotation::kName:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          key = trace().intern(field.bytes);
          break;
        case fields::annotation::kBoolValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          value = ArgValue::of_bool(field.as_bool());
          break;
        case fields::annotation::kUintValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          value = field.value <= static_cast<uint64_t>(kInt64Max)
                      ? ArgValue::of_int(static_cast<int64_t>(field.value))
                      : ArgValue::of_string(trace().intern(std::to_string(field.value)));
          break;
        case fields::annotation::kIntValue:
          expect_wire_type(reader, field, wire::kWireVarint);
          value = ArgValue::of_int(field.as_int64());
          break;
        case fields::annotation::kDoubleValue:
          expect_wire_type(reader, field, wire::kWireFixed64);
          value = ArgValue::of_double(field.as_double());
          break;
        case fields::annotation::kStringValue:
        case fields::annotation::kLegacyJsonValue:
          expect_wire_type(reader, field, wire::kWireLengthDelimited);
          value = ArgValue::of_string(trace().intern(field.bytes));
          break;
        case fields::annotation::kStringValueIid:
          expect_wire_type(reader, field, wire::kWireVarint);
          value = ArgValue::of_string(lookup(seq.annotation_strings, field.value));
          break;
        case fields::annotation::kPointerValue: {
          expect_wire_type(reader, field, wire::kWireVarint);
          char text[24];
          std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(field.value));
          value = ArgValue::of_string(trace().intern(text));
          break;
        }
        case fields::annotation::kNestedValue:
        case fields::annotation::kDictEntries:
        case fields::annotation::kArrayValues:
        case fields::annotation::kProtoValue: {
          // The whole annotation as JSON text (its value only).
          std::string json;
          append_annotation_json(json, bytes, seq, 0);
          value = ArgValue::of_string(trace().intern(json));
          rendered = true;
          break;
        }
        default:
          break;
      }
    }
    if (rendered && key == 0) key = trace().intern(annotation_name(bytes, seq));
    decoded_args_.emplace_back(key, value);
  }
}

void PerfettoReader::append_double_json(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += std::isnan(value) ? "\"NaN\"" : value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof text, value);
  out.append(text, error == std::errc() ? end : text);
}

void PerfettoReader::append_string_json(std::string& out, std::string_view text) {
  out += '"';
  wire::append_json_escaped(out, text);
  out += '"';
}

// A DebugAnnotation's value as JSON (dict_entries an object, array_values an array).
void PerfettoReader::append_annotation_json(std::string& out, std::string_view bytes, Sequence& seq,
                                            int depth) {
  if (depth > kMaxNesting) {
    out += "\"...\"";
    return;
  }
  ProtoReader reader(bytes, begin_, "DebugAnnotation");
  ProtoField field;
  enum class Shape { kEmpty, kScalar, kDict, kArray } shape = Shape::kEmpty;
  std::string scalar, items;
  std::string_view proto_type;
  while (reader.next(field)) {
    switch (field.number) {
      case fields::annotation::kBoolValue:
        expect_wire_type(reader, field, wire::kWireVarint);
        scalar = field.as_bool() ? "true" : "false";
        shape = Shape::kScalar;
        break;
      case fields::annotation::kUintValue:
        expect_wire_type(reader, field, wire::kWireVarint);
        scalar = std::to_string(field.value);
        shape = Shape::kScalar;
        break;
      case fields::annotation::kIntValue:
        expect_wire_type(reader, field, wire::kWireVarint);
        scalar = std::to_string(field.as_int64());
        shape = Shape::kScalar;
        break;
      case fields::annotation::kDoubleValue:
        expect_wire_type(reader, field, wire::kWireFixed64);
        scalar.clear();
        append_double_json(scalar, field.as_double());
        shape = Shape::kScalar;
        break;
      case fields::annotation::kStringValue:
      case fields::annotation::kLegacyJsonValue:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        scalar.clear();
        append_string_json(scalar, field.bytes);
        shape = Shape::kScalar;
        break;
      case fields::annotation::kStringValueIid:
        expect_wire_type(reader, field, wire::kWireVarint);
        scalar.clear();
        append_string_json(scalar, trace().str(lookup(seq.annotation_strings, field.value)));
        shape = Shape::kScalar;
        break;
      case fields::annotation::kPointerValue: {
        expect_wire_type(reader, field, wire::kWireVarint);
        char text[24];
        std::snprintf(text, sizeof text, "\"0x%llx\"",
                      static_cast<unsigned long long>(field.value));
        scalar = text;
        shape = Shape::kScalar;
        break;
      }
      case fields::annotation::kNestedValue:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        scalar.clear();
        append_nested_json(scalar, field.bytes, depth + 1);
        shape = Shape::kScalar;
        break;
      case fields::annotation::kProtoTypeName:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        proto_type = field.bytes;
        break;
      case fields::annotation::kProtoValue:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        scalar = "\"(proto message, " + std::to_string(field.bytes.size()) + " bytes)\"";
        shape = Shape::kScalar;
        break;
      case fields::annotation::kDictEntries: {
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        if (shape != Shape::kDict) items.clear();
        shape = Shape::kDict;
        if (!items.empty()) items += ',';
        append_string_json(items, annotation_name(field.bytes, seq));
        items += ':';
        append_annotation_json(items, field.bytes, seq, depth + 1);
        break;
      }
      case fields::annotation::kArrayValues:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        if (shape != Shape::kArray) items.clear();
        shape = Shape::kArray;
        if (!items.empty()) items += ',';
        append_annotation_json(items, field.bytes, seq, depth + 1);
        break;
      default:
        break;
    }
  }
  if (!proto_type.empty() && shape == Shape::kScalar && scalar.starts_with("\"(proto")) {
    scalar = "\"(proto " + std::string(proto_type) + scalar.substr(7);
  }
  switch (shape) {
    case Shape::kEmpty:
      out += "null";
      break;
    case Shape::kScalar:
      out += scalar;
      break;
    case Shape::kDict:
      out += '{' + items + '}';
      break;
    case Shape::kArray:
      out += '[' + items + ']';
      break;
  }
}

std::string_view PerfettoReader::annotation_name(std::string_view bytes, Sequence& seq) {
  ProtoReader reader(bytes, begin_, "DebugAnnotation");
  ProtoField field;
  while (reader.next(field)) {
    if (field.number == fields::annotation::kName && field.wire_type == wire::kWireLengthDelimited)
      return field.bytes;
    if (field.number == fields::annotation::kNameIid && field.wire_type == wire::kWireVarint)
      return trace().str(lookup(seq.annotation_names, field.value));
  }
  return {};
}

void PerfettoReader::append_nested_json(std::string& out, std::string_view bytes, int depth) {
  if (depth > kMaxNesting) {
    out += "\"...\"";
    return;
  }
  ProtoReader reader(bytes, begin_, "DebugAnnotation.NestedValue");
  ProtoField field;
  uint64_t nested_type = 0;
  std::vector<std::string_view> keys, values;
  std::string scalar = "null";
  while (reader.next(field)) {
    switch (field.number) {
      case fields::nested::kNestedType:
        expect_wire_type(reader, field, wire::kWireVarint);
        nested_type = field.value;
        break;
      case fields::nested::kDictKeys:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        keys.push_back(field.bytes);
        break;
      case fields::nested::kDictValues:
      case fields::nested::kArrayValues:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        values.push_back(field.bytes);
        break;
      case fields::nested::kIntValue:
        expect_wire_type(reader, field, wire::kWireVarint);
        scalar = std::to_string(field.as_int64());
        break;
      case fields::nested::kDoubleValue:
        expect_wire_type(reader, field, wire::kWireFixed64);
        scalar.clear();
        append_double_json(scalar, field.as_double());
        break;
      case fields::nested::kBoolValue:
        expect_wire_type(reader, field, wire::kWireVarint);
        scalar = field.as_bool() ? "true" : "false";
        break;
      case fields::nested::kStringValue:
        expect_wire_type(reader, field, wire::kWireLengthDelimited);
        scalar.clear();
        append_string_json(scalar, field.bytes);
        break;
      default:
        break;
    }
  }
  if (nested_type == fields::nested::kTypeDict) {
    out += '{';
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out += ',';
      append_string_json(out, i < keys.size() ? keys[i] : std::string_view());
      out += ':';
      append_nested_json(out, values[i], depth + 1);
    }
    out += '}';
  } else if (nested_type == fields::nested::kTypeArray) {
    out += '[';
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out += ',';
      append_nested_json(out, values[i], depth + 1);
    }
    out += ']';
  } else {
    out += scalar;
  }
}

}  // namespace opsight::io::perfetto_reading
