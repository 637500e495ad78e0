#include "io/chrome_json/chrome_json_repair.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace opsight::io::chrome_json {

namespace {

// What the byte scanners below need to know of a byte, looked up in one table: one load
// per byte instead of a chain of comparisons.
enum ByteClass : uint8_t {
  kOtherByte,
  kWhitespace,  // ' ' '\t' '\n' '\r'
  kQuote,       // '"'
  kOpen,        // '{' '['
  kClose,       // '}' ']'
  kComma,
  kColon,
  kScalarByte,  // what a number or a literal is made of: 0-9 a-z A-Z - + .
};

constexpr std::array<uint8_t, 256> make_byte_classes() {
  std::array<uint8_t, 256> classes{};
  for (int c = '0'; c <= '9'; ++c) classes[c] = kScalarByte;
  for (int c = 'a'; c <= 'z'; ++c) classes[c] = kScalarByte;
  for (int c = 'A'; c <= 'Z'; ++c) classes[c] = kScalarByte;
  for (char c : {'-', '+', '.'}) classes[static_cast<uint8_t>(c)] = kScalarByte;
  for (char c : {' ', '\t', '\n', '\r'}) classes[static_cast<uint8_t>(c)] = kWhitespace;
  classes['"'] = kQuote;
  classes['{'] = classes['['] = kOpen;
  classes['}'] = classes[']'] = kClose;
  classes[','] = kComma;
  classes[':'] = kColon;
  return classes;
}
constexpr std::array<uint8_t, 256> kByteClasses = make_byte_classes();

ByteClass class_of(char c) { return static_cast<ByteClass>(kByteClasses[static_cast<uint8_t>(c)]); }

// The bytes inside a string that mend_sloppy_json looks at: '\\', '"' and control characters.
constexpr std::array<bool, 256> make_string_specials() {
  std::array<bool, 256> special{};
  for (int c = 0; c < 0x20; ++c) special[c] = true;
  special['\\'] = special['"'] = true;
  return special;
}
constexpr std::array<bool, 256> kStringSpecial = make_string_specials();

}  // namespace

bool is_json_whitespace(char c) { return class_of(c) == kWhitespace; }

size_t skip_whitespace(std::string_view text, size_t pos) {
  while (pos < text.size() && is_json_whitespace(text[pos])) ++pos;
  return pos;
}

// ---- Byte-level scanning (used only when something went wrong) --------------------------

// Returns the position just after the string that starts at `pos` (text[pos] == '"'), or
// npos if the input ends inside it. A quote ends the string when an even number of
// backslashes precedes it (each backslash escapes the byte after it); memchr finds the
// candidates.
size_t skip_string(std::string_view text, size_t pos) {
  const char* data = text.data();
  const size_t body = pos + 1;
  for (size_t from = body; from < text.size();) {
    const void* found = std::memchr(data + from, '"', text.size() - from);
    if (found == nullptr) break;
    const size_t quote = static_cast<size_t>(static_cast<const char*>(found) - data);
    size_t backslashes = 0;
    while (quote - backslashes > body && data[quote - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return quote + 1;
    from = quote + 1;
  }
  return std::string_view::npos;
}

bool is_scalar_char(char c) { return class_of(c) == kScalarByte; }

// Returns the position just after the JSON value that starts at `pos`, or npos if the
// input ends inside it. Does not validate; it only follows strings and brackets.
size_t skip_value(std::string_view text, size_t pos) {
  if (pos >= text.size()) return std::string_view::npos;
  char first = text[pos];
  if (first == '"') return skip_string(text, pos);
  if (first != '{' && first != '[') {
    while (pos < text.size() && is_scalar_char(text[pos])) ++pos;
    return pos;
  }
  size_t depth = 0;
  while (pos < text.size()) {
    char c = text[pos];
    if (c == '"') {
      pos = skip_string(text, pos);
      if (pos == std::string_view::npos) return pos;
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return pos + 1;
    }
    ++pos;
  }
  return std::string_view::npos;
}

// Byte offset of the event array: the document itself for the array form, the value of
// "traceEvents" (whatever it is) for the object form.
std::optional<size_t> find_event_array(std::string_view text) {
  size_t pos = skip_whitespace(text, 0);
  if (pos >= text.size()) return std::nullopt;
  if (text[pos] == '[') return pos;
  if (text[pos] != '{') return std::nullopt;
  pos = skip_whitespace(text, pos + 1);
  while (pos < text.size() && text[pos] == '"') {
    size_t key_end = skip_string(text, pos);
    if (key_end == std::string_view::npos) return std::nullopt;
    std::string_view key = text.substr(pos + 1, key_end - pos - 2);
    // An escaped key ("trace\u0045vents") would need decoding to compare: leave such
    // documents to the parser.
    if (key.find('\\') != std::string_view::npos) return std::nullopt;
    pos = skip_whitespace(text, key_end);
    if (pos >= text.size() || text[pos] != ':') return std::nullopt;
    pos = skip_whitespace(text, pos + 1);
    if (key == "traceEvents") return pos < text.size() ? std::optional<size_t>(pos) : std::nullopt;
    pos = skip_value(text, pos);
    if (pos == std::string_view::npos) return std::nullopt;
    pos = skip_whitespace(text, pos);
    if (pos >= text.size() || text[pos] != ',') return std::nullopt;
    pos = skip_whitespace(text, pos + 1);
  }
  return std::nullopt;
}

// Byte offset where element `index` of the event array starts.
std::optional<size_t> find_event_offset(std::string_view text, size_t index) {
  std::optional<size_t> array_start = find_event_array(text);
  if (!array_start || text[*array_start] != '[') return std::nullopt;
  size_t pos = skip_whitespace(text, *array_start + 1);
  for (size_t i = 0; i < index; ++i) {
    pos = skip_value(text, pos);
    if (pos == std::string_view::npos) return std::nullopt;
    pos = skip_whitespace(text, pos);
    if (pos >= text.size() || text[pos] != ',') return std::nullopt;
    pos = skip_whitespace(text, pos + 1);
  }
  if (pos >= text.size()) return std::nullopt;
  return pos;
}

// Follows brackets and strings through `text` and remembers the last point where the
// input could be closed into valid JSON: just after a complete array element or object
// member value, or just after an opening bracket, at the level of the event array or
// above (so a cut event is dropped whole rather than kept in part). Every container opened
// after that point is still open at the end, so the containers open there are a prefix of
// those open at the end of the input.
RepairPoint find_repair_point(std::string_view text) {
  RepairPoint result;
  std::string open_brackets;        // '{' or '[' per open container
  std::vector<bool> expecting_key;  // per open container: an object waiting for a key
  size_t safe_end = 0;
  size_t safe_depth = 0;
  // Events sit at depth 2 in the object form ({"traceEvents": [event...]}), 1 in the array.
  size_t first = skip_whitespace(text, 0);
  size_t event_array_depth = first < text.size() && text[first] == '{' ? 2 : 1;
  auto value_completed = [&](size_t end) {
    if (open_brackets.size() > event_array_depth) return;
    safe_end = end;
    safe_depth = open_brackets.size();
  };
  size_t pos = 0;
  bool ends_inside_value = false;  // a string, number or literal runs to the end
  while (pos < text.size() && !ends_inside_value) {
    const char c = text[pos];
    switch (class_of(c)) {
      case kWhitespace:
      case kColon:
        ++pos;
        break;
      case kQuote: {
        size_t end = skip_string(text, pos);
        if (end == std::string_view::npos) {
          ends_inside_value = true;
          break;
        }
        bool is_key = !expecting_key.empty() && expecting_key.back();
        if (is_key) {
          expecting_key.back() = false;
        } else {
          value_completed(end);
        }
        pos = end;
        break;
      }
      case kOpen:
        open_brackets.push_back(c);
        expecting_key.push_back(c == '{');
        if (open_brackets.size() > kMaxNestingDepth &&
            result.too_deep_offset == std::string_view::npos)
          result.too_deep_offset = pos;
        ++pos;
        value_completed(pos);
        break;
      case kClose:
        if (!open_brackets.empty()) {
          open_brackets.pop_back();
          expecting_key.pop_back();
        }
        ++pos;
        value_completed(pos);
        if (open_brackets.empty()) return result;  // the top-level value is complete
        break;
      case kComma:
        if (!open_brackets.empty() && open_brackets.back() == '{') expecting_key.back() = true;
        ++pos;
        break;
      case kScalarByte: {
        size_t end = pos + 1;
        while (end < text.size() && is_scalar_char(text[end])) ++end;
        if (end == text.size()) {  // a number or literal that may have been cut
          ends_inside_value = true;
          break;
        }
        if (open_brackets.empty()) return result;
        value_completed(end);
        pos = end;
        break;
      }
      case kOtherByte:
        ++pos;  // a byte that belongs nowhere; the strict parse will report it
        break;
    }
  }
  if (open_brackets.empty() && safe_end == 0) return result;  // nothing opened at all
  result.input_is_cut = true;
  result.keep_bytes = safe_end;
  for (size_t i = safe_depth; i > 0; --i)
    result.closing_brackets.push_back(open_brackets[i - 1] == '{' ? '}' : ']');
  size_t rest = safe_end;
  while (rest < text.size() && (is_json_whitespace(text[rest]) || text[rest] == ',')) ++rest;
  if (rest < text.size()) result.cut_value_offset = rest;
  return result;
}

// SAX handler that accepts everything and remembers the first parse error; used only to
// find the byte offset of an error that simdjson found.
struct FirstErrorFinder : nlohmann::json_sax<nlohmann::json> {
  bool failed = false;
  size_t position = 0;
  std::string message;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t error_position, const std::string& last_token,
                   const nlohmann::detail::exception& error) override {
    failed = true;
    // error_position counts the bytes read, up to the end of the offending token. For a
    // whole string or number token, point at its first byte; otherwise (an invalid
    // literal, whose token text may include what preceded it) at the last byte read.
    bool is_string =
        last_token.size() >= 2 && last_token.front() == '"' && last_token.back() == '"';
    bool is_number =
        !last_token.empty() && last_token.find_first_not_of("0123456789.eE+-") == std::string::npos;
    bool whole_token = (is_string || is_number) && last_token.size() <= error_position;
    if (whole_token) {
      position = error_position - last_token.size();
    } else {
      position = error_position > 0 ? error_position - 1 : 0;
    }
    message = error.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..."
    if (size_t bracket = message.find("] "); bracket != std::string::npos)
      message.erase(0, bracket + 2);
    return false;
  }
};

Diagnostic describe_invalid_json(std::string_view text, simdjson::error_code simdjson_error,
                                 size_t offset_base, const RepairPoint* scan) {
  Diagnostic diagnostic;
  if (simdjson_error == simdjson::DEPTH_ERROR) {
    const size_t too_deep_offset =
        (scan != nullptr ? *scan : find_repair_point(text)).too_deep_offset;
    diagnostic.message =
        "invalid JSON: nested deeper than " + std::to_string(kMaxNestingDepth) + " levels";
    if (too_deep_offset != std::string_view::npos) {
      diagnostic.byte_offset = offset_base + too_deep_offset;
      diagnostic.has_offset = true;
    }
    return diagnostic;
  }
  FirstErrorFinder finder;
  try {
    nlohmann::json::sax_parse(text.begin(), text.end(), &finder);
  } catch (...) {
    finder.failed = false;
  }
  if (finder.failed) {
    diagnostic.message = "invalid JSON: " + finder.message;
    diagnostic.byte_offset = offset_base + finder.position;
    diagnostic.has_offset = true;
  } else {
    diagnostic.message = std::string("invalid JSON: ") + simdjson::error_message(simdjson_error);
  }
  return diagnostic;
}

namespace {

// What split_array_elements does with each bracket or comma outside strings, in order: the
// depth count, the cut of windows at top-level commas, and the end of the array. Shared by
// the portable byte loop and the vectorised block scan, so both cut the same windows.
class ArraySplitter {
 public:
  enum class Step { kContinue, kDone, kFail };

  ArraySplitter(std::string_view text, size_t array_start, size_t window_bytes)
      : text_(text),
        array_start_(array_start),
        window_bytes_(window_bytes),
        window_start_(array_start + 1) {}

  __attribute__((always_inline)) Step structural(size_t pos, char c) {
    if (c == '{' || c == '[') {
      ++depth_;
      return Step::kContinue;
    }
    if (c == '}' || c == ']') {
      if (depth_ > 0) {
        --depth_;
        return Step::kContinue;
      }
      if (c != ']') return Step::kFail;
      if (skip_whitespace(text_, window_start_) < pos) {
        result_.windows.emplace_back(window_start_, pos);
      } else if (window_start_ > array_start_ + 1) {
        return Step::kFail;  // "...,]": a trailing comma, which the parser must judge
      }
      result_.array_end = pos + 1;
      return Step::kDone;
    }
    if (depth_ == 0 && pos - window_start_ >= window_bytes_) {  // ','
      result_.windows.emplace_back(window_start_, pos);
      window_start_ = pos + 1;
    }
    return Step::kContinue;
  }

  size_t depth() const { return depth_; }
  void add_to_depth(size_t opened, size_t closed) { depth_ = depth_ + opened - closed; }
  // Whether a comma at depth 0 somewhere before `end` could close the current window.
  bool window_may_end_before(size_t end) const { return end > window_start_ + window_bytes_; }
  ArrayWindows take_result() { return std::move(result_); }

 private:
  std::string_view text_;
  size_t array_start_;
  size_t window_bytes_;
  size_t window_start_;
  size_t depth_ = 0;
  ArrayWindows result_;
};

bool is_bracket_or_comma(char c) {
  return c == '{' || c == '[' || c == '}' || c == ']' || c == ',';
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPSIGHT_SPLIT_WITH_AVX2 1

// Bit i set for each byte i of the 64 bytes held in `low` and `high` that equals `c`.
__attribute__((target("avx2"))) inline uint64_t bytes_equal(__m256i low, __m256i high, char c) {
  __m256i wanted = _mm256_set1_epi8(c);
  auto low_bits = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(low, wanted)));
  auto high_bits = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(high, wanted)));
  return low_bits | (static_cast<uint64_t>(high_bits) << 32);
}

// Bit i = XOR of bits 0..i: with the quote bits, marks the bytes inside strings (the
// opening quote included, the closing one not).
inline uint64_t prefix_xor(uint64_t bits) {
  bits ^= bits << 1;
  bits ^= bits << 2;
  bits ^= bits << 4;
  bits ^= bits << 8;
  bits ^= bits << 16;
  bits ^= bits << 32;
  return bits;
}

// The scan 64 bytes at a time: quotes give the string mask of a block at once, and a
// block's brackets only change the depth count unless the block may end the array (the
// depth could reach zero) or close a window; only those blocks are walked bit by bit.
// Blocks with a backslash (rare in traces) are walked byte by byte to follow escapes.
__attribute__((target("avx2,popcnt"))) std::optional<ArrayWindows> split_array_elements_avx2(
    std::string_view text, size_t array_start, size_t window_bytes) {
  ArraySplitter splitter(text, array_start, window_bytes);
  const char* data = text.data();
  const size_t size = text.size();
  bool in_string = false;
  bool escape_pending = false;  // inside a string, the previous byte was an escaping '\'
  alignas(32) char tail[64];
  for (size_t base = array_start + 1; base < size; base += 64) {
    const size_t length = std::min<size_t>(64, size - base);
    const char* block = data + base;
    if (length < 64) {
      std::memset(tail, ' ', sizeof tail);
      std::memcpy(tail, block, length);
      block = tail;
    }
    __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block));
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32));
    if (escape_pending || bytes_equal(low, high, '\\') != 0) {
      for (size_t i = 0; i < length; ++i) {
        char c = block[i];
        if (in_string) {
          if (escape_pending) {
            escape_pending = false;
          } else if (c == '\\') {
            escape_pending = true;
          } else if (c == '"') {
            in_string = false;
          }
        } else if (c == '"') {
          in_string = true;
        } else if (is_bracket_or_comma(c)) {
          auto step = splitter.structural(base + i, c);
          if (step == ArraySplitter::Step::kDone) return splitter.take_result();
          if (step == ArraySplitter::Step::kFail) return std::nullopt;
        }
      }
      continue;
    }
    uint64_t inside = prefix_xor(bytes_equal(low, high, '"')) ^ (in_string ? ~uint64_t{0} : 0);
    in_string = (inside >> 63) != 0;
    // '{' and '[' (0x7B, 0x5B), '}' and ']' (0x7D, 0x5D) differ only in bit 0x20.
    __m256i case_bit = _mm256_set1_epi8(0x20);
    __m256i low_folded = _mm256_or_si256(low, case_bit);
    __m256i high_folded = _mm256_or_si256(high, case_bit);
    uint64_t opens = bytes_equal(low_folded, high_folded, '{') & ~inside;
    uint64_t closes = bytes_equal(low_folded, high_folded, '}') & ~inside;
    uint64_t commas = bytes_equal(low, high, ',') & ~inside;
    auto open_count = static_cast<size_t>(__builtin_popcountll(opens));
    auto close_count = static_cast<size_t>(__builtin_popcountll(closes));
    // Commas matter only once the window is long enough to end at one.
    if (!splitter.window_may_end_before(base + 64)) commas = 0;
    if (splitter.depth() >= close_count && commas == 0) {
      splitter.add_to_depth(open_count, close_count);
      continue;
    }
    for (uint64_t bits = opens | closes | commas; bits != 0; bits &= bits - 1) {
      auto i = static_cast<size_t>(__builtin_ctzll(bits));
      auto step = splitter.structural(base + i, block[i]);
      if (step == ArraySplitter::Step::kDone) return splitter.take_result();
      if (step == ArraySplitter::Step::kFail) return std::nullopt;
    }
  }
  return std::nullopt;
}
#endif

}  // namespace

std::optional<ArrayWindows> split_array_elements_portable(std::string_view text, size_t array_start,
                                                          size_t window_bytes) {
  ArraySplitter splitter(text, array_start, window_bytes);
  const char* data = text.data();
  const size_t size = text.size();
  for (size_t pos = array_start + 1; pos < size; ++pos) {
    char c = data[pos];
    if (c == '"') {
      // Jump to the closing quote: one not preceded by an odd run of backslashes.
      while (true) {
        const void* quote = std::memchr(data + pos + 1, '"', size - pos - 1);
        if (quote == nullptr) return std::nullopt;
        pos = static_cast<size_t>(static_cast<const char*>(quote) - data);
        size_t backslashes = 0;
        while (data[pos - 1 - backslashes] == '\\') ++backslashes;
        if (backslashes % 2 == 0) break;
      }
    } else if (is_bracket_or_comma(c)) {
      auto step = splitter.structural(pos, c);
      if (step == ArraySplitter::Step::kDone) return splitter.take_result();
      if (step == ArraySplitter::Step::kFail) return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<ArrayWindows> split_array_elements(std::string_view text, size_t array_start,
                                                 size_t window_bytes) {
#ifdef OPSIGHT_SPLIT_WITH_AVX2
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  if (has_avx2) return split_array_elements_avx2(text, array_start, window_bytes);
#endif
  return split_array_elements_portable(text, array_start, window_bytes);
}

size_t MendedOffsets::original(size_t copy_offset) const {
  auto after =
      std::upper_bound(shifts.begin(), shifts.end(), copy_offset,
                       [](size_t offset, const auto& shift) { return offset < shift.first; });
  if (after == shifts.begin()) return copy_offset;
  int64_t shifted = static_cast<int64_t>(copy_offset) + (after - 1)->second;
  return shifted < 0 ? 0 : static_cast<size_t>(shifted);
}

std::optional<std::string> mend_sloppy_json(std::string_view text, size_t* mended,
                                            MendedOffsets* edits) {
  static constexpr char kHex[] = "0123456789abcdef";
  if (edits != nullptr) edits->shifts.clear();
  std::string out;
  size_t changes = 0;
  bool in_string = false;
  size_t copied = 0;  // text[0, copied) is already in `out`
  auto flush = [&](size_t up_to) {
    if (out.empty()) out.reserve(text.size() + 64);
    out.append(text.data() + copied, up_to - copied);
    copied = up_to;
  };
  // After an edit, the copy's bytes from out.size() on stand `copied - out.size()` bytes
  // further in the input.
  auto note_edit = [&] {
    ++changes;
    if (edits != nullptr)
      edits->shifts.emplace_back(out.size(),
                                 static_cast<int64_t>(copied) - static_cast<int64_t>(out.size()));
  };
  for (size_t pos = 0; pos < text.size(); ++pos) {
    char c = text[pos];
    if (in_string) {
      if (!kStringSpecial[static_cast<uint8_t>(c)]) continue;  // most bytes of a string
      if (c == '\\') {
        ++pos;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        flush(pos);
        const char escaped[6] = {'\\', 'u', '0', '0', kHex[(c >> 4) & 0xF], kHex[c & 0xF]};
        out.append(escaped, sizeof escaped);
        copied = pos + 1;
        note_edit();
      }
      continue;
    }
    const ByteClass byte_class = class_of(c);
    if (byte_class == kQuote) {
      in_string = true;
    } else if (byte_class == kComma) {
      size_t next = skip_whitespace(text, pos + 1);
      if (next < text.size() && (text[next] == ']' || text[next] == '}')) {
        flush(pos);
        copied = pos + 1;
        note_edit();
      }
    }
  }
  *mended = changes;
  if (changes == 0) return std::nullopt;
  flush(text.size());
  return out;
}

}  // namespace opsight::io::chrome_json
