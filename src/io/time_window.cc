#include "io/time_window.hpp"

#include <cmath>
#include <cstdlib>
#include <string_view>

namespace opsight::io {

namespace {

// One end: a non-negative number and its unit, in ns. nullopt with *problem set.
std::optional<int64_t> parse_window_end(std::string_view text, std::string* problem) {
  std::string value(text);
  size_t unit_at = value.find_first_not_of("0123456789.");
  std::string number = value.substr(0, unit_at);
  std::string unit = unit_at == std::string::npos ? "" : value.substr(unit_at);
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
    *problem = "'" + value + "' is not a time (a number and a unit: ns, us, ms or s)";
    return std::nullopt;
  }
  double amount = std::strtod(number.c_str(), nullptr);
  double scale = 0;
  if (unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else if (unit.empty() && amount == 0)
    scale = 1;
  if (scale == 0) {
    *problem = unit.empty()
                   ? "'" + value + "' needs a unit (ns, us, ms or s)"
                   : "'" + value + "' has an unknown unit '" + unit + "' (ns, us, ms or s)";
    return std::nullopt;
  }
  double ns = std::round(amount * scale);
  if (!(ns < 9.2e18)) {
    *problem = "'" + value + "' is too large";
    return std::nullopt;
  }
  return static_cast<int64_t>(ns);
}

}  // namespace

std::optional<TimeWindow> parse_time_window(const std::string& text, std::string* problem) {
  std::string why;
  size_t colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos) {
    *problem = "--window " + text + ": expected FROM:TO, e.g. 2.5s:3s (time from the trace's " +
               "first event; units ns, us, ms or s)";
    return std::nullopt;
  }
  auto from = parse_window_end(std::string_view(text).substr(0, colon), &why);
  std::optional<int64_t> to;
  if (from) to = parse_window_end(std::string_view(text).substr(colon + 1), &why);
  if (!from || !to) {
    *problem = "--window " + text + ": " + why;
    return std::nullopt;
  }
  if (*to < *from) {
    *problem = "--window " + text + ": the end comes before the start";
    return std::nullopt;
  }
  return TimeWindow{*from, *to};
}

}  // namespace opsight::io
