// `opsight compare A B`: two traces (files or runs of the store) compared per span name
// and per code path with the Mann-Whitney U test (src/analyze/compare.hpp), printed as
// text, JSON or CSV. With --fail-on-regression 5% it exits 3 when a span got slower by at
// least that much at the median (significantly), listing the regressions: a CI gate.
//
// Exit status: 0 compared (no regression over the threshold); 3 regressions found; 1 an
// input is unusable; 2 an input was damaged (what was whole is compared); 64 bad usage.
//
// Thread-safety: none; one per process, used by main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>

namespace opsight::cli {

class CompareCommand {
 public:
  explicit CompareCommand(CLI::App& app);
  CompareCommand(const CompareCommand&) = delete;
  CompareCommand& operator=(const CompareCommand&) = delete;

  // The exit status when `compare` was the parsed command; nullopt otherwise.
  std::optional<int> run();

 private:
  CLI::App* command_ = nullptr;
  std::string a_, b_;
  std::string fail_on_regression_;  // "5%", "0.05" or empty
  std::string min_change_ = "2%";
  double alpha_ = 0.01;
  size_t min_samples_ = 5;
  std::string format_ = "text";
  size_t limit_ = 0;
  std::string store_path_;
};

// Parses "5%", "5 %" or the fraction "0.05" into a fraction (0.05); nullopt if it is not a
// non-negative number, or a bare number above 1 ("5": write 5% or 0.05).
std::optional<double> parse_fraction(const std::string& text);

}  // namespace opsight::cli
