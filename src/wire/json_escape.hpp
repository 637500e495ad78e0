// JSON string escaping shared by the writers that emit JSON by hand (Chrome JSON, OTLP/JSON,
// Zipkin, Loki): fmt and a growing buffer are several times faster than a DOM library.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace opsight::wire {

// Appends `text` as the inside of a JSON string: quotes, backslashes and control
// characters escaped, valid UTF-8 kept, every byte of an invalid UTF-8 sequence replaced
// by U+FFFD (written as UTF-8, so that writing what was read back gives the same bytes).
inline void append_json_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t pos = 0;
  while (pos < size) {
    unsigned char c = bytes[pos];
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      size_t run_end = pos + 1;
      while (run_end < size && bytes[run_end] >= 0x20 && bytes[run_end] < 0x80 &&
             bytes[run_end] != '"' && bytes[run_end] != '\\')
        ++run_end;
      out.append(text.data() + pos, run_end - pos);
      pos = run_end;
      continue;
    }
    if (c < 0x80) {
      out.push_back('\\');
      switch (c) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\n':
          out.push_back('n');
          break;
        case '\r':
          out.push_back('r');
          break;
        case '\t':
          out.push_back('t');
          break;
        case '\b':
          out.push_back('b');
          break;
        case '\f':
          out.push_back('f');
          break;
        default:
          out.append("u00");
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xF]);
          break;
      }
      ++pos;
      continue;
    }
    // A multi-byte UTF-8 sequence: lead byte, then continuation bytes in the ranges the
    // Unicode standard allows (no overlong forms, no surrogates, nothing above U+10FFFF).
    size_t length = 0;
    unsigned char second_low = 0x80;
    unsigned char second_high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) second_low = 0xA0;
      if (c == 0xED) second_high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) second_low = 0x90;
      if (c == 0xF4) second_high = 0x8F;
    }
    bool valid = length != 0 && pos + length <= size && bytes[pos + 1] >= second_low &&
                 bytes[pos + 1] <= second_high;
    for (size_t i = 2; valid && i < length; ++i)
      valid = bytes[pos + i] >= 0x80 && bytes[pos + i] <= 0xBF;
    if (valid) {
      out.append(text.data() + pos, length);
      pos += length;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
      ++pos;
    }
  }
}

// `text` as a whole JSON string, quotes included.
inline void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  append_json_escaped(out, text);
  out.push_back('"');
}

}  // namespace opsight::wire
