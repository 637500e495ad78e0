// `--window FROM:TO` of `opsight report` and `opsight convert` (and Python's
// opsight.load(window=...)): a time window of a trace, in
// time from its first event, each end a number with a unit (ns, us, ms or s), e.g.
// "2.5s:3.0s" or "0:500ms" (a bare 0 needs no unit). The native reader decodes only the
// chunks the window needs (docs/native-format.md, "Time index").
#pragma once

#include <optional>
#include <string>

#include "io/io.hpp"

namespace opsight::io {

// The window, or nullopt with *problem saying what is wrong ("--window 3s:2s: the end comes
// before the start", ...), naming the option.
std::optional<TimeWindow> parse_time_window(const std::string& text, std::string* problem);

}  // namespace opsight::io
