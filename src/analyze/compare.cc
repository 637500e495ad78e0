#include "analyze/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_map>

#include "analyze/aggregate_tree.hpp"
#include "analyze/statistics.hpp"

namespace opsight::analyze {

namespace {

// Durations of every slice, grouped by name text.
std::unordered_map<std::string_view, std::vector<int64_t>> durations_by_name(
    const trace::Trace& trace) {
  std::vector<std::vector<int64_t>> by_id(trace.strings.size());
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    const trace::StringId name = trace.slices.name[row];
    if (name >= by_id.size()) by_id.resize(name + 1);
    by_id[name].push_back(trace.slices.dur[row]);
  }
  std::unordered_map<std::string_view, std::vector<int64_t>> by_name;
  for (size_t id = 0; id < by_id.size(); ++id)
    if (!by_id[id].empty())
      by_name.emplace(trace.str(static_cast<trace::StringId>(id)), std::move(by_id[id]));
  return by_name;
}

// Fills distributions, ratio, deltas and the raw test of one row from sorted samples.
void measure_row(ComparedRow& row, std::span<const int64_t> sorted_a,
                 std::span<const int64_t> sorted_b, const CompareOptions& options) {
  std::vector<int64_t> scratch(sorted_a.begin(), sorted_a.end());
  row.a = summarize_distribution(scratch);
  scratch.assign(sorted_b.begin(), sorted_b.end());
  row.b = summarize_distribution(scratch);
  if (sorted_a.empty()) {
    row.verdict = Verdict::kOnlyInB;
    return;
  }
  if (sorted_b.empty()) {
    row.verdict = Verdict::kOnlyInA;
    return;
  }
  row.median_ratio = row.a.p50_ns > 0 ? row.b.p50_ns / row.a.p50_ns : 0.0;
  row.mean_delta_ns = row.b.mean_ns - row.a.mean_ns;
  row.total_delta_ns = static_cast<double>(row.b.total_ns) - static_cast<double>(row.a.total_ns);
  if (sorted_a.size() < options.min_samples || sorted_b.size() < options.min_samples) {
    row.verdict = Verdict::kTooFewSamples;
    return;
  }
  MannWhitneyResult test = mann_whitney_u(sorted_a, sorted_b);
  row.tested = true;
  row.p_value = test.p_value;
  row.probability_b_greater = test.probability_b_greater;
}

// Adjusts the p-values of the tested rows together and gives every tested row its verdict.
void decide(std::vector<ComparedRow>& rows, const CompareOptions& options) {
  std::vector<double> p_values;
  for (const ComparedRow& row : rows)
    if (row.tested) p_values.push_back(row.p_value);
  std::vector<double> adjusted = holm_adjust(p_values);
  size_t next = 0;
  for (ComparedRow& row : rows) {
    if (!row.tested) continue;
    row.adjusted_p_value = adjusted[next++];
    const bool significant = row.adjusted_p_value < options.alpha;
    const double a = row.a.p50_ns, b = row.b.p50_ns;
    // The test is two-sided: its direction is P(B > A); the median must move the same way
    // (a bimodal A can have a lower median than B while most B calls are faster).
    if (significant && row.probability_b_greater > 0.5 && b >= a * (1.0 + options.min_change) &&
        b > a)
      row.verdict = Verdict::kSlower;
    else if (significant && row.probability_b_greater < 0.5 &&
             a >= b * (1.0 + options.min_change) && a > b)
      row.verdict = Verdict::kFaster;
    else
      row.verdict = Verdict::kSame;
  }
}

// Children of every node of an aggregated tree, by index.
std::vector<std::vector<uint32_t>> children_of(const AggregateTree& tree) {
  std::vector<std::vector<uint32_t>> children(tree.nodes().size());
  for (uint32_t node = 0; node < tree.nodes().size(); ++node)
    if (tree.nodes()[node].parent != kNoNode) children[tree.nodes()[node].parent].push_back(node);
  return children;
}

struct TreeSide {
  const trace::Trace& trace;
  const AggregateTree& tree;
  std::vector<std::vector<uint32_t>> children;
};

// Pairs children of a node of A with those of the matching node of B: A's in their order,
// each with B's first unmatched child of the same name, then B's that A lacks.
std::vector<std::pair<uint32_t, uint32_t>> pair_children(const TreeSide& a, const TreeSide& b,
                                                         std::span<const uint32_t> a_nodes,
                                                         std::span<const uint32_t> b_nodes) {
  // A node's children have distinct names (the tree is keyed on parent and name), so one
  // lookup table of B's children pairs them in linear time.
  std::unordered_map<std::string_view, size_t> b_child_by_name;
  b_child_by_name.reserve(b_nodes.size());
  for (size_t i = 0; i < b_nodes.size(); ++i)
    b_child_by_name.emplace(b.trace.str(b.tree.nodes()[b_nodes[i]].name), i);
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  pairs.reserve(a_nodes.size() + b_nodes.size());
  std::vector<bool> b_matched(b_nodes.size(), false);
  for (uint32_t a_node : a_nodes) {
    uint32_t match = kNoNode;
    auto found = b_child_by_name.find(a.trace.str(a.tree.nodes()[a_node].name));
    if (found != b_child_by_name.end() && !b_matched[found->second]) {
      b_matched[found->second] = true;
      match = b_nodes[found->second];
    }
    pairs.emplace_back(a_node, match);
  }
  for (size_t i = 0; i < b_nodes.size(); ++i)
    if (!b_matched[i]) pairs.emplace_back(kNoNode, b_nodes[i]);
  return pairs;
}

// Depth-first merge of two aggregated trees into rows (iterative: a trace nested tens of
// thousands deep cannot overflow the stack).
void merge_trees(const TreeSide& a, const TreeSide& b, const CompareOptions& options,
                 std::vector<ComparedRow>& out) {
  struct Pending {
    uint32_t a_node, b_node, depth, parent_row;
  };
  std::vector<Pending> stack;
  auto push_children = [&](std::span<const uint32_t> a_nodes, std::span<const uint32_t> b_nodes,
                           uint32_t depth, uint32_t parent_row) {
    auto pairs = pair_children(a, b, a_nodes, b_nodes);
    for (auto pair = pairs.rbegin(); pair != pairs.rend(); ++pair)
      stack.push_back({pair->first, pair->second, depth, parent_row});
  };
  push_children(a.tree.roots(), b.tree.roots(), 0, kNoNode);
  static const std::vector<uint32_t> kNone;
  while (!stack.empty()) {
    Pending pending = stack.back();
    stack.pop_back();
    const bool has_a = pending.a_node != kNoNode, has_b = pending.b_node != kNoNode;
    ComparedRow row;
    row.name = std::string(has_a ? a.trace.str(a.tree.nodes()[pending.a_node].name)
                                 : b.trace.str(b.tree.nodes()[pending.b_node].name));
    row.depth = pending.depth;
    row.parent = pending.parent_row;
    measure_row(row, has_a ? a.tree.durations(pending.a_node) : std::span<const int64_t>{},
                has_b ? b.tree.durations(pending.b_node) : std::span<const int64_t>{}, options);
    const auto row_index = static_cast<uint32_t>(out.size());
    out.push_back(std::move(row));
    push_children(has_a ? std::span<const uint32_t>(a.children[pending.a_node]) : kNone,
                  has_b ? std::span<const uint32_t>(b.children[pending.b_node]) : kNone,
                  pending.depth + 1, row_index);
  }
}

// The two-sided exact p-value of U_A = u_a for samples of sizes `size_a` and `size_b`
// without ties. Under the null hypothesis each of the C(size_a + size_b, size_a)
// arrangements of A's and B's values in the pooled order is equally likely; the number of
// arrangements with U_A = u follows the classic recurrence on the largest pooled value:
// it is B's (U_A unchanged) or A's (it exceeds all of B's values: U_A grows by their count),
//   arrangements(j, k, u) = arrangements(j, k - 1, u) + arrangements(j - 1, k, u - k),
// with j values of A and k of B. The table keeps one row per j, updated in place as k
// grows (row j - 1 already holds k when row j is updated).
double exact_two_sided_p_value(double u_a, size_t size_a, size_t size_b) {
  const size_t max_u = size_a * size_b;
  std::vector<std::vector<uint64_t>> arrangements(size_a + 1, std::vector<uint64_t>(max_u + 1, 0));
  for (std::vector<uint64_t>& row : arrangements) row[0] = 1;  // k = 0: U_A is 0
  for (size_t k = 1; k <= size_b; ++k)
    for (size_t j = 1; j <= size_a; ++j)
      for (size_t u = k; u <= max_u; ++u) arrangements[j][u] += arrangements[j - 1][u - k];
  const std::vector<uint64_t>& counts = arrangements[size_a];
  // U's distribution is symmetric about max_u / 2: the tail on the observed side.
  const auto observed = static_cast<size_t>(std::llround(u_a));
  const size_t tail_end = std::min(observed, max_u - observed);
  uint64_t in_tail = 0;
  uint64_t total = 0;
  for (size_t u = 0; u <= max_u; ++u) {
    total += counts[u];
    if (u <= tail_end) in_tail += counts[u];
  }
  return std::min(1.0, 2.0 * static_cast<double>(in_tail) / static_cast<double>(total));
}

}  // namespace

MannWhitneyResult mann_whitney_u(std::span<const int64_t> sorted_a,
                                 std::span<const int64_t> sorted_b, MannWhitneyMethod method) {
  MannWhitneyResult result;
  const double na = static_cast<double>(sorted_a.size());
  const double nb = static_cast<double>(sorted_b.size());
  if (sorted_a.empty() || sorted_b.empty()) return result;
  // Merge both samples in order; ties share the mean of their ranks.
  double rank_sum_a = 0.0;
  double tie_term = 0.0;  // sum over tie groups of t^3 - t
  double rank_before = 0.0;
  size_t i = 0, j = 0;
  while (i < sorted_a.size() || j < sorted_b.size()) {
    int64_t value;
    if (j >= sorted_b.size() || (i < sorted_a.size() && sorted_a[i] <= sorted_b[j]))
      value = sorted_a[i];
    else
      value = sorted_b[j];
    double count_a = 0.0, count_b = 0.0;
    while (i < sorted_a.size() && sorted_a[i] == value) ++i, ++count_a;
    while (j < sorted_b.size() && sorted_b[j] == value) ++j, ++count_b;
    const double tied = count_a + count_b;
    const double mean_rank = rank_before + (tied + 1.0) / 2.0;
    rank_sum_a += count_a * mean_rank;
    tie_term += tied * tied * tied - tied;
    rank_before += tied;
  }
  const double n = na + nb;
  result.u_a = rank_sum_a - na * (na + 1.0) / 2.0;
  result.probability_b_greater = (na * nb - result.u_a) / (na * nb);
  const bool tied = tie_term > 0.0;
  if (method == MannWhitneyMethod::kAutomatic && !tied &&
      sorted_a.size() <= kExactMannWhitneyMaxSize && sorted_b.size() <= kExactMannWhitneyMaxSize) {
    result.p_value = exact_two_sided_p_value(result.u_a, sorted_a.size(), sorted_b.size());
    result.exact = true;
    return result;
  }
  const double variance = na * nb / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
  if (!(variance > 0.0)) {
    result.p_value = 1.0;
    return result;
  }
  const double distance = std::max(std::fabs(result.u_a - na * nb / 2.0) - 0.5, 0.0);
  result.p_value = std::min(1.0, std::erfc(distance / std::sqrt(variance) / std::sqrt(2.0)));
  return result;
}

std::vector<double> holm_adjust(std::span<const double> p_values) {
  const size_t count = p_values.size();
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return p_values[x] < p_values[y]; });
  std::vector<double> adjusted(count, 1.0);
  double running_max = 0.0;
  for (size_t rank = 0; rank < count; ++rank) {
    double value = std::min(1.0, static_cast<double>(count - rank) * p_values[order[rank]]);
    running_max = std::max(running_max, value);
    adjusted[order[rank]] = running_max;
  }
  return adjusted;
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kSame:
      return "same";
    case Verdict::kSlower:
      return "slower";
    case Verdict::kFaster:
      return "faster";
    case Verdict::kTooFewSamples:
      return "too few samples";
    case Verdict::kOnlyInA:
      return "only in A";
    case Verdict::kOnlyInB:
      return "only in B";
  }
  return "same";
}

Comparison compare_traces(const trace::Trace& a, const trace::Trace& b,
                          const CompareOptions& options) {
  Comparison comparison;
  comparison.options = options;
  comparison.a_traced_ns = traced_time_ns(a);
  comparison.b_traced_ns = traced_time_ns(b);
  comparison.a_slices = a.slices.size();
  comparison.b_slices = b.slices.size();
  comparison.a_overhead = summarize_overhead(a);
  comparison.b_overhead = summarize_overhead(b);

  auto a_names = durations_by_name(a);
  auto b_names = durations_by_name(b);
  std::map<std::string_view, std::pair<std::vector<int64_t>*, std::vector<int64_t>*>> union_of;
  for (auto& [name, values] : a_names) union_of[name].first = &values;
  for (auto& [name, values] : b_names) union_of[name].second = &values;
  for (auto& [name, sides] : union_of) {
    static const std::vector<int64_t> kEmpty;
    if (sides.first) std::sort(sides.first->begin(), sides.first->end());
    if (sides.second) std::sort(sides.second->begin(), sides.second->end());
    ComparedRow row;
    row.name = std::string(name);
    measure_row(row, sides.first ? *sides.first : kEmpty, sides.second ? *sides.second : kEmpty,
                options);
    comparison.names.push_back(std::move(row));
  }
  decide(comparison.names, options);
  std::stable_sort(comparison.names.begin(), comparison.names.end(),
                   [](const ComparedRow& x, const ComparedRow& y) {
                     auto magnitude = [](const ComparedRow& row) {
                       if (row.verdict == Verdict::kOnlyInA)
                         return static_cast<double>(row.a.total_ns);
                       if (row.verdict == Verdict::kOnlyInB)
                         return static_cast<double>(row.b.total_ns);
                       return std::fabs(row.total_delta_ns);
                     };
                     return magnitude(x) > magnitude(y);
                   });

  AggregateTree a_tree = AggregateTree::build(a, true);
  AggregateTree b_tree = AggregateTree::build(b, true);
  TreeSide a_side{a, a_tree, children_of(a_tree)};
  TreeSide b_side{b, b_tree, children_of(b_tree)};
  merge_trees(a_side, b_side, options, comparison.tree);
  decide(comparison.tree, options);
  return comparison;
}

std::vector<const ComparedRow*> regressions(const Comparison& comparison, double threshold) {
  std::vector<const ComparedRow*> found;
  for (const ComparedRow& row : comparison.names)
    if (row.verdict == Verdict::kSlower && row.median_ratio >= 1.0 + threshold)
      found.push_back(&row);
  return found;
}

}  // namespace opsight::analyze
