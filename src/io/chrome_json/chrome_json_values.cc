#include "io/chrome_json/chrome_json_values.hpp"

#include <charconv>

namespace opsight::io::chrome_json {
namespace {

template <typename Integer>
void put_integer(Integer number, TextBuffer& out) {
  char digits[24];
  auto written = std::to_chars(digits, digits + sizeof digits, number);
  out.put(std::string_view(digits, static_cast<size_t>(written.ptr - digits)));
}

}  // namespace

std::optional<double> number_in_text(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+' || (text.front() == '-' && text.size() == 1))
    return std::nullopt;
  double number = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

std::string scalar_to_string(element value) {
  switch (value.type()) {
    case element_type::STRING:
      return std::string(value.get_string().value_unsafe());
    case element_type::INT64:
      return std::to_string(value.get_int64().value_unsafe());
    case element_type::UINT64:
      return std::to_string(value.get_uint64().value_unsafe());
    case element_type::BOOL:
      return value.get_bool().value_unsafe() ? "true" : "false";
    case element_type::NULL_VALUE:
      return "null";
    default:
      return simdjson::minify(value);  // doubles (shortest form), arrays, objects
  }
}

bool append_plain_json_string(std::string_view text, TextBuffer& out) {
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7F || c == '"' || c == '\\') return false;
  }
  out.put('"');
  out.put(text);
  out.put('"');
  return true;
}

bool append_compact_json(element value, TextBuffer& out) {
  switch (value.type()) {
    case element_type::ARRAY: {
      simdjson::dom::array items = value.get_array().value_unsafe();
      out.put('[');
      bool first = true;
      for (element item : items) {
        if (!first) out.put(',');
        first = false;
        if (!append_compact_json(item, out)) return false;
      }
      out.put(']');
      return true;
    }
    case element_type::OBJECT: {
      simdjson::dom::object members = value.get_object().value_unsafe();
      out.put('{');
      bool first = true;
      for (auto [key, item] : members) {
        if (!first) out.put(',');
        first = false;
        if (!append_plain_json_string(key, out)) return false;
        out.put(':');
        if (!append_compact_json(item, out)) return false;
      }
      out.put('}');
      return true;
    }
    case element_type::INT64:
      put_integer(value.get_int64().value_unsafe(), out);
      return true;
    case element_type::UINT64:
      put_integer(value.get_uint64().value_unsafe(), out);
      return true;
    case element_type::BOOL:
      out.put(value.get_bool().value_unsafe() ? "true" : "false");
      return true;
    case element_type::NULL_VALUE:
      out.put("null");
      return true;
    case element_type::STRING:
      return append_plain_json_string(value.get_string().value_unsafe(), out);
    default:
      return false;
  }
}

}  // namespace opsight::io::chrome_json
