// A minimal protocol-buffers encoder: varint, fixed64, fixed32, double, length-delimited
// bytes and nested messages, appended to one std::string.
//
// Why by hand and not libprotobuf: the Perfetto writer and the OTLP exporter each need a
// few dozen fields of a dozen messages, all of them scalars, strings or nested messages.
// Writing them takes a hundred lines and needs no generated code, no protoc at build time
// and no runtime library (the core depends on nothing it does not use). The wire format is
// a published fact: every field is a key (field number << 3 | wire type) followed by a
// varint (type 0), eight little-endian bytes (type 1), a varint length and that many bytes
// (type 2) or four little-endian bytes (type 5).
//
// Nested messages are written in place: begin_message() leaves one byte for the length,
// end_message() fills it, and moves the body one or more bytes right in the rare case it
// is 128 bytes or longer (so every length is the shortest varint, as protoc writes it).
//
// Thread-safety: none; one encoder per output.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace opsight::wire {

class ProtoEncoder {
 public:
  explicit ProtoEncoder(std::string& out) : out_(out) {}

  void varint_field(uint32_t field, uint64_t value) {
    key(field, kWireVarint);
    varint(value);
  }
  // int32/int64 fields: a negative value is its 64-bit two's complement (ten bytes).
  void int_field(uint32_t field, int64_t value) {
    varint_field(field, static_cast<uint64_t>(value));
  }
  void bool_field(uint32_t field, bool value) { varint_field(field, value ? 1 : 0); }
  void fixed64_field(uint32_t field, uint64_t value) {
    key(field, kWireFixed64);
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(value >> (8 * i));
    out_.append(bytes, 8);
  }
  void fixed32_field(uint32_t field, uint32_t value) {
    key(field, kWireFixed32);
    char bytes[4];
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>(value >> (8 * i));
    out_.append(bytes, 4);
  }
  void double_field(uint32_t field, double value) {
    fixed64_field(field, std::bit_cast<uint64_t>(value));
  }
  void bytes_field(uint32_t field, std::string_view bytes) {
    key(field, kWireLengthDelimited);
    varint(bytes.size());
    out_.append(bytes.data(), bytes.size());
  }

  // Starts a nested message in `field`; returns where its body starts, for end_message.
  size_t begin_message(uint32_t field) {
    key(field, kWireLengthDelimited);
    out_.push_back('\0');
    return out_.size();
  }
  void end_message(size_t body_start) {
    uint64_t length = out_.size() - body_start;
    if (length < 0x80) {
      out_[body_start - 1] = static_cast<char>(length);
      return;
    }
    char prefix[10];
    size_t prefix_size = encode_varint(length, prefix);
    out_.insert(body_start, prefix_size - 1, '\0');
    std::memcpy(out_.data() + body_start - 1, prefix, prefix_size);
  }

  static constexpr uint32_t kWireVarint = 0;
  static constexpr uint32_t kWireFixed64 = 1;
  static constexpr uint32_t kWireLengthDelimited = 2;
  static constexpr uint32_t kWireFixed32 = 5;

 private:
  static size_t encode_varint(uint64_t value, char* bytes) {
    size_t size = 0;
    while (value >= 0x80) {
      bytes[size++] = static_cast<char>((value & 0x7F) | 0x80);
      value >>= 7;
    }
    bytes[size++] = static_cast<char>(value);
    return size;
  }
  void varint(uint64_t value) {
    if (value < 0x80) {
      out_.push_back(static_cast<char>(value));
      return;
    }
    char bytes[10];
    out_.append(bytes, encode_varint(value, bytes));
  }
  void key(uint32_t field, uint32_t wire_type) { varint((uint64_t{field} << 3) | wire_type); }

  std::string& out_;
};

}  // namespace opsight::wire
