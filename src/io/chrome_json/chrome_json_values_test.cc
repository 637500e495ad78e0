// The Chrome JSON reader's value conversions against independent references: compact JSON
// against simdjson::minify, hex span ids against std::from_chars, and microsecond
// timestamps against exact decimal arithmetic.
#include "io/chrome_json/chrome_json_values.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <random>
#include <string>

namespace {

using opsight::io::chrome_json::append_compact_json;
using opsight::io::chrome_json::microseconds_to_ns;
using opsight::io::chrome_json::parse_hex64;
using opsight::io::chrome_json::TextBuffer;

// A random JSON value of the kinds append_compact_json writes itself (integers, plain
// strings, booleans, null, arrays and objects of those), pretty-printed with random spaces.
std::string random_value(std::mt19937& random, int depth) {
  auto spaces = [&] { return std::string(random() % 3, ' '); };
  switch (depth > 3 ? random() % 4 : random() % 6) {
    case 0:
      return std::to_string(static_cast<int64_t>(random()) - (1 << 30));
    case 1: {  // printable ASCII but for the quote and the backslash
      std::string text = "\"";
      for (size_t i = random() % 12; i > 0; --i) {
        char c = static_cast<char>(' ' + random() % 95);
        text += (c == '"' || c == '\\') ? 'x' : c;
      }
      return text + "\"";
    }
    case 2:
      return random() % 2 ? "true" : "false";
    case 3:
      return random() % 2 ? "null" : "18446744073709551615";  // a uint64
    case 4: {
      std::string text = "[" + spaces();
      for (size_t i = random() % 4; i > 0; --i)
        text += random_value(random, depth + 1) + spaces() + (i > 1 ? "," + spaces() : "");
      return text + "]";
    }
    default: {
      std::string text = "{" + spaces();
      for (size_t i = random() % 4; i > 0; --i)
        text += "\"k" + std::to_string(i) + "\"" + spaces() + ":" + spaces() +
                random_value(random, depth + 1) + (i > 1 ? "," : "");
      return text + "}";
    }
  }
}

TEST(ChromeJsonValues, CompactJsonIsByteForByteWhatMinifyWrites) {
  std::mt19937 random(2026);
  simdjson::dom::parser parser;
  TextBuffer out;
  for (int round = 0; round < 20000; ++round) {
    simdjson::padded_string json(random_value(random, 0));
    simdjson::dom::element value;
    ASSERT_EQ(parser.parse(json).get(value), simdjson::SUCCESS) << json;
    out.clear();
    ASSERT_TRUE(append_compact_json(value, out)) << json;
    EXPECT_EQ(out.view(), simdjson::minify(value)) << json;
  }
}

TEST(ChromeJsonValues, CompactJsonDeclinesDoublesAndStringsToEscape) {
  simdjson::dom::parser parser;
  TextBuffer out;
  for (const char* json : {"[1, 2.5]", R"({"a": "tab\there"})", R"(["quote\""])", R"(["é"])"}) {
    simdjson::dom::element value;
    ASSERT_EQ(parser.parse(simdjson::padded_string(std::string(json))).get(value),
              simdjson::SUCCESS);
    out.clear();
    EXPECT_FALSE(append_compact_json(value, out)) << json;
  }
}

TEST(ChromeJsonValues, HexSpanIdsMatchFromChars) {
  std::mt19937_64 random(7);
  const char digits[] = "0123456789abcdefABCDEF";
  for (int round = 0; round < 100000; ++round) {
    std::string text;
    for (size_t i = 1 + random() % 16; i > 0; --i) text += digits[random() % 22];
    bool corrupt = random() % 4 == 0;
    if (corrupt) text[random() % text.size()] = "g/:@G`\x80 "[random() % 8];
    uint64_t expected = 0;
    auto parsed = std::from_chars(text.data(), text.data() + text.size(), expected, 16);
    bool valid = parsed.ec == std::errc{} && parsed.ptr == text.data() + text.size();
    auto value = parse_hex64(text);
    ASSERT_EQ(value.has_value(), valid) << text;
    if (valid) {
      EXPECT_EQ(*value, expected) << text;
    }
  }
  EXPECT_FALSE(parse_hex64("").has_value());
  EXPECT_FALSE(parse_hex64("00000000000000001").has_value());  // 17 digits
}

TEST(ChromeJsonValues, MicrosecondsWithThreeDecimalsBecomeExactNanoseconds) {
  simdjson::dom::parser parser;
  std::mt19937_64 random(11);
  for (int round = 0; round < 100000; ++round) {
    // Up to 2^42 us (about 51 days since boot, in microseconds) and three decimals.
    int64_t whole = static_cast<int64_t>(random() % (int64_t{1} << 42));
    int64_t thousandths = static_cast<int64_t>(random() % 1000);
    char text[48];
    int length = std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(whole),
                               static_cast<long long>(thousandths));
    simdjson::dom::element value;
    ASSERT_EQ(parser.parse(simdjson::padded_string(std::string(text, length))).get(value),
              simdjson::SUCCESS);
    int64_t nanoseconds = 0;
    ASSERT_TRUE(microseconds_to_ns(value, &nanoseconds)) << text;
    EXPECT_EQ(nanoseconds, whole * 1000 + thousandths) << text;
  }
  simdjson::dom::element huge;
  ASSERT_EQ(parser.parse(simdjson::padded_string(std::string("1e300"))).get(huge),
            simdjson::SUCCESS);
  int64_t ignored = 0;
  EXPECT_FALSE(microseconds_to_ns(huge, &ignored));
}

}  // namespace
