// Value conversions of the Chrome JSON reader: JSON numbers to nanoseconds, hex span ids,
// and arguments to compact JSON text, from simdjson DOM elements. The per-event ones are
// inline (the reader calls them for every event and field); the per-argument text
// builders are out of line in chrome_json_values.cc.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opsight::io::chrome_json {

using simdjson::dom::element;
using simdjson::dom::element_type;

// A number written as a string ("12.5", "+3", ".75", "246."), as some writers do for
// timestamps and counter values: the whole text must be the number. nullopt otherwise.
std::optional<double> number_in_text(std::string_view text);

// Microseconds (a double) to nanoseconds. A decimal with at most three fractional digits
// is recovered exactly (not just llround(us * 1000), which can be 1 ns off once the double
// has fewer than ~1e-3 us of precision left, i.e. beyond ~2^42 us).
inline bool double_microseconds_to_ns(double micros, int64_t* out) {
  if (!(std::fabs(micros) < 9.2e15)) return false;  // also rejects NaN
  int64_t nanos = std::llround(micros * 1000.0);
  if (std::fabs(micros) < 9.0e12 && static_cast<double>(nanos) / 1000.0 != micros) {
    if (static_cast<double>(nanos - 1) / 1000.0 == micros) {
      nanos -= 1;
    } else if (static_cast<double>(nanos + 1) / 1000.0 == micros) {
      nanos += 1;
    }
  }
  *out = nanos;
  return true;
}

// Microseconds (a JSON number, or a number written as a string) to nanoseconds.
inline bool microseconds_to_ns(element value, int64_t* out) {
  switch (value.type()) {
    case element_type::INT64: {
      int64_t micros = 0;
      if (value.get(micros) != simdjson::SUCCESS) return false;
      return !__builtin_mul_overflow(micros, int64_t{1000}, out);
    }
    case element_type::DOUBLE: {
      double micros = 0;
      if (value.get(micros) != simdjson::SUCCESS) return false;
      return double_microseconds_to_ns(micros, out);
    }
    case element_type::STRING: {
      std::optional<double> micros = number_in_text(value.get_string().value_unsafe());
      return micros && double_microseconds_to_ns(*micros, out);
    }
    default:
      return false;  // uint64 (beyond int64 us is beyond int64 ns), ...
  }
}

inline std::optional<double> numeric_value(element value) {
  switch (value.type()) {
    case element_type::INT64:
      return static_cast<double>(value.get_int64().value_unsafe());
    case element_type::UINT64:
      return static_cast<double>(value.get_uint64().value_unsafe());
    case element_type::DOUBLE:
      return value.get_double().value_unsafe();
    case element_type::BOOL:
      return value.get_bool().value_unsafe() ? 1.0 : 0.0;
    case element_type::STRING:
      return number_in_text(value.get_string().value_unsafe());
    default:
      return std::nullopt;
  }
}

// Value of each hex digit, -1 for any other byte.
inline constexpr std::array<int8_t, 256> kHexDigitValues = [] {
  std::array<int8_t, 256> values{};
  values.fill(-1);
  for (int digit = 0; digit < 10; ++digit) values['0' + digit] = static_cast<int8_t>(digit);
  for (int digit = 0; digit < 6; ++digit) {
    values['a' + digit] = static_cast<int8_t>(10 + digit);
    values['A' + digit] = static_cast<int8_t>(10 + digit);
  }
  return values;
}();

// The value of 8 hex digits held in `chars` (the first digit in the lowest byte), checked
// and converted 8 bytes at a time (SWAR); nullopt if any byte is not a hex digit.
inline std::optional<uint32_t> parse_hex8(uint64_t chars) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighBits = 0x8080808080808080ULL;
  if ((chars & kHighBits) != 0) return std::nullopt;  // bytes >= 0x80 break the tricks below
  // High bit of each byte set where low <= byte <= high (every byte below 0x80, so the
  // additions never carry into the next byte).
  auto in_range = [](uint64_t bytes, uint64_t low, uint64_t high) {
    uint64_t at_least_low = bytes + (0x80 - low) * kOnes;
    uint64_t above_high = bytes + (0x7F - high) * kOnes;
    return at_least_low & ~above_high & kHighBits;
  };
  uint64_t digits = in_range(chars, '0', '9');
  uint64_t letters = in_range(chars | (0x20 * kOnes), 'a', 'f');  // 'A'-'F' folded to 'a'-'f'
  if ((digits | letters) != kHighBits) return std::nullopt;
  uint64_t nibbles = (chars & (0x0F * kOnes)) + (letters >> 7) * 9;  // '0'->0, 'a'->10
  // Gather the nibbles, first digit most significant: pairs, then quads, then all eight.
  nibbles = ((nibbles & 0x000F000F000F000FULL) << 4) | ((nibbles & 0x0F000F000F000F00ULL) >> 8);
  nibbles = ((nibbles & 0x000000FF000000FFULL) << 8) | ((nibbles & 0x00FF000000FF0000ULL) >> 16);
  nibbles = ((nibbles & 0x000000000000FFFFULL) << 16) | ((nibbles & 0x0000FFFF00000000ULL) >> 32);
  return static_cast<uint32_t>(nibbles);
}

// Span ids are 16 hex digits on every event of opsight's files: those are converted 8 at a
// time; other lengths a table lookup per digit, with one check of the sign bits at the end.
inline std::optional<uint64_t> parse_hex64(std::string_view text) {
  if (text.size() == 16) {
    uint64_t high_chars = 0;
    uint64_t low_chars = 0;
    std::memcpy(&high_chars, text.data(), 8);
    std::memcpy(&low_chars, text.data() + 8, 8);
    if constexpr (std::endian::native == std::endian::little) {
      auto high = parse_hex8(high_chars);
      auto low = parse_hex8(low_chars);
      if (!high || !low) return std::nullopt;
      return (static_cast<uint64_t>(*high) << 32) | *low;
    }
  }
  if (text.empty() || text.size() > 16) return std::nullopt;
  uint64_t value = 0;
  int8_t invalid = 0;
  for (char c : text) {
    int8_t digit = kHexDigitValues[static_cast<uint8_t>(c)];
    invalid = static_cast<int8_t>(invalid | digit);
    value = (value << 4) | static_cast<uint64_t>(digit & 0xF);
  }
  if (invalid < 0) return std::nullopt;
  return value;
}

// Whether two strings are equal, compared 8 bytes at a time with loads that stay inside
// both (the last 8 bytes overlap the previous chunk): most names and keys are short, and
// this is cheaper than a call of memcmp.
inline bool same_text(std::string_view a, std::string_view b) {
  const size_t size = a.size();
  if (size != b.size()) return false;
  auto load64 = [](const char* at) {
    uint64_t word;
    std::memcpy(&word, at, 8);
    return word;
  };
  auto load32 = [](const char* at) {
    uint32_t word;
    std::memcpy(&word, at, 4);
    return word;
  };
  if (size >= 8) {
    for (size_t offset = 0; offset + 8 < size; offset += 8)
      if (load64(a.data() + offset) != load64(b.data() + offset)) return false;
    return load64(a.data() + size - 8) == load64(b.data() + size - 8);
  }
  if (size >= 4)
    return load32(a.data()) == load32(b.data()) &&
           load32(a.data() + size - 4) == load32(b.data() + size - 4);
  for (size_t offset = 0; offset < size; ++offset)
    if (a[offset] != b[offset]) return false;
  return true;
}

// An open-addressing index of strings by their hash, for tables that number their
// strings densely from 1 (0 marks a free slot): the table keeps the texts, and the index
// asks it for one (`text_of(id)`) only to tell apart strings of the same hash. Used by the
// window-local strings of the decoders and by the reader's cache in front of the trace's
// string table.
//
// The slots are allocated by the first find_or_add, not by the constructor: a read makes
// five indexes or more (one per window in flight, one for the trace's strings) and a small
// input uses one or two; in the fuzz build (then -O1), allocating and zeroing them all made
// reading "[]" take 89 us instead of 11.
class StringIdIndex {
 public:
  explicit StringIdIndex(size_t initial_slots) : initial_slots_(initial_slots) {}

  // The id of `text` (whose hash is `hash`), or, for a string not seen yet, the id that
  // `add()` gives it.
  template <typename TextOf, typename Add>
  uint32_t find_or_add(std::string_view text, uint64_t hash, TextOf text_of, Add add) {
    if (slots_.empty()) slots_.assign(initial_slots_, Slot{});
    size_t mask = slots_.size() - 1;
    for (size_t index = hash & mask;; index = (index + 1) & mask) {
      Slot& slot = slots_[index];
      if (slot.id == 0) {
        uint32_t id = add();
        slot.hash = hash;
        slot.id = id;
        if (++used_ * 2 > slots_.size()) grow();
        return id;
      }
      if (slot.hash == hash && same_text(text_of(slot.id), text)) return slot.id;
    }
  }

  void clear() {
    if (used_ == 0) return;  // not allocated yet, or every slot still free
    if (slots_.size() == initial_slots_) {
      std::fill(slots_.begin(), slots_.end(), Slot{});
    } else {
      slots_.assign(initial_slots_, Slot{});
    }
    used_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t id = 0;  // 0: free
  };

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.id == 0) continue;
      size_t index = slot.hash & mask;
      while (slots_[index].id != 0) index = (index + 1) & mask;
      slots_[index] = slot;
    }
  }

  size_t initial_slots_;
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// Whether `text` is `literal`: a comparison of known length, which compiles to a few
// loads and compares instead of a call of memcmp.
template <size_t N>
bool equals_literal(std::string_view text, const char (&literal)[N]) {
  return text.size() == N - 1 && std::memcmp(text.data(), literal, N - 1) == 0;
}

// A growable byte buffer for compact JSON text, reused across values: appending a byte is
// a capacity check and a store (std::string also writes a terminator every time).
class TextBuffer {
 public:
  void clear() { size_ = 0; }
  std::string_view view() const { return {bytes_.get(), size_}; }
  void put(char c) {
    if (size_ == capacity_) grow(size_ + 1);
    bytes_[size_++] = c;
  }
  void put(std::string_view text) {
    if (size_ + text.size() > capacity_) grow(size_ + text.size());
    if (!text.empty()) std::memcpy(bytes_.get() + size_, text.data(), text.size());
    size_ += text.size();
  }

 private:
  void grow(size_t needed) {
    size_t capacity = std::max<size_t>({needed, capacity_ * 2, 256});
    auto bytes = std::make_unique<char[]>(capacity);
    if (size_ > 0) std::memcpy(bytes.get(), bytes_.get(), size_);
    bytes_ = std::move(bytes);
    capacity_ = capacity;
  }

  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The object behind an element of type OBJECT (a copy, so it outlives the temporary
// simdjson_result that get_object() returns).
inline simdjson::dom::object object_of(element value) {
  simdjson::dom::object object;
  if (value.get(object) != simdjson::SUCCESS) return {};
  return object;
}

inline bool is_scalar(element value) {
  return value.type() != element_type::ARRAY && value.type() != element_type::OBJECT;
}

std::string scalar_to_string(element value);

// A string as JSON, when it needs no escaping: printable ASCII without quotes or
// backslashes. Returns false for anything else.
bool append_plain_json_string(std::string_view text, TextBuffer& out);

// Appends `value` as compact JSON, byte for byte what simdjson::minify writes, into a
// buffer the caller reuses: PyTorch puts nested arrays ("Input Dims", "Input Strides") in
// the args of every operator, and minify's own string builder (a byte at a time, a fresh
// allocation per value) was a quarter of the reader's time on such files. Handles
// integers, booleans, null, strings that need no escaping, and arrays and objects of
// those; returns false (with `out` partly written) at anything else (doubles, whose
// shortest form is simdjson's to choose, and strings to escape): the caller then asks
// simdjson::minify.
bool append_compact_json(element value, TextBuffer& out);

}  // namespace opsight::io::chrome_json
