// The timeline's search: the text's forms, what matches (names, arg values by type, a
// named arg), and pages of matches in time order from any offset, checked against every
// match sorted by (ts, row) on a random trace of several tracks with ties in time.
#include "server/timeline_search.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace opsight::server {
namespace {

SliceSearchQuery parsed(std::string_view text) {
  std::string error;
  auto query = parse_slice_search(text, error);
  EXPECT_TRUE(query.has_value()) << text << ": " << error;
  return query.value_or(SliceSearchQuery{});
}

TEST(TimelineSearch, TheTextsFormsAreParsed) {
  SliceSearchQuery plain = parsed("  Aten::MM ");
  EXPECT_EQ(plain.field, SliceSearchQuery::Field::kNameOrArg);
  EXPECT_EQ(plain.text, "aten::mm");
  SliceSearchQuery name = parsed("NAME: Infer");
  EXPECT_EQ(name.field, SliceSearchQuery::Field::kName);
  EXPECT_EQ(name.text, "infer");
  SliceSearchQuery value = parsed("arg:cuda");
  EXPECT_EQ(value.field, SliceSearchQuery::Field::kArg);
  EXPECT_FALSE(value.has_key);
  SliceSearchQuery keyed = parsed("arg: Batch = 7");
  EXPECT_TRUE(keyed.has_key);
  EXPECT_EQ(keyed.key, "batch");
  EXPECT_EQ(keyed.text, "7");
  SliceSearchQuery any_value = parsed("arg:batch=");
  EXPECT_TRUE(any_value.has_key);
  EXPECT_EQ(any_value.text, "");

  for (std::string_view bad : {"", "   ", "name:", "arg:", "arg:=3"}) {
    std::string error;
    EXPECT_FALSE(parse_slice_search(bad, error).has_value()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(TimelineSearch, ContainsIgnoresTheCaseOfLetters) {
  EXPECT_TRUE(contains_ignoring_case("aten::Linear", "linear"));
  EXPECT_TRUE(contains_ignoring_case("LINEAR", "linear"));
  EXPECT_TRUE(contains_ignoring_case("xxLlinear", "linear"));  // a false start first
  EXPECT_FALSE(contains_ignoring_case("linea", "linear"));
  EXPECT_TRUE(contains_ignoring_case("anything", ""));
  EXPECT_TRUE(contains_ignoring_case("a-1.5e+07", "1.5e+07"));
}

// Four slices with args of every type, on one track.
trace::Trace trace_with_args() {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  auto add = [&](int64_t ts, const char* name) {
    return trace.slices.add(ts, 10, trace.intern(name), 0, track);
  };
  trace::RowIndex gemm = add(0, "Gemm");
  trace.slice_args.add(gemm, trace.intern("Shape"),
                       trace::ArgValue::of_string(trace.intern("[64, 128]")));
  trace.slice_args.add(gemm, trace.intern("seq"), trace::ArgValue::of_int(1234));
  trace::RowIndex relu = add(20, "relu");
  trace.slice_args.add(relu, trace.intern("scale"), trace::ArgValue::of_double(0.5));
  trace.slice_args.add(relu, trace.intern("inplace"), trace::ArgValue::of_bool(true));
  trace::RowIndex copy = add(40, "copy 128");
  trace.slice_args.add(copy, trace.intern("seq"), trace::ArgValue::of_int(99));
  add(60, "idle");
  trace.finalize();
  return trace;
}

std::vector<std::string> names_found(const trace::Trace& trace, std::string_view text) {
  SliceSearchResult result = search_slices(trace, parsed(text), 0, 100);
  std::vector<std::string> names;
  for (trace::RowIndex row : result.rows) names.emplace_back(trace.str(trace.slices.name[row]));
  EXPECT_EQ(result.total, names.size()) << text;
  return names;
}

TEST(TimelineSearch, NamesAndArgValuesMatchAsTheUiShowsThem) {
  trace::Trace trace = trace_with_args();
  using Names = std::vector<std::string>;
  EXPECT_EQ(names_found(trace, "128"), (Names{"Gemm", "copy 128"}));  // a string value, a name
  EXPECT_EQ(names_found(trace, "name:128"), (Names{"copy 128"}));
  EXPECT_EQ(names_found(trace, "arg:128"), (Names{"Gemm"}));
  EXPECT_EQ(names_found(trace, "GEMM"), (Names{"Gemm"}));
  EXPECT_EQ(names_found(trace, "1234"), (Names{"Gemm"}));    // an int: equal
  EXPECT_EQ(names_found(trace, "23"), (Names{}));            // not a part of its digits
  EXPECT_EQ(names_found(trace, "1234.0"), (Names{"Gemm"}));  // the same number
  EXPECT_EQ(names_found(trace, "0.5"), (Names{"relu"}));     // a double
  EXPECT_EQ(names_found(trace, "5e-1"), (Names{"relu"}));
  EXPECT_EQ(names_found(trace, "TRUE"), (Names{"relu"}));
  EXPECT_EQ(names_found(trace, "fals"), (Names{}));
  EXPECT_EQ(names_found(trace, "arg:seq="), (Names{"Gemm", "copy 128"}));  // has the key
  EXPECT_EQ(names_found(trace, "arg:seq=99"), (Names{"copy 128"}));
  EXPECT_EQ(names_found(trace, "arg:seq=9"), (Names{}));
  EXPECT_EQ(names_found(trace, "arg:shape=64"), (Names{"Gemm"}));  // keys ignore case too
  EXPECT_EQ(names_found(trace, "arg:sha=64"), (Names{}));          // the whole key
  EXPECT_EQ(names_found(trace, "arg:scale=128"), (Names{}));       // another arg's value
  EXPECT_EQ(names_found(trace, "shape"), (Names{}));               // keys alone: arg:shape=
}

// Two tracks: root "outer" > "inner" on one, root "other" on the other, and "served"
// under "other" that began a trace of its own (a span context) with its child "handler".
TEST(TimelineSearch, TraceIdFindsEverySpanOfThatTrace) {
  trace::Trace trace;
  trace::TrackId first = trace.thread_track(1, 1), second = trace.thread_track(1, 2);
  auto add = [&](int64_t ts, int64_t dur, const char* name, trace::TrackId track) {
    return trace.slices.add(ts, dur, trace.intern(name), 0, track);
  };
  add(0, 100, "outer", first);
  add(10, 10, "inner", first);
  add(0, 100, "other", second);
  trace::RowIndex served = add(20, 50, "served", second);
  add(30, 5, "handler", second);
  const trace::TraceId request{0x0af7651916cd43ddULL, 0x8448eb211c80319cULL};
  trace.span_contexts.add(served, request, 0xb7ad6b7169203331ULL, 1);
  trace.finalize();
  using Names = std::vector<std::string>;
  EXPECT_EQ(names_found(trace, "trace:0af7651916cd43dd8448eb211c80319c"),
            (Names{"served", "handler"}));
  EXPECT_EQ(names_found(trace, " TRACE: 0AF7651916CD43DD8448EB211C80319C "),
            (Names{"served", "handler"}));
  trace::RowIndex outer = 0;
  while (trace.str(trace.slices.name[outer]) != "outer") ++outer;
  std::string own = "trace:" + trace::root_trace_id(trace.slices.span_id[outer]).to_hex();
  EXPECT_EQ(names_found(trace, own), (Names{"outer", "inner"}));
  EXPECT_EQ(names_found(trace, "trace:00000000000000000000000000000001"), (Names{}));
  for (std::string_view bad : {"trace:", "trace:0af7", "trace:0af7651916cd43dd8448eb211c80319g",
                               "trace:0af7651916cd43dd8448eb211c80319c0"}) {
    std::string error;
    EXPECT_FALSE(parse_slice_search(bad, error).has_value()) << bad;
    EXPECT_NE(error.find("32 hex digits"), std::string::npos) << error;
  }
}

// Slices on `tracks` threads, many at the same times (ties across tracks), nested two
// deep, names "a" or "b" at random.
trace::Trace random_trace(uint32_t seed, int tracks, int per_track) {
  trace::Trace trace;
  std::mt19937 random(seed);
  trace::StringId a = trace.intern("a"), b = trace.intern("b");
  for (int t = 0; t < tracks; ++t) {
    trace::TrackId track = trace.thread_track(1, t + 1);
    int64_t at = 0;
    for (int i = 0; i < per_track; i += 2) {
      at += 10 * static_cast<int64_t>(random() % 3);  // often the same ts as other tracks
      trace.slices.add(at, 8, random() % 2 ? a : b, 0, track);
      trace.slices.add(at, 4, random() % 2 ? a : b, 0, track);  // a child at the same ts
      at += 10;
    }
  }
  trace.finalize();
  return trace;
}

TEST(TimelineSearch, PagesFromAnyOffsetAreTheMatchesInTimeOrder) {
  trace::Trace trace = random_trace(7, 5, 200);
  std::vector<trace::RowIndex> expected;
  for (trace::RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == "a") expected.push_back(row);
  std::sort(expected.begin(), expected.end(), [&](auto x, auto y) {
    return std::pair(trace.slices.ts[x], x) < std::pair(trace.slices.ts[y], y);
  });
  ASSERT_GT(expected.size(), 300u);
  SliceSearchQuery query = parsed("name:a");
  for (uint64_t offset :
       {0ul, 1ul, 2ul, 3ul, 57ul, 100ul, expected.size() - 3, expected.size() - 1}) {
    for (size_t limit : {1ul, 7ul, 1000ul}) {
      SliceSearchResult result = search_slices(trace, query, offset, limit);
      ASSERT_EQ(result.total, expected.size());
      const size_t end = std::min(expected.size(), static_cast<size_t>(offset) + limit);
      std::vector<trace::RowIndex> want(expected.begin() + static_cast<std::ptrdiff_t>(offset),
                                        expected.begin() + static_cast<std::ptrdiff_t>(end));
      EXPECT_EQ(result.rows, want) << "offset " << offset << " limit " << limit;
    }
  }
  EXPECT_TRUE(search_slices(trace, query, expected.size(), 10).rows.empty());
  EXPECT_EQ(search_slices(trace, query, expected.size(), 10).total, expected.size());
}

}  // namespace
}  // namespace opsight::server
