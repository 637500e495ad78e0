// What the Chrome JSON tests share: argument values as golden text.
#pragma once

#include <sstream>
#include <string>

#include "trace/trace.hpp"

namespace opsight::io::testing {

// 8, 0.5d, 'text', true: an argument's value as the golden rows write it.
inline std::string arg_value_text(const trace::Trace& trace, const trace::ArgValue& value) {
  switch (value.type) {
    case trace::ArgType::kInt:
      return std::to_string(value.int_value);
    case trace::ArgType::kDouble: {
      std::ostringstream out;
      out << value.double_value << "d";
      return out.str();
    }
    case trace::ArgType::kString:
      return "'" + std::string(trace.str(value.string_value)) + "'";
    case trace::ArgType::kBool:
      return value.int_value != 0 ? "true" : "false";
  }
  return "?";
}

}  // namespace opsight::io::testing
