// The timeline's search: which slices of a trace match a text, how many there are (exact,
// however few are returned), and the matches from any position on in time order, so that a
// viewer can say "match k of N" and step to any k.
//
// The text's form (case-insensitive throughout; surrounding spaces ignored):
//   TEXT            a slice whose name, or the value of any of its args, contains TEXT
//   name:TEXT       a slice whose name contains TEXT
//   arg:TEXT        a slice with an arg whose value contains TEXT
//   arg:KEY=TEXT    a slice whose arg KEY (the whole key) has a value that matches TEXT;
//                   arg:KEY= a slice that has the arg KEY, whatever its value
//   trace:ID        every slice of the trace ID (32 hex digits; trace::TraceMembership:
//                   a root's own trace, or the one it or an ancestor joined or began)
// A string value matches when it contains TEXT; a number when TEXT is that number (4242,
// 0.5, 1e-7: equal, not a part of its digits), a bool when TEXT is true or false. (Equality
// keeps numbers from being formatted: a substring test of every number made a search of
// 10M slices with 16M args take 250-380 ms; see docs/performance.md.)
//
// Cost: one pass over the string table (which strings contain the text) and one over the
// slices (a name is one table lookup; args are read only when the query looks at them, a
// string value one table lookup, a number one comparison); then, per track,
// the matches are already in time order (a finalized trace orders each track's rows by
// ts), so the page [offset, offset + limit) is found by a binary search on time across the
// tracks and a merge of `limit` items, never by sorting all the matches.
//
// Thread-safety: free functions over a const trace; any number may run at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::server {

struct SliceSearchQuery {
  enum class Field : uint8_t { kNameOrArg, kName, kArg, kTrace };
  Field field = Field::kNameOrArg;
  std::string text;         // lowercased; may be empty only with a key
  std::string key;          // lowercased; used when has_key
  bool has_key = false;     // arg:KEY=TEXT
  trace::TraceId trace_id;  // kTrace
};

// Parses a search text; on a malformed one returns nullopt and says why in `error`.
std::optional<SliceSearchQuery> parse_slice_search(std::string_view text, std::string& error);

struct SliceSearchResult {
  uint64_t total = 0;                 // every match in the trace
  std::vector<trace::RowIndex> rows;  // matches [offset, offset + limit) by (ts, row)
};

SliceSearchResult search_slices(const trace::Trace& trace, const SliceSearchQuery& query,
                                uint64_t offset, size_t limit);

// Whether `text` contains `lowercase_needle`, ignoring the case of ASCII letters.
bool contains_ignoring_case(std::string_view text, std::string_view lowercase_needle);

}  // namespace opsight::server
