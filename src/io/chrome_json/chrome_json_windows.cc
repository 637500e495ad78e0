#include "io/chrome_json/chrome_json_windows.hpp"

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

std::array<WindowParser, kDecodingThreads>& window_parsers() {
  static thread_local std::array<WindowParser, kDecodingThreads> parsers;
  return parsers;
}

WindowPipeline::WindowPipeline(std::string_view text,
                               const std::vector<std::pair<size_t, size_t>>& windows,
                               std::string_view prefix, std::string_view suffix, bool object_form,
                               const EventDecoder& decoder, bool use_helper_thread)
    : text_(text),
      windows_(windows),
      prefix_(prefix),
      suffix_(suffix),
      object_form_(object_form),
      parsers_(window_parsers()),
      caller_decoder_(decoder),
      helper_decoder_(decoder) {
  if (use_helper_thread && windows_.size() > 1) helper_ = std::thread([this] { work_as_helper(); });
}

WindowPipeline::~WindowPipeline() {
  if (!helper_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  helper_.join();
}

std::optional<size_t> WindowPipeline::take_window() {
  if (failed_ || taken_ >= windows_.size() || taken_ >= released_ + kWindowsInFlight)
    return std::nullopt;
  return taken_++;
}

void WindowPipeline::mark_decoded(size_t window, bool ok) {
  Slot& slot = slots_[window % kWindowsInFlight];
  slot.ok = ok;
  slot.window = window;
  if (!ok) failed_ = true;
}

const DecodedEvents* WindowPipeline::next(size_t index) {
  Slot& slot = slots_[index % kWindowsInFlight];
  std::unique_lock lock(mutex_);
  while (slot.window != index) {
    if (auto window = take_window()) {
      lock.unlock();
      bool ok = decode(*window, parsers_[0], caller_decoder_);
      lock.lock();
      mark_decoded(*window, ok);
      continue;
    }
    if (failed_ && index >= taken_) return nullptr;  // never taken: an earlier window failed
    changed_.wait(lock);
  }
  return slot.ok ? &slot.events : nullptr;
}

void WindowPipeline::release(size_t index) {
  {
    std::lock_guard lock(mutex_);
    released_ = index + 1;
  }
  changed_.notify_all();
}

bool WindowPipeline::decode(size_t index, WindowParser& parser, EventDecoder& decoder) {
  DecodedEvents& out = slots_[index % kWindowsInFlight].events;
  out.clear();
  auto [begin, end] = windows_[index];
  simdjson::dom::element root;
  simdjson::dom::array events;
  if (parser.parse(prefix_, text_.substr(begin, end - begin), suffix_, &root) != simdjson::SUCCESS)
    return false;
  if (object_form_ ? root[""].get(events) != simdjson::SUCCESS
                   : root.get(events) != simdjson::SUCCESS)
    return false;
  out.events.reserve(events.size());
  for (simdjson::dom::element event : events) decoder.decode(event, out);
  return true;
}

void WindowPipeline::work_as_helper() {
  std::unique_lock lock(mutex_);
  while (true) {
    std::optional<size_t> window;
    changed_.wait(lock, [&] {
      if (stopping_ || failed_ || taken_ >= windows_.size()) return true;
      window = take_window();
      return window.has_value();
    });
    if (!window) return;
    lock.unlock();
    bool ok = false;
    try {
      ok = decode(*window, parsers_[1], helper_decoder_);
    } catch (...) {
      // Out of memory, most likely: the window counts as failed, and the reader's careful
      // path then reads the input again on the calling thread (or says why it cannot).
    }
    lock.lock();
    mark_decoded(*window, ok);
    changed_.notify_all();
  }
}

}  // namespace opsight::io::chrome_json
