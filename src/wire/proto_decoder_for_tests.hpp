// Test-only: a protocol-buffers field walker, the reader the Perfetto writer's tests decode
// its output with. It knows the wire format only (varint, fixed64, length-delimited,
// fixed32), not Perfetto's messages: the tests say which field is what, from
// perfetto_fields.hpp, and python/tests/test_perfetto_output.py checks the same bytes
// against Perfetto's own descriptors.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opsight::wire::testing {

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t value = 0;      // varint, fixed64 or fixed32
  std::string_view bytes;  // length-delimited

  double as_double() const {
    double result;
    std::memcpy(&result, &value, sizeof result);
    return result;
  }
  int64_t as_int() const { return static_cast<int64_t>(value); }
};

// The fields of one message in order, or nullopt (and *error: what and at which byte)
// when the bytes are not a well-formed message.
inline std::optional<std::vector<ProtoField>> decode_message(std::string_view bytes,
                                                             std::string* error = nullptr) {
  std::vector<ProtoField> fields;
  size_t pos = 0;
  auto fail = [&](const char* what) -> std::optional<std::vector<ProtoField>> {
    if (error) *error = std::string(what) + " at byte " + std::to_string(pos);
    return std::nullopt;
  };
  auto read_varint = [&](uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= bytes.size()) return false;
      auto byte = static_cast<unsigned char>(bytes[pos++]);
      *value |= uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  while (pos < bytes.size()) {
    uint64_t key = 0;
    if (!read_varint(&key)) return fail("bad key");
    ProtoField field;
    field.number = static_cast<uint32_t>(key >> 3);
    field.wire_type = static_cast<uint32_t>(key & 7);
    if (field.number == 0) return fail("field number 0");
    switch (field.wire_type) {
      case 0:
        if (!read_varint(&field.value)) return fail("bad varint");
        break;
      case 1:
        if (bytes.size() - pos < 8) return fail("short fixed64");
        std::memcpy(&field.value, bytes.data() + pos, 8);
        pos += 8;
        break;
      case 2: {
        uint64_t length = 0;
        if (!read_varint(&length)) return fail("bad length");
        if (length > bytes.size() - pos) return fail("length past the end");
        field.bytes = bytes.substr(pos, length);
        pos += length;
        break;
      }
      case 5: {
        if (bytes.size() - pos < 4) return fail("short fixed32");
        uint32_t value = 0;
        std::memcpy(&value, bytes.data() + pos, 4);
        field.value = value;
        pos += 4;
        break;
      }
      default:
        return fail("unknown wire type");
    }
    fields.push_back(field);
  }
  return fields;
}

// The first field numbered `number`, or nullptr.
inline const ProtoField* find_field(const std::vector<ProtoField>& fields, uint32_t number) {
  for (const auto& field : fields)
    if (field.number == number) return &field;
  return nullptr;
}

inline std::vector<const ProtoField*> find_fields(const std::vector<ProtoField>& fields,
                                                  uint32_t number) {
  std::vector<const ProtoField*> found;
  for (const auto& field : fields)
    if (field.number == number) found.push_back(&field);
  return found;
}

}  // namespace opsight::wire::testing
