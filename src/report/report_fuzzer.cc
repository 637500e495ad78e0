// libFuzzer entry point for the analyses and their reports: any trace the Chrome JSON
// reader makes of fuzzed bytes (overlapping, deep, negative, huge or empty slices) must
// give every view without a crash, a hang or an exception, and the analyses must keep
// their invariants: a breakdown's phase means add up to its total's mean, the critical
// path's time by name plus idle equals its length, an aggregated tree counts every slice,
// a trace compared with itself has no difference.
//
// The analyses and their invariants run on every trace. Rendering every view in every
// format (and the comparison) costs several times the rest of an execution, so it runs on
// one trace in kRenderEvery, chosen by a hash of the input (an input that fails fails again
// when replayed), and on every trace when OPSIGHT_FUZZ_ALL_CHECKS is set (the replay of the
// saved regressions in scripts/run_fuzzers.sh). Measured costs and rates:
// docs/performance.md, "Fuzzer throughput".
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string_view>

#include "analyze/aggregate_tree.hpp"
#include "analyze/breakdown.hpp"
#include "analyze/compare.hpp"
#include "analyze/critical_path.hpp"
#include "io/io.hpp"
#include "report/report.hpp"

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

constexpr size_t kRenderEvery = 4;

bool render_this_input(std::string_view bytes) {
  static const bool all_checks = std::getenv("OPSIGHT_FUZZ_ALL_CHECKS") != nullptr;
  return all_checks || std::hash<std::string_view>{}(bytes) % kRenderEvery == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opsight;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  io::ReadResult result = io::read_chrome_json(bytes);
  if (!result.ok()) return 0;
  const trace::Trace& trace = result.trace;

  analyze::AggregateTree tree = analyze::AggregateTree::build(trace, true);
  uint64_t counted = 0;
  for (const analyze::AggregateNode& node : tree.nodes()) counted += node.duration.count;
  check(counted == trace.slices.size());

  analyze::CriticalPath path = analyze::compute_critical_path(trace);
  if (path.length_ns < (int64_t{1} << 60)) {  // sums saturate on absurd inputs
    int64_t on_path = path.idle_ns;
    for (const analyze::CriticalPathByName& entry : path.by_name) on_path += entry.on_path_ns;
    check(on_path == path.length_ns);
  }

  report::ReportOptions options;
  if (trace.slices.size() > 0) {
    options.breakdown_span = std::string(trace.str(trace.slices.name[0]));
    analyze::Breakdown breakdown = analyze::compute_breakdown(trace, options.breakdown_span);
    check(breakdown.inference_count > 0);
    double sum = 0;
    for (const analyze::BreakdownPhase& phase : breakdown.phases) {
      check(phase.per_inference.min_ns >= 0);
      sum += phase.per_inference.mean_ns;
    }
    if (breakdown.total.max_ns < (int64_t{1} << 50))
      check(std::fabs(sum - breakdown.total.mean_ns) <=
            1e-6 * std::fabs(breakdown.total.mean_ns) + 1e-3);
  }
  analyze::Comparison comparison = analyze::compare_traces(trace, trace);
  for (const analyze::ComparedRow& row : comparison.names)
    check(row.verdict == analyze::Verdict::kSame ||
          row.verdict == analyze::Verdict::kTooFewSamples);
  if (!render_this_input(bytes)) return 0;
  for (auto format :
       {report::OutputFormat::kText, report::OutputFormat::kJson, report::OutputFormat::kCsv}) {
    options.format = format;
    (void)report::render_merged_tree(trace, options);
    (void)report::render_breakdown(trace, options);
    (void)report::render_operators(trace, options);
    (void)report::render_critical_path(trace, options);
    (void)report::render_metrics(trace, options);
  }
  options.format = report::OutputFormat::kText;
  (void)report::render_comparison(comparison, "a", "b", 0.05, options);
  return 0;
}
