// Numbers as the hand-written JSON writers put them (the Chrome JSON writer and the streaming
// native-to-JSON converter), on any growing buffer with push_back, size, data and
// append(first, last) (std::string, fmt::memory_buffer). No format string is parsed for the
// integers and times, which a writer puts several of in every event.
//
// Thread-safety: pure functions.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace opsight::wire {

template <typename Buffer>
void append_json_text(Buffer& out, std::string_view text) {
  out.append(text.data(), text.data() + text.size());
}

template <typename Buffer>
void append_json_integer(Buffer& out, int64_t value) {
  fmt::format_int digits(value);
  out.append(digits.data(), digits.data() + digits.size());
}

template <typename Buffer>
void append_json_unsigned(Buffer& out, uint64_t value) {
  fmt::format_int digits(value);
  out.append(digits.data(), digits.data() + digits.size());
}

// Nanoseconds as microseconds with exactly three decimals ("-12.345").
template <typename Buffer>
void append_json_micros(Buffer& out, int64_t nanos) {
  const uint64_t magnitude =
      nanos < 0 ? 0 - static_cast<uint64_t>(nanos) : static_cast<uint64_t>(nanos);
  if (nanos < 0) out.push_back('-');
  append_json_unsigned(out, magnitude / 1000);
  const auto fraction = static_cast<unsigned>(magnitude % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + fraction / 100),
                          static_cast<char>('0' + fraction / 10 % 10),
                          static_cast<char>('0' + fraction % 10)};
  out.append(digits, digits + 4);
}

// The shortest round-trip form, always with a '.' or an exponent so that it reads back as a
// double; JSON has no NaN or infinity, so those become the strings "NaN", "Infinity" and
// "-Infinity".
template <typename Buffer>
void append_json_double(Buffer& out, double value) {
  if (std::isnan(value)) return append_json_text(out, "\"NaN\"");
  if (std::isinf(value)) return append_json_text(out, value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  const size_t start = out.size();
  fmt::format_to(std::back_inserter(out), "{}", value);
  std::string_view written(out.data() + start, out.size() - start);
  if (written.find_first_of(".e") == std::string_view::npos) append_json_text(out, ".0");
}

// A 64-bit id as a quoted string of 16 lowercase hex digits.
template <typename Buffer>
void append_json_quoted_hex64(Buffer& out, uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  char digits[18];
  digits[0] = '"';
  for (int i = 0; i < 16; ++i) digits[1 + i] = kHex[(value >> (60 - 4 * i)) & 0xF];
  digits[17] = '"';
  out.append(digits, digits + 18);
}

}  // namespace opsight::wire
