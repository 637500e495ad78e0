// The items of the comma-separated lists the exporters read (an HTTP Accept header and
// OTEL_RESOURCE_ATTRIBUTES) may be padded with spaces and tabs
// (HTTP's "optional whitespace", RFC 9110 section 5.6.3), which is not part of the item.
#pragma once

#include <string_view>

namespace opsight::exporting {

inline std::string_view trim_optional_whitespace(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace opsight::exporting
