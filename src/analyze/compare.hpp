// A/B comparison of two traces (two runs of the same program): per span name and per node
// of the aggregated call tree, the distributions of A and B side by side, their change and
// a verdict from a significance test.
//
// The test is the two-sided Mann-Whitney U test (Wilcoxon rank-sum): exact for small
// samples without ties (each at most kExactMannWhitneyMaxSize values: the p-value counts
// the arrangements of the pooled ranks as extreme as the one observed), otherwise the
// normal approximation with tie and continuity corrections. The approximation is poor in
// the small-sample tail: with it, 5 calls against 5 could never reach alpha = 0.01 even
// when every B call is slower than every A call (p = 0.012; exactly, 2/252 = 0.0079). Why
// a rank test: latency distributions are skewed, heavy-tailed
// and often multimodal (caches, GC, scheduling), so a t-test's normality assumption does
// not hold and a few outliers dominate a mean; a rank test needs no distribution
// assumption, an outlier moves it by one rank, and it asks the question users ask: is a
// call in B likely to take longer than a call in A? Its effect size, P(B > A), is
// reported with it.
//
// A verdict needs both a significant test and a change large enough to matter:
//   slower  if p (Holm-adjusted over all names tested) < alpha, P(B > A) > 0.5 (the test's
//           direction) and median(B)/median(A) >= 1 + min_change;
//   faster  likewise with P(B > A) < 0.5 and median(A)/median(B) >= 1 + min_change;
//   same    otherwise;
//   too few samples  when either side has fewer than min_samples slices (no test: the
//           ratio is still reported);
//   only in A / only in B  when one side has no such span.
// Holm's correction keeps the chance of any false "slower" among many names at alpha, so
// two runs of the same code stay quiet.
//
// Thread-safety: pure functions; the traces must be finalized and unchanged meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/distribution.hpp"
#include "analyze/statistics.hpp"
#include "trace/trace.hpp"

namespace opsight::analyze {

struct MannWhitneyResult {
  double u_a = 0.0;                    // pairs where the A value is larger (ties count one half)
  double p_value = 1.0;                // two-sided
  double probability_b_greater = 0.5;  // P(B > A) + P(B == A) / 2
  bool exact = false;                  // p from the exact distribution of U
};

// The largest sample the exact test takes (both samples at most this size): its table of
// arrangements then has at most 21 x 401 entries.
inline constexpr size_t kExactMannWhitneyMaxSize = 20;

enum class MannWhitneyMethod {
  // Exact when both samples have at most kExactMannWhitneyMaxSize values and no value
  // occurs twice in the pooled sample; otherwise the normal approximation.
  kAutomatic,
  // Always the normal approximation with tie and continuity corrections (scipy's
  // method="asymptotic").
  kAsymptotic,
};

// The test on two samples, each sorted ascending. p = 1 when either is empty or every
// value is equal. The exact p-value is two-sided: twice the probability, over all
// C(n_a + n_b, n_a) equally likely arrangements of the pooled ranks, of a U at least as
// far from its centre on the observed side, capped at 1 (scipy's method="exact").
MannWhitneyResult mann_whitney_u(std::span<const int64_t> sorted_a,
                                 std::span<const int64_t> sorted_b,
                                 MannWhitneyMethod method = MannWhitneyMethod::kAutomatic);

// Holm-Bonferroni step-down adjustment of p-values (same order in and out, each <= 1).
std::vector<double> holm_adjust(std::span<const double> p_values);

enum class Verdict { kSame, kSlower, kFaster, kTooFewSamples, kOnlyInA, kOnlyInB };
std::string_view verdict_name(Verdict verdict);  // "same", "slower", ...

struct CompareOptions {
  double alpha = 0.01;
  double min_change = 0.02;  // 2%: smaller shifts are never called slower or faster
  uint64_t min_samples = 5;
};

// One compared row: a span name, or a node of the aggregated tree.
struct ComparedRow {
  std::string name;
  uint32_t depth = 0;            // tree rows: 0 for a root
  uint32_t parent = UINT32_MAX;  // tree rows: index of the parent row, UINT32_MAX for a root
  Distribution a, b;
  double median_ratio = 0.0;      // b.p50 / a.p50 (0 when either is missing or a.p50 is 0)
  double mean_delta_ns = 0.0;     // b.mean - a.mean
  double total_delta_ns = 0.0;    // b.total - a.total
  double p_value = 1.0;           // raw
  double adjusted_p_value = 1.0;  // Holm over the rows of its table that were tested
  double probability_b_greater = 0.5;
  Verdict verdict = Verdict::kSame;
  bool tested = false;
};

struct Comparison {
  std::vector<ComparedRow> names;  // by |total delta|, largest first
  std::vector<ComparedRow> tree;   // merged aggregated trees, depth-first
  CompareOptions options;
  int64_t a_traced_ns = 0, b_traced_ns = 0;
  uint64_t a_slices = 0, b_slices = 0;
  OverheadSummary a_overhead, b_overhead;  // what the tracer cost on each side
};

Comparison compare_traces(const trace::Trace& a, const trace::Trace& b,
                          const CompareOptions& options = {});

// Rows of `comparison.names` that regressed by at least `threshold` (0.05 = 5%): verdict
// slower and median ratio >= 1 + threshold. What --fail-on-regression lists.
std::vector<const ComparedRow*> regressions(const Comparison& comparison, double threshold);

}  // namespace opsight::analyze
