#include "io/chrome_json_windows.hpp"

#include <cstring>

namespace opsight::io::chrome_json {

std::unique_ptr<char[]> padded_copy(std::string_view text, std::string_view suffix,
                                    size_t* length) {
  *length = text.size() + suffix.size();
  std::unique_ptr<char[]> buffer(new char[*length + simdjson::SIMDJSON_PADDING]);
  if (!text.empty()) std::memcpy(buffer.get(), text.data(), text.size());
  if (!suffix.empty()) std::memcpy(buffer.get() + text.size(), suffix.data(), suffix.size());
  std::memset(buffer.get() + *length, 0, simdjson::SIMDJSON_PADDING);
  return buffer;
}

simdjson::error_code WindowParser::parse(std::string_view prefix, std::string_view body,
                                         std::string_view suffix, simdjson::dom::element* root) {
  buffer.clear();
  buffer.reserve(prefix.size() + body.size() + suffix.size() + simdjson::SIMDJSON_PADDING);
  buffer.append(prefix).append(body).append(suffix);
  size_t length = buffer.size();
  buffer.append(simdjson::SIMDJSON_PADDING, '\0');
  return parser.parse(buffer.data(), length, false).get(*root);
}

std::array<WindowParser, kParsersInFlight>& window_parsers() {
  static thread_local std::array<WindowParser, kParsersInFlight> parsers;
  return parsers;
}

}  // namespace opsight::io::chrome_json
