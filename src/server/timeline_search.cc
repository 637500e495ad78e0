#include "server/timeline_search.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <queue>

#include "server/ascii_text.hpp"
#include "trace/trace_membership.hpp"

namespace opsight::server {
namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

bool starts_with_ignoring_case(std::string_view text, std::string_view lowercase_prefix) {
  if (text.size() < lowercase_prefix.size()) return false;
  for (size_t i = 0; i < lowercase_prefix.size(); ++i)
    if (ascii_lower(text[i]) != lowercase_prefix[i]) return false;
  return true;
}

// The needle as a number, when the whole of it is one (what numeric args are compared to).
std::optional<double> number_of(std::string_view needle) {
  double value = 0;
  auto [end, error] = std::from_chars(needle.data(), needle.data() + needle.size(), value);
  if (needle.empty() || error != std::errc() || end != needle.data() + needle.size())
    return std::nullopt;
  return value;
}

std::optional<int64_t> integer_of(std::string_view needle) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(needle.data(), needle.data() + needle.size(), value);
  if (needle.empty() || error != std::errc() || end != needle.data() + needle.size())
    return std::nullopt;
  return value;
}

// Per string id: whether the string contains the needle (or, for keys, equals it).
std::vector<uint8_t> strings_containing(const trace::StringTable& strings,
                                        std::string_view needle) {
  std::vector<uint8_t> matches(strings.size(), 0);
  for (trace::StringId id = 0; id < strings.size(); ++id)
    matches[id] = contains_ignoring_case(strings.get(id), needle) ? 1 : 0;
  return matches;
}

std::vector<uint8_t> strings_equal(const trace::StringTable& strings, std::string_view needle) {
  std::vector<uint8_t> matches(strings.size(), 0);
  for (trace::StringId id = 0; id < strings.size(); ++id) {
    std::string_view text = strings.get(id);
    matches[id] = text.size() == needle.size() && starts_with_ignoring_case(text, needle) ? 1 : 0;
  }
  return matches;
}

// A W3C trace id: exactly 32 hex digits (either case).
bool timeline_search_parse_trace_id(std::string_view text, trace::TraceId& id) {
  if (text.size() != 32) return false;
  uint64_t halves[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    char c = ascii_lower(text[i]);
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    halves[i / 16] = halves[i / 16] << 4 | static_cast<uint64_t>(digit);
  }
  id = trace::TraceId{halves[0], halves[1]};
  return true;
}

class SliceMatcher {
 public:
  SliceMatcher(const trace::Trace& trace, const SliceSearchQuery& query)
      : trace_(trace), query_(query) {
    if (query.field == SliceSearchQuery::Field::kTrace) {
      // One pass over the rows; then a row is one lookup of its trace's index.
      membership_.emplace(trace);
      trace_indexes_.assign(membership_->trace_index_count(), 0);
      for (uint32_t index = 0; index < trace_indexes_.size(); ++index)
        trace_indexes_[index] = membership_->trace_id_at(index) == query.trace_id ? 1 : 0;
      return;
    }
    if (!query.text.empty()) text_ids_ = strings_containing(trace.strings, query.text);
    if (query.has_key) key_ids_ = strings_equal(trace.strings, query.key);
    integer_ = integer_of(query.text);
    number_ = number_of(query.text);
    true_matches_ = query.text == "true";
    false_matches_ = query.text == "false";
    look_at_names_ = query.field != SliceSearchQuery::Field::kArg;
    look_at_args_ = query.field != SliceSearchQuery::Field::kName && trace.slice_args.size() > 0 &&
                    trace.slices.args_begin.size() == trace.slices.size() + 1;
  }

  bool matches(trace::RowIndex row) const {
    if (membership_) return trace_indexes_[membership_->trace_index(row)] != 0;
    if (look_at_names_ && text_ids_[trace_.slices.name[row]]) return true;
    if (!look_at_args_) return false;
    const auto& args = trace_.slice_args;
    for (trace::RowIndex arg = trace_.slices.args_begin[row];
         arg < trace_.slices.args_begin[row + 1]; ++arg) {
      if (query_.has_key && !key_ids_[args.key[arg]]) continue;
      if (query_.text.empty() || value_matches(args.value[arg])) return true;
    }
    return false;
  }

 private:
  bool value_matches(const trace::ArgValue& value) const {
    switch (value.type) {
      case trace::ArgType::kString:
        return text_ids_[value.string_value] != 0;
      case trace::ArgType::kBool:
        return value.int_value != 0 ? true_matches_ : false_matches_;
      case trace::ArgType::kInt:
        return integer_ ? value.int_value == *integer_
                        : number_ && static_cast<double>(value.int_value) == *number_;
      case trace::ArgType::kDouble:
        return number_ && value.double_value == *number_;
    }
    return false;
  }

  const trace::Trace& trace_;
  const SliceSearchQuery& query_;
  std::vector<uint8_t> text_ids_;
  std::vector<uint8_t> key_ids_;
  std::optional<int64_t> integer_;
  std::optional<double> number_;
  bool true_matches_ = false, false_matches_ = false;
  bool look_at_names_ = true, look_at_args_ = true;
  std::optional<trace::TraceMembership> membership_;  // trace:ID
  std::vector<uint8_t> trace_indexes_;                // per trace index: it is trace ID
};

// How many of the sorted per-track lists come before global position `offset` of the
// (ts, row) order: a binary search on time for the first ts at which more than `offset`
// matches have begun, then the ties at that ts taken by row.
std::vector<size_t> cuts_at(const trace::Trace& trace,
                            const std::vector<std::vector<trace::RowIndex>>& lists,
                            uint64_t offset) {
  std::vector<size_t> cuts(lists.size(), 0);
  if (offset == 0) return cuts;
  const auto& ts = trace.slices.ts;
  auto begun_by = [&](int64_t time) {  // matches with ts <= time
    uint64_t count = 0;
    for (const auto& list : lists)
      count += static_cast<uint64_t>(
          std::upper_bound(list.begin(), list.end(), time,
                           [&](int64_t value, trace::RowIndex row) { return value < ts[row]; }) -
          list.begin());
    return count;
  };
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const auto& list : lists)
    if (!list.empty()) {
      first = std::min(first, ts[list.front()]);
      last = std::max(last, ts[list.back()]);
    }
  // Invariant: begun_by(low) <= offset < begun_by(high).
  int64_t low = first - 1, high = last;
  while (static_cast<uint64_t>(high) - static_cast<uint64_t>(low) > 1) {
    int64_t middle =
        low + static_cast<int64_t>((static_cast<uint64_t>(high) - static_cast<uint64_t>(low)) / 2);
    if (begun_by(middle) > offset)
      high = middle;
    else
      low = middle;
  }
  // Everything before `high` comes first; of the matches at `high`, the lowest rows.
  uint64_t before = 0;
  std::vector<std::pair<trace::RowIndex, size_t>> ties;  // (row, list)
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& list = lists[i];
    auto from =
        std::lower_bound(list.begin(), list.end(), high,
                         [&](trace::RowIndex row, int64_t value) { return ts[row] < value; });
    auto to = std::upper_bound(from, list.end(), high,
                               [&](int64_t value, trace::RowIndex row) { return value < ts[row]; });
    cuts[i] = static_cast<size_t>(from - list.begin());
    before += cuts[i];
    for (auto row = from; row != to; ++row) ties.emplace_back(*row, i);
  }
  const auto needed = static_cast<size_t>(offset - before);
  std::nth_element(ties.begin(), ties.begin() + static_cast<std::ptrdiff_t>(needed), ties.end());
  for (size_t i = 0; i < needed; ++i) ++cuts[ties[i].second];
  return cuts;
}

}  // namespace

bool contains_ignoring_case(std::string_view text, std::string_view lowercase_needle) {
  if (lowercase_needle.empty()) return true;
  if (text.size() < lowercase_needle.size()) return false;
  const char first = lowercase_needle.front();
  const char first_upper =
      (first >= 'a' && first <= 'z') ? static_cast<char>(first - 'a' + 'A') : first;
  const size_t last_start = text.size() - lowercase_needle.size();
  for (size_t at = 0; at <= last_start; ++at) {
    // Skip quickly to the next place the first character (either case) occurs.
    const void* lower_hit = std::memchr(text.data() + at, first, last_start - at + 1);
    const void* upper_hit = first_upper == first
                                ? nullptr
                                : std::memchr(text.data() + at, first_upper, last_start - at + 1);
    if (lower_hit == nullptr && upper_hit == nullptr) return false;
    const char* hit = lower_hit == nullptr   ? static_cast<const char*>(upper_hit)
                      : upper_hit == nullptr ? static_cast<const char*>(lower_hit)
                                             : std::min(static_cast<const char*>(lower_hit),
                                                        static_cast<const char*>(upper_hit));
    at = static_cast<size_t>(hit - text.data());
    size_t i = 1;
    while (i < lowercase_needle.size() && ascii_lower(text[at + i]) == lowercase_needle[i]) ++i;
    if (i == lowercase_needle.size()) return true;
  }
  return false;
}

std::optional<SliceSearchQuery> parse_slice_search(std::string_view text, std::string& error) {
  SliceSearchQuery query;
  std::string_view rest = trimmed(text);
  if (starts_with_ignoring_case(rest, "name:")) {
    query.field = SliceSearchQuery::Field::kName;
    rest = trimmed(rest.substr(5));
  } else if (starts_with_ignoring_case(rest, "trace:")) {
    query.field = SliceSearchQuery::Field::kTrace;
    rest = trimmed(rest.substr(6));
    if (!timeline_search_parse_trace_id(rest, query.trace_id)) {
      error = "'" + std::string(text) + "': trace:ID needs a trace id of 32 hex digits";
      return std::nullopt;
    }
    query.text = ascii_lowercase(rest);
    return query;
  } else if (starts_with_ignoring_case(rest, "arg:")) {
    query.field = SliceSearchQuery::Field::kArg;
    rest = trimmed(rest.substr(4));
    if (auto equals = rest.find('='); equals != std::string_view::npos) {
      query.has_key = true;
      query.key = ascii_lowercase(trimmed(rest.substr(0, equals)));
      rest = trimmed(rest.substr(equals + 1));
      if (query.key.empty()) {
        error = "'" + std::string(text) + "': arg:KEY=TEXT needs a KEY before '='";
        return std::nullopt;
      }
    }
  }
  query.text = ascii_lowercase(rest);
  if (query.text.empty() && !query.has_key) {
    error = "'" + std::string(text) + "' has nothing to search for";
    return std::nullopt;
  }
  return query;
}

SliceSearchResult search_slices(const trace::Trace& trace, const SliceSearchQuery& query,
                                uint64_t offset, size_t limit) {
  SliceSearchResult result;
  SliceMatcher matcher(trace, query);
  const auto& slices = trace.slices;
  std::vector<std::vector<trace::RowIndex>> lists(trace.tracks.size());
  for (trace::RowIndex row = 0; row < slices.size(); ++row) {
    const trace::TrackId track = slices.track[row];
    if (track >= lists.size() || !matcher.matches(row)) continue;
    lists[track].push_back(row);
    ++result.total;
  }
  if (offset >= result.total || limit == 0) return result;
  std::vector<size_t> cuts = cuts_at(trace, lists, offset);
  // Merge the lists from their cuts, earliest (ts, row) first.
  using Head = std::pair<std::pair<int64_t, trace::RowIndex>, size_t>;  // ((ts, row), list)
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  for (size_t i = 0; i < lists.size(); ++i)
    if (cuts[i] < lists[i].size()) {
      trace::RowIndex row = lists[i][cuts[i]];
      heads.push({{slices.ts[row], row}, i});
    }
  while (!heads.empty() && result.rows.size() < limit) {
    auto [key, list] = heads.top();
    heads.pop();
    result.rows.push_back(key.second);
    if (++cuts[list] < lists[list].size()) {
      trace::RowIndex row = lists[list][cuts[list]];
      heads.push({{slices.ts[row], row}, list});
    }
  }
  return result;
}

}  // namespace opsight::server
