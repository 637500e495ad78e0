// Test-only helpers shared by the trace module's tests.
#pragma once

#include <vector>

namespace opsight::trace::testing {

// Columns use their own allocator; compare their contents as plain vectors.
template <typename ColumnType>
std::vector<typename ColumnType::value_type> values(const ColumnType& column) {
  return {column.begin(), column.end()};
}

}  // namespace opsight::trace::testing
