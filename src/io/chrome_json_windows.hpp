// The windows of the Chrome JSON reader's fast path: the event array is cut into windows of
// about 1 MiB of whole events, each parsed as a document of its own by a warm simdjson
// parser, either on the calling thread or ahead of it on a helper thread.
#pragma once

#include <simdjson.h>

#include <array>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace opsight::io::chrome_json {

// Copies `text` (plus `suffix`) into a buffer padded as simdjson requires.
std::unique_ptr<char[]> padded_copy(std::string_view text, std::string_view suffix, size_t* length);

// A reusable buffer padded as simdjson requires, and a parser: the fast path parses the
// event array a window at a time, so both stay small, warm in cache, and free of the page
// faults a whole-document parse costs (most of its time on large files).
struct WindowParser {
  simdjson::dom::parser parser;
  std::string buffer;

  // Parses prefix + body + suffix (copied into `buffer`) as one document.
  simdjson::error_code parse(std::string_view prefix, std::string_view body,
                             std::string_view suffix, simdjson::dom::element* root);
};

inline constexpr size_t kWindowBytes = size_t{1} << 20;
// Windows parsed ahead of the one being turned into rows, when parsing runs on a helper
// thread (each holds a parser and its ~1 MiB window: a few MB of tape).
inline constexpr size_t kParsersInFlight = 3;

// Parsers are kept per calling thread and reused across reads (their buffers then stay
// allocated and warm); a helper thread borrows them for the duration of one read.
std::array<WindowParser, kParsersInFlight>& window_parsers();

// Parses the windows of the event array, each wrapped as a document of its own, either on
// the calling thread as they are asked for, or on a helper thread that runs up to
// kParsersInFlight windows ahead (the calling thread meanwhile builds the model from the
// windows already parsed: the two halves take about as long, so two cores halve the time).
//
// Thread-safety: next() and release() are called by the thread that made the pipeline;
// the helper thread only touches the parsers of windows not yet handed out.
class WindowPipeline {
 public:
  WindowPipeline(std::string_view text, const std::vector<std::pair<size_t, size_t>>& windows,
                 std::string_view prefix, std::string_view suffix, bool object_form,
                 bool use_helper_thread)
      : text_(text),
        windows_(windows),
        prefix_(prefix),
        suffix_(suffix),
        object_form_(object_form),
        parsers_(window_parsers()) {
    if (use_helper_thread && windows_.size() > 1) helper_ = std::thread([this] { parse_ahead(); });
  }
  WindowPipeline(const WindowPipeline&) = delete;
  WindowPipeline& operator=(const WindowPipeline&) = delete;

  ~WindowPipeline() {
    if (!helper_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    helper_.join();
  }

  // The events of window `index` (windows are asked for in order), or nullopt if that
  // window is not a valid array of JSON values. Call release() once done with them.
  std::optional<simdjson::dom::array> next(size_t index) {
    WindowParser& slot = parsers_[index % kParsersInFlight];
    if (!helper_.joinable()) return parse(slot, index);
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return parsed_ > index; });
    return results_[index % kParsersInFlight];
  }

  void release(size_t index) {
    if (!helper_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      released_ = index + 1;
    }
    changed_.notify_all();
  }

 private:
  std::optional<simdjson::dom::array> parse(WindowParser& slot, size_t index) {
    auto [begin, end] = windows_[index];
    simdjson::dom::element root;
    simdjson::dom::array events;
    if (slot.parse(prefix_, text_.substr(begin, end - begin), suffix_, &root) != simdjson::SUCCESS)
      return std::nullopt;
    if (object_form_ ? root[""].get(events) != simdjson::SUCCESS
                     : root.get(events) != simdjson::SUCCESS)
      return std::nullopt;
    return events;
  }

  void parse_ahead() {
    for (size_t index = 0; index < windows_.size(); ++index) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || index < released_ + kParsersInFlight; });
        if (stopping_) return;
      }
      auto events = parse(parsers_[index % kParsersInFlight], index);
      {
        std::lock_guard lock(mutex_);
        results_[index % kParsersInFlight] = events;
        parsed_ = index + 1;
      }
      changed_.notify_all();
      if (!events) return;  // the reader gives up at the first bad window
    }
  }

  std::string_view text_;
  const std::vector<std::pair<size_t, size_t>>& windows_;
  std::string_view prefix_;
  std::string_view suffix_;
  bool object_form_;
  std::array<WindowParser, kParsersInFlight>& parsers_;

  std::mutex mutex_;
  std::condition_variable changed_;
  size_t parsed_ = 0;    // windows parsed by the helper (guarded by mutex_)
  size_t released_ = 0;  // windows the reader is done with (guarded by mutex_)
  bool stopping_ = false;
  std::array<std::optional<simdjson::dom::array>, kParsersInFlight> results_;
  std::thread helper_;  // last: started once everything above is initialised
};

}  // namespace opsight::io::chrome_json
