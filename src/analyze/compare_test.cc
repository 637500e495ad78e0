#include "analyze/compare.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace opsight::analyze {
namespace {

TEST(MannWhitney, SeparatedSamples) {
  std::vector<int64_t> a = {1, 2, 3, 4, 5}, b = {6, 7, 8, 9, 10};
  MannWhitneyResult result = mann_whitney_u(a, b, MannWhitneyMethod::kAsymptotic);
  EXPECT_DOUBLE_EQ(result.u_a, 0.0);
  EXPECT_DOUBLE_EQ(result.probability_b_greater, 1.0);
  // scipy.stats.mannwhitneyu(a, b, method="asymptotic") gives p = 0.01219.
  EXPECT_NEAR(result.p_value, 0.0121858, 1e-6);
  EXPECT_FALSE(result.exact);
}

// Small samples without ties take the exact distribution of U: 5 against 5, every B value
// above every A value, is one of the two most extreme of C(10, 5) = 252 arrangements.
TEST(MannWhitney, SmallSeparatedSamplesAreExact) {
  std::vector<int64_t> a = {1, 2, 3, 4, 5}, b = {6, 7, 8, 9, 10};
  MannWhitneyResult five = mann_whitney_u(a, b);
  EXPECT_TRUE(five.exact);
  EXPECT_DOUBLE_EQ(five.u_a, 0.0);
  EXPECT_DOUBLE_EQ(five.p_value, 2.0 / 252.0);                  // scipy method="exact": 0.0079
  EXPECT_DOUBLE_EQ(mann_whitney_u(b, a).p_value, 2.0 / 252.0);  // symmetric
  std::vector<int64_t> a4 = {1, 2, 3, 4}, b4 = {5, 6, 7, 8};
  EXPECT_DOUBLE_EQ(mann_whitney_u(a4, b4).p_value, 2.0 / 70.0);  // C(8, 4) = 70: 0.029
}

// The exact p-value against a count over every arrangement of 4 A and 5 B values.
TEST(MannWhitney, ExactPValueCountsEveryArrangement) {
  constexpr int kA = 4, kB = 5, kPooled = kA + kB;
  std::vector<std::vector<int64_t>> a_samples, b_samples;
  std::vector<int> u_of_arrangement;
  for (unsigned mask = 0; mask < (1u << kPooled); ++mask) {
    if (__builtin_popcount(mask) != kA) continue;
    std::vector<int64_t> a, b;
    int u = 0;  // pairs with the A value larger
    for (int value = 0; value < kPooled; ++value) {
      if (mask & (1u << value)) {
        a.push_back(value);
        u += static_cast<int>(b.size());
      } else {
        b.push_back(value);
      }
    }
    a_samples.push_back(a);
    b_samples.push_back(b);
    u_of_arrangement.push_back(u);
  }
  ASSERT_EQ(u_of_arrangement.size(), 126u);  // C(9, 4)
  for (size_t i = 0; i < u_of_arrangement.size(); ++i) {
    const int u = u_of_arrangement[i];
    const int distance = std::min(u, kA * kB - u);
    int as_extreme = 0;  // on one side: U at most the observed distance from 0
    for (int other : u_of_arrangement)
      if (other <= distance) ++as_extreme;
    const double expected = std::min(1.0, 2.0 * as_extreme / 126.0);
    MannWhitneyResult result = mann_whitney_u(a_samples[i], b_samples[i]);
    EXPECT_TRUE(result.exact);
    EXPECT_DOUBLE_EQ(result.u_a, u);
    EXPECT_DOUBLE_EQ(result.p_value, expected) << "U = " << u;
  }
}

// With a tie, or with a sample over kExactMannWhitneyMaxSize, the normal approximation.
TEST(MannWhitney, TiesAndLargeSamplesUseTheNormalApproximation) {
  std::vector<int64_t> a = {1, 2, 3, 4, 6}, b = {6, 7, 8, 9, 10};
  MannWhitneyResult tied = mann_whitney_u(a, b);
  EXPECT_FALSE(tied.exact);
  EXPECT_DOUBLE_EQ(tied.p_value, mann_whitney_u(a, b, MannWhitneyMethod::kAsymptotic).p_value);
  std::vector<int64_t> large_a, large_b;
  for (int64_t i = 0; i < 21; ++i) {
    large_a.push_back(i);
    large_b.push_back(100 + i);
  }
  EXPECT_FALSE(mann_whitney_u(large_a, large_b).exact);
  large_a.pop_back();
  large_b.pop_back();
  MannWhitneyResult twenty = mann_whitney_u(large_a, large_b);
  EXPECT_TRUE(twenty.exact);
  EXPECT_DOUBLE_EQ(twenty.p_value, 2.0 / 137846528820.0);  // 2 / C(40, 20)
}

TEST(MannWhitney, TiesShareTheirMeanRank) {
  // Ranks: 1 -> 1, the three 2s -> 3, the three 3s -> 6, 4 -> 8, 5 -> 9, 6 -> 10, 7 -> 11.
  // A's rank sum 1+3+3+6+9 = 22, so U_A = 22 - 5*6/2 = 7.
  std::vector<int64_t> a = {1, 2, 2, 3, 5}, b = {2, 3, 3, 4, 6, 7};
  MannWhitneyResult result = mann_whitney_u(a, b);
  EXPECT_DOUBLE_EQ(result.u_a, 7.0);
  EXPECT_DOUBLE_EQ(result.probability_b_greater, (30.0 - 7.0) / 30.0);
  EXPECT_GT(result.p_value, 0.1);
  EXPECT_LT(result.p_value, 0.2);
}

TEST(MannWhitney, AllEqualOrEmpty) {
  std::vector<int64_t> same = {5, 5, 5}, empty;
  EXPECT_DOUBLE_EQ(mann_whitney_u(same, same).p_value, 1.0);
  EXPECT_DOUBLE_EQ(mann_whitney_u(same, empty).p_value, 1.0);
}

TEST(Holm, StepDownAdjustment) {
  std::vector<double> p = {0.01, 0.04, 0.03, 0.005};
  std::vector<double> adjusted = holm_adjust(p);
  // Sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> max so far 0.06.
  EXPECT_DOUBLE_EQ(adjusted[3], 0.02);
  EXPECT_DOUBLE_EQ(adjusted[0], 0.03);
  EXPECT_DOUBLE_EQ(adjusted[2], 0.06);
  EXPECT_DOUBLE_EQ(adjusted[1], 0.06);
}

// One "main" per trace calling `calls` times f and g; f's durations scaled by f_scale.
// Durations carry deterministic noise of +-5% (a different seed per trace).
trace::Trace program_trace(double f_scale, uint64_t seed, bool with_h) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId main = trace.intern("main"), f = trace.intern("f"), g = trace.intern("g"),
                        h = trace.intern("h");
  uint64_t state = seed;
  auto noisy = [&state](double base) {
    state = trace::mix64(state);
    double noise = static_cast<double>(state % 1000) / 1000.0 * 0.1 - 0.05;
    return static_cast<int64_t>(base * (1.0 + noise));
  };
  constexpr int kCalls = 60;
  std::vector<std::pair<trace::StringId, int64_t>> calls;
  int64_t cursor = 10;
  trace::RowIndex main_row = trace.slices.add(0, 0, main, 0, track);
  for (int i = 0; i < kCalls; ++i) {
    int64_t f_ns = noisy(10000 * f_scale), g_ns = noisy(5000);
    trace.slices.add(cursor, f_ns, f, 0, track);
    cursor += f_ns + 10;
    trace.slices.add(cursor, g_ns, g, 0, track);
    cursor += g_ns + 10;
    if (with_h) {
      trace.slices.add(cursor, 100, h, 0, track);
      cursor += 110;
    }
  }
  trace.slices.dur[main_row] = cursor + 10;
  trace.finalize();
  return trace;
}

const ComparedRow* find_row(const std::vector<ComparedRow>& rows, std::string_view name) {
  for (const ComparedRow& row : rows)
    if (row.name == name) return &row;
  return nullptr;
}

TEST(CompareTraces, FlagsAPlantedSlowdownAndNothingElse) {
  trace::Trace a = program_trace(1.0, 1, false);
  trace::Trace b = program_trace(1.2, 2, true);
  Comparison comparison = compare_traces(a, b);
  const ComparedRow* f = find_row(comparison.names, "f");
  const ComparedRow* g = find_row(comparison.names, "g");
  const ComparedRow* h = find_row(comparison.names, "h");
  const ComparedRow* main = find_row(comparison.names, "main");
  ASSERT_TRUE(f && g && h && main);
  EXPECT_EQ(f->verdict, Verdict::kSlower);
  EXPECT_NEAR(f->median_ratio, 1.2, 0.05);
  EXPECT_LT(f->adjusted_p_value, 1e-6);
  EXPECT_GT(f->probability_b_greater, 0.99);
  EXPECT_EQ(g->verdict, Verdict::kSame);
  EXPECT_EQ(h->verdict, Verdict::kOnlyInB);
  EXPECT_EQ(main->verdict, Verdict::kTooFewSamples);
  EXPECT_GT(main->median_ratio, 1.0);
  std::vector<const ComparedRow*> found = regressions(comparison, 0.05);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->name, "f");
  EXPECT_TRUE(regressions(comparison, 0.25).empty());  // 20% is below a 25% threshold

  // The tree: main, then f and g (A's order), then h (only in B), all under main.
  ASSERT_EQ(comparison.tree.size(), 4u);
  EXPECT_EQ(comparison.tree[0].name, "main");
  EXPECT_EQ(comparison.tree[1].name, "f");
  EXPECT_EQ(comparison.tree[1].depth, 1u);
  EXPECT_EQ(comparison.tree[1].parent, 0u);
  EXPECT_EQ(comparison.tree[1].verdict, Verdict::kSlower);
  EXPECT_EQ(comparison.tree[2].verdict, Verdict::kSame);
  EXPECT_EQ(comparison.tree[3].name, "h");
  EXPECT_EQ(comparison.tree[3].verdict, Verdict::kOnlyInB);
}

// A is bimodal (600 calls of 100 µs, 400 of 300 µs); B mostly faster (400 of 50 µs, 600 of
// 105 µs). B's median (105) is 5% above A's (100), yet most B calls are faster: the
// verdict follows the test's direction, P(B > A) < 0.5, and is never "slower".
TEST(CompareTraces, VerdictFollowsTheTestsDirectionNotTheMedianAlone) {
  auto build = [](std::vector<std::pair<int, int64_t>> groups) {
    trace::Trace trace;
    trace::TrackId track = trace.thread_track(1, 1);
    const trace::StringId name = trace.intern("call");
    int64_t cursor = 0;
    for (auto [count, duration] : groups)
      for (int i = 0; i < count; ++i) {
        trace.slices.add(cursor, duration, name, 0, track);
        cursor += duration + 1;
      }
    trace.finalize();
    return trace;
  };
  Comparison comparison =
      compare_traces(build({{600, 100000}, {400, 300000}}), build({{400, 50000}, {600, 105000}}));
  ASSERT_EQ(comparison.names.size(), 1u);
  const ComparedRow& row = comparison.names[0];
  EXPECT_NEAR(row.median_ratio, 1.05, 1e-9);
  EXPECT_LT(row.probability_b_greater, 0.5);
  EXPECT_LT(row.adjusted_p_value, 1e-6);
  EXPECT_NE(row.verdict, Verdict::kSlower);
  EXPECT_TRUE(regressions(comparison, 0.03).empty());
}

// One span name, called once per duration given, on one thread.
trace::Trace calls_trace(const std::vector<int64_t>& durations) {
  trace::Trace trace;
  trace::TrackId track = trace.thread_track(1, 1);
  const trace::StringId name = trace.intern("call");
  int64_t cursor = 0;
  for (int64_t duration : durations) {
    trace.slices.add(cursor, duration, name, 0, track);
    cursor += duration + 1;
  }
  trace.finalize();
  return trace;
}

// At the default alpha (0.01) and min_samples (5): 5 calls each, every B call slower than
// every A call, is significant (exact p = 2/252); 4 against 4 cannot be (2/70).
TEST(CompareTraces, FiveFullySeparatedCallsAreEnoughFourAreNot) {
  Comparison five = compare_traces(calls_trace({100, 101, 102, 103, 104}),
                                   calls_trace({200, 201, 202, 203, 204}));
  ASSERT_EQ(five.names.size(), 1u);
  EXPECT_EQ(five.names[0].verdict, Verdict::kSlower);
  EXPECT_DOUBLE_EQ(five.names[0].p_value, 2.0 / 252.0);
  Comparison faster = compare_traces(calls_trace({200, 201, 202, 203, 204}),
                                     calls_trace({100, 101, 102, 103, 104}));
  EXPECT_EQ(faster.names[0].verdict, Verdict::kFaster);

  CompareOptions four_samples;
  four_samples.min_samples = 4;
  Comparison four = compare_traces(calls_trace({100, 101, 102, 103}),
                                   calls_trace({200, 201, 202, 203}), four_samples);
  ASSERT_EQ(four.names.size(), 1u);
  EXPECT_TRUE(four.names[0].tested);
  EXPECT_DOUBLE_EQ(four.names[0].p_value, 2.0 / 70.0);
  EXPECT_EQ(four.names[0].verdict, Verdict::kSame);
}

TEST(CompareTraces, TwoRunsOfTheSameCodeStayQuiet) {
  // Different noise, same code: no verdict may say slower or faster.
  for (uint64_t seed = 10; seed < 30; seed += 2) {
    Comparison comparison =
        compare_traces(program_trace(1.0, seed, false), program_trace(1.0, seed + 1, false));
    for (const ComparedRow& row : comparison.names)
      EXPECT_TRUE(row.verdict == Verdict::kSame || row.verdict == Verdict::kTooFewSamples)
          << row.name << " " << verdict_name(row.verdict);
    EXPECT_TRUE(regressions(comparison, 0.0).empty());
  }
}

}  // namespace
}  // namespace opsight::analyze
