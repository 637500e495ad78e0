#include "cli/compare_command.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "analyze/compare.hpp"
#include "cli/output.hpp"
#include "opsight/exit_codes.hpp"
#include "report/report.hpp"
#include "store/trace_source.hpp"

namespace opsight::cli {

std::optional<double> parse_fraction(const std::string& text) {
  std::string trimmed;
  for (char character : text)
    if (character != ' ') trimmed.push_back(character);
  bool percent = !trimmed.empty() && trimmed.back() == '%';
  if (percent) trimmed.pop_back();
  if (trimmed.empty()) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(trimmed.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(value) || value < 0) return std::nullopt;
  if (percent) return value / 100.0;
  // A bare number is a fraction: "0.05" is 5%. "5" is refused rather than guessed.
  if (value > 1.0) return std::nullopt;
  return value;
}

CompareCommand::CompareCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "compare",
      "Compare two runs or trace files per span name and per code path (Mann-Whitney U test); "
      "--fail-on-regression 5% exits 3 when something got slower");
  command_->add_option("a", a_, "The baseline: a trace file or a run (id, latest~1, name)")
      ->required();
  command_->add_option("b", b_, "The candidate: a trace file or a run (id, latest, name)")
      ->required();
  command_->add_option("--fail-on-regression", fail_on_regression_,
                       "Exit 3 if a span is significantly slower by at least this much at the "
                       "median (e.g. 5%)");
  command_
      ->add_option("--min-change", min_change_, "Smallest median change called slower or faster")
      ->capture_default_str();
  command_->add_option("--alpha", alpha_, "Significance level (after Holm's correction)")
      ->check(CLI::Range(1e-12, 0.5))
      ->capture_default_str();
  command_->add_option("--min-samples", min_samples_, "Fewest calls per side to run the test")
      ->check(CLI::Range(size_t{2}, size_t{1} << 40))
      ->capture_default_str();
  command_->add_option("--format", format_, "Output format")
      ->check(CLI::IsMember(report::output_format_names()))
      ->capture_default_str();
  command_->add_option("--limit", limit_, "Show at most N names and 4N code paths (0: all)")
      ->capture_default_str();
  command_->add_option("--store", store_path_,
                       "Run store (default $OPSIGHT_HOME/runs.db, else ~/.opsight/runs.db)");
}

std::optional<int> CompareCommand::run() {
  if (!*command_) return std::nullopt;
  double threshold = -1.0;
  if (!fail_on_regression_.empty()) {
    auto parsed = parse_fraction(fail_on_regression_);
    if (!parsed) {
      print_error("--fail-on-regression: '" + fail_on_regression_ +
                  "' is not a percentage: write 5% or the fraction 0.05");
      return kExitUsage;
    }
    threshold = *parsed;
  }
  auto min_change = parse_fraction(min_change_);
  if (!min_change) {
    print_error("--min-change: '" + min_change_ +
                "' is not a percentage: write 2% or the fraction 0.02");
    return kExitUsage;
  }
  int status = 0;
  auto load = [&](const std::string& argument) -> std::optional<store::LoadedTrace> {
    store::LoadedTrace loaded = store::load_trace_argument(argument, store_path_);
    if (!loaded.ok()) {
      print_error(*loaded.error);
      status = loaded.exit_status;
      return std::nullopt;
    }
    for (const std::string& damage : loaded.damage) {
      std::fprintf(stderr, "opsight: warning: %s (comparing what was read before it)\n",
                   damage.c_str());
      status = kExitDamaged;
    }
    return loaded;
  };
  std::optional<store::LoadedTrace> a = load(a_);
  if (!a) return status;
  std::optional<store::LoadedTrace> b = load(b_);
  if (!b) return status;

  // Timings from two different machines are not a regression: say so first (stderr, so
  // that the JSON and CSV on stdout stay what they are).
  for (const std::string& line : store::machine_differences(*a, *b))
    std::fprintf(stderr, "opsight compare: not the same hardware: %s\n", line.c_str());

  analyze::CompareOptions options;
  options.alpha = alpha_;
  options.min_change = *min_change;
  options.min_samples = min_samples_;
  analyze::Comparison comparison = analyze::compare_traces(a->trace, b->trace, options);
  report::ReportOptions report_options;
  std::string format_error;  // none: --format takes output_format_names() only
  report_options.format =
      report::parse_output_format(format_, &format_error).value_or(report::OutputFormat::kText);
  report_options.limit = limit_;
  std::string out =
      report::render_comparison(comparison, a->label, b->label, threshold, report_options);
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    print_error(std::string("cannot write to standard output: ") + std::strerror(errno));
    return kExitError;
  }
  if (threshold >= 0 && !analyze::regressions(comparison, threshold).empty())
    return kExitRegression;
  return status;
}

}  // namespace opsight::cli
