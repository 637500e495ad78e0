// The Chrome JSON reader's byte-level half: scanning raw JSON text without parsing it, to
// close an input that was cut short (find_repair_point), to find where the n-th event
// starts (find_event_offset) and to locate the first syntax error (describe_invalid_json,
// through nlohmann-json's SAX parser, since simdjson reports no offsets). Used only when
// simdjson's fast parse fails or to place a diagnostic, so none of it is on the hot path.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/io.hpp"

namespace opsight::io::chrome_json {

inline constexpr size_t kMaxNestingDepth = simdjson::DEFAULT_MAX_DEPTH;

// How to close an input that ends before its top-level value does.
struct RepairPoint {
  bool input_is_cut = false;     // the top-level value never ended
  size_t keep_bytes = 0;         // bytes up to (and including) the last complete value
  std::string closing_brackets;  // what closes the containers still open there
  // First byte after keep_bytes that is neither whitespace nor a comma: the start of a
  // value that was cut mid-way. npos when only whitespace and commas follow.
  size_t cut_value_offset = std::string_view::npos;
  // First byte where the nesting goes deeper than simdjson allows, npos if it never does.
  size_t too_deep_offset = std::string_view::npos;
};

size_t skip_whitespace(std::string_view text, size_t pos);
// Byte offset of the event array: the document itself for the array form, the value of
// "traceEvents" (whatever it is) for the object form.
std::optional<size_t> find_event_array(std::string_view text);
// Byte offset where element `index` of the event array starts.
std::optional<size_t> find_event_offset(std::string_view text, size_t index);
RepairPoint find_repair_point(std::string_view text);

// The elements of the JSON array whose '[' is at `array_start`, cut into windows of whole
// elements of about `window_bytes` each (the text between the brackets, commas between
// windows excluded), and the position just after its ']'. nullopt if the array never
// closes. Follows strings and brackets only; it does not validate. Scans 64 bytes at a time
// with AVX2 where the CPU has it.
struct ArrayWindows {
  std::vector<std::pair<size_t, size_t>> windows;  // [begin, end) byte ranges
  size_t array_end = 0;
};
std::optional<ArrayWindows> split_array_elements(std::string_view text, size_t array_start,
                                                 size_t window_bytes);
// The same, one byte at a time (what split_array_elements does where AVX2 is missing; the
// tests compare the two).
std::optional<ArrayWindows> split_array_elements_portable(std::string_view text, size_t array_start,
                                                          size_t window_bytes);
// What sloppy writers leave that JSON forbids but whose meaning is plain: a comma before a
// closing ']' or '}', and control characters written raw inside a string. Returns a copy
// with those mended (the commas dropped, the characters escaped as \u00XX), and in
// `mended` how many were, or nullopt when there is none (the input is then left to the
// other repairs and to the error report). `edits` (if given) receives what maps a byte
// offset in the copy back to the input (MendedOffsets::original).
struct MendedOffsets {
  // After copy offset `first` (inclusive), original = copy + `shift`; sorted by `first`.
  std::vector<std::pair<size_t, int64_t>> shifts;
  size_t original(size_t copy_offset) const;
};
std::optional<std::string> mend_sloppy_json(std::string_view text, size_t* mended,
                                            MendedOffsets* edits = nullptr);

// A one-line description of why `text` is not JSON, with the byte offset (plus
// offset_base) of the first problem. `scan` (may be null): find_repair_point(text), when
// the caller has it already.
Diagnostic describe_invalid_json(std::string_view text, simdjson::error_code simdjson_error,
                                 size_t offset_base, const RepairPoint* scan = nullptr);

}  // namespace opsight::io::chrome_json
