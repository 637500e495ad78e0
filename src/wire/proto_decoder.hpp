// A protocol-buffers wire-format reader for untrusted input (the Perfetto trace reader's):
// walks the fields of one message, in order, as views into the input, never copying and
// never allocating. Every varint is at most ten bytes, every length is checked against
// what is left of the enclosing message before anything is read, and a field of wire type
// 3, 4, 6 or 7 (groups, or no type at all) is refused: a malformed message throws
// ProtoDecodeError with the absolute byte offset (from the start of the file) of the field
// that is wrong, its number when it is known, and what is wrong, and nothing is read past
// the end of the bytes given.
//
// The encoder's counterpart (proto_encoder.hpp) says why this is by hand. The test-only
// walker (proto_decoder_for_tests.hpp) collects fields into a vector; this one is the
// reader's hot path: a field is decoded into a caller's ProtoField, one at a time.
//
// Thread-safety: none; a ProtoReader is a cursor over bytes that must outlive it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace opsight::wire {

// What a malformed message is: where (absolute byte offset of the field's key, or of the
// byte that is wrong when the key itself is), which field (0 when the key could not be
// read) and what is wrong, in words ("length 900 runs past the end of the message (12
// bytes left)"). The message type is named by whoever catches it.
struct ProtoDecodeError {
  uint64_t offset = 0;
  uint32_t field = 0;
  std::string problem;
  const char* message_type = "";
};

// One field as read: a varint, fixed64 or fixed32 in `value`, a length-delimited field's
// bytes in `bytes`; `offset` is where its key starts in the file.
struct ProtoField {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t value = 0;
  std::string_view bytes;
  uint64_t offset = 0;

  int64_t as_int64() const { return static_cast<int64_t>(value); }
  bool as_bool() const { return value != 0; }
  double as_double() const {
    double result;
    std::memcpy(&result, &value, sizeof result);
    return result;
  }
};

inline constexpr uint32_t kWireVarint = 0;
inline constexpr uint32_t kWireFixed64 = 1;
inline constexpr uint32_t kWireLengthDelimited = 2;
inline constexpr uint32_t kWireFixed32 = 5;

class ProtoReader {
 public:
  // `message`: the bytes of one message; `file_begin`: where the file starts, so that
  // offsets are the file's; `message_type`: a static name for errors ("TrackEvent").
  ProtoReader(std::string_view message, const char* file_begin, const char* message_type)
      : position_(message.data()),
        end_(message.data() + message.size()),
        file_begin_(file_begin),
        message_type_(message_type) {}

  // Reads the next field into `field`; false at the end of the message. Throws
  // ProtoDecodeError on malformed bytes. Inlined: every error is built out of line.
  [[gnu::always_inline]] bool next(ProtoField& field) {
    if (position_ == end_) return false;
    const char* key_at = position_;
    field.offset = offset_of(key_at);
    uint64_t key = read_varint(0, Problem::kKeyCutShort);
    if (key >> 32 != 0 || key < 8) [[unlikely]]
      bad_key(key_at, key);
    field.number = static_cast<uint32_t>(key >> 3);
    field.wire_type = static_cast<uint32_t>(key & 7);
    switch (field.wire_type) {
      case kWireVarint:
        field.value = read_varint(field.number, Problem::kVarintCutShort);
        return true;
      case kWireLengthDelimited: {
        uint64_t length = read_varint(field.number, Problem::kLengthCutShort);
        auto left = static_cast<uint64_t>(end_ - position_);
        if (length > left) [[unlikely]]
          length_past_end(key_at, field.number, length, left);
        field.bytes = std::string_view(position_, static_cast<size_t>(length));
        position_ += length;
        return true;
      }
      case kWireFixed64:
        field.value = read_fixed(field.number, 8);
        return true;
      case kWireFixed32:
        field.value = read_fixed(field.number, 4);
        return true;
      default:
        bad_wire_type(key_at, field.number, field.wire_type);
    }
  }

  // Where `pointer` (inside the input) is in the file.
  uint64_t offset_of(const char* pointer) const {
    return static_cast<uint64_t>(pointer - file_begin_);
  }
  // Throws ProtoDecodeError for `field` of this message (a wire type the field cannot have,
  // a value out of range): what the message's reader found wrong beyond the wire format.
  [[noreturn]] void fail_field(const ProtoField& field, std::string problem) const {
    throw ProtoDecodeError{field.offset, field.number, std::move(problem), message_type_};
  }

  // The values of a repeated scalar field, packed (one length-delimited field holding the
  // values back to back) or not (one field per value): calls visit(value) for each. Throws
  // ProtoDecodeError for a wire type the field cannot have or a packed run cut short.
  template <typename Visit>
  void for_each_repeated(const ProtoField& field, uint32_t wire_type, Visit&& visit) const {
    if (field.wire_type == wire_type) {
      visit(field.value);
      return;
    }
    if (field.wire_type != kWireLengthDelimited)
      fail_field(field, "wire type " + std::to_string(field.wire_type) + ", expected " +
                            std::to_string(wire_type) + " or 2 (packed)");
    const char* position = field.bytes.data();
    const char* end = position + field.bytes.size();
    while (position != end) {
      uint64_t value = 0;
      if (wire_type == kWireVarint) {
        for (int shift = 0;; shift += 7) {
          if (position == end || shift > 63)
            fail(position, field.number, "packed varint cut short or longer than 64 bits");
          auto byte = static_cast<unsigned char>(*position++);
          value |= uint64_t{byte & 0x7Fu} << shift;
          if ((byte & 0x80) == 0) break;
        }
      } else {
        size_t bytes = wire_type == kWireFixed64 ? 8 : 4;
        if (static_cast<size_t>(end - position) < bytes)
          fail(position, field.number, "packed values cut short");
        for (size_t i = 0; i < bytes; ++i)
          value |= uint64_t{static_cast<unsigned char>(position[i])} << (8 * i);
        position += bytes;
      }
      visit(value);
    }
  }

 private:
  enum class Problem { kKeyCutShort, kVarintCutShort, kLengthCutShort };

  [[noreturn, gnu::cold, gnu::noinline]] void fail(const char* at, uint32_t field,
                                                   std::string problem) const {
    throw ProtoDecodeError{offset_of(at), field, std::move(problem), message_type_};
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_key(const char* at, uint64_t key) const {
    fail(at, 0,
         (key >> 3) == 0 ? "field number 0 (not a valid field)"
                         : "field number " + std::to_string(key >> 3) + " is out of range");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void length_past_end(const char* at, uint32_t field,
                                                              uint64_t length,
                                                              uint64_t left) const {
    fail(at, field,
         "length " + std::to_string(length) + " runs past the end of the message (" +
             std::to_string(left) + " bytes left)");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_wire_type(const char* at, uint32_t field,
                                                            uint32_t wire_type) const {
    fail(at, field,
         "wire type " + std::to_string(wire_type) +
             (wire_type == 3 || wire_type == 4 ? " (a group: not used by these messages)"
                                               : " does not exist"));
  }

  // A varint: one byte inline, longer ones out of line.
  [[gnu::always_inline]] uint64_t read_varint(uint32_t field, Problem problem) {
    if (position_ != end_ && static_cast<unsigned char>(*position_) < 0x80) [[likely]]
      return static_cast<unsigned char>(*position_++);
    return read_long_varint(field, problem);
  }
  [[gnu::noinline]] uint64_t read_long_varint(uint32_t field, Problem problem) {
    const char* start = position_;
    uint64_t value = 0;
    if (end_ - position_ >= 10) {  // no end in reach: no bounds check per byte
      for (int shift = 0; shift < 63; shift += 7) {
        auto byte = static_cast<unsigned char>(*position_++);
        value |= uint64_t{byte & 0x7Fu} << shift;
        if ((byte & 0x80) == 0) return value;
      }
      auto last = static_cast<unsigned char>(*position_++);
      if (last > 1) [[unlikely]]
        fail(start, field, "varint longer than 64 bits");
      return value | (uint64_t{last} << 63);
    }
    for (int shift = 0; shift < 70; shift += 7) {
      if (position_ == end_) [[unlikely]]
        fail(start, field,
             problem == Problem::kKeyCutShort      ? "the field's key is cut short"
             : problem == Problem::kVarintCutShort ? "varint cut short by the end of the message"
                                                   : "length cut short by the end of the message");
      auto byte = static_cast<unsigned char>(*position_++);
      // The tenth byte holds bit 63 only; anything more is not a 64-bit varint.
      if (shift == 63 && byte > 1) [[unlikely]]
        fail(start, field, "varint longer than 64 bits");
      value |= uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail(start, field, "varint longer than 64 bits");
  }

  [[gnu::always_inline]] uint64_t read_fixed(uint32_t field, size_t bytes) {
    if (static_cast<size_t>(end_ - position_) < bytes) [[unlikely]]
      fixed_cut_short(field, bytes);
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i)
      value |= uint64_t{static_cast<unsigned char>(position_[i])} << (8 * i);
    position_ += bytes;
    return value;
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fixed_cut_short(uint32_t field, size_t bytes) const {
    fail(position_, field,
         std::string(bytes == 8 ? "fixed64" : "fixed32") + " cut short by the end of the " +
             "message (" + std::to_string(end_ - position_) + " bytes left)");
  }

  const char* position_;
  const char* end_;
  const char* file_begin_;
  const char* message_type_;
};

}  // namespace opsight::wire
