// The windows of the Chrome JSON reader's fast path: the event array is cut into windows of
// about 1 MiB of whole events, each parsed as a document of its own by a warm simdjson
// parser and decoded (chrome_json_decode.hpp), on the calling thread or on a helper thread.
#pragma once

#include <simdjson.h>

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "io/chrome_json/chrome_json_decode.hpp"

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
// Threads that parse and decode windows: the calling thread and one helper.
inline constexpr size_t kDecodingThreads = 2;
// Windows decoded and not yet merged, at most (each holds its events' records: a few
// hundred KB for a 1 MiB window).
inline constexpr size_t kWindowsInFlight = 4;

// Parsers are kept per calling thread and reused across reads (their buffers then stay
// allocated and warm): [0] is the calling thread's, [1] is lent to a read's helper thread.
std::array<WindowParser, kDecodingThreads>& window_parsers();

// Parses and decodes the windows of the event array, each wrapped as a document of its
// own, and hands their DecodedEvents out in file order. With a helper thread, both threads
// take the next window not yet taken, up to kWindowsInFlight ahead of the one being
// merged: the calling thread merges window n (next() then release()) and, while window n
// is still being decoded by the helper, decodes a later one itself. The work is then
// shared whatever the split between decoding and merging costs.
//
// Thread-safety: next() and release() are called by the thread that made the pipeline;
// the helper thread only writes the slots of windows it took, which the caller reads only
// once they are marked decoded (under the mutex).
class WindowPipeline {
 public:
  WindowPipeline(std::string_view text, const std::vector<std::pair<size_t, size_t>>& windows,
                 std::string_view prefix, std::string_view suffix, bool object_form,
                 const EventDecoder& decoder, bool use_helper_thread);
  WindowPipeline(const WindowPipeline&) = delete;
  WindowPipeline& operator=(const WindowPipeline&) = delete;
  ~WindowPipeline();

  // The decoded events of window `index` (windows are asked for in order), or nullptr if
  // that window is not a valid array of JSON values. Call release() once done with them.
  const DecodedEvents* next(size_t index);
  void release(size_t index);

 private:
  struct Slot {
    DecodedEvents events;
    size_t window = SIZE_MAX;  // the window whose events it holds, once decoded
    bool ok = false;
  };

  // Parses window `index` with `parser` and decodes its events into its slot.
  bool decode(size_t index, WindowParser& parser, EventDecoder& decoder);
  // Takes the next window if one is left and its slot is free (call with mutex_ held).
  std::optional<size_t> take_window();
  // Hands a decoded window's slot to next() (call with mutex_ held).
  void mark_decoded(size_t window, bool ok);
  void work_as_helper();

  std::string_view text_;
  const std::vector<std::pair<size_t, size_t>>& windows_;
  std::string_view prefix_;
  std::string_view suffix_;
  bool object_form_;
  std::array<WindowParser, kDecodingThreads>& parsers_;
  EventDecoder caller_decoder_;
  EventDecoder helper_decoder_;
  std::array<Slot, kWindowsInFlight> slots_;

  std::mutex mutex_;
  std::condition_variable changed_;
  size_t taken_ = 0;     // windows taken by either thread (guarded by mutex_)
  size_t released_ = 0;  // windows merged (guarded by mutex_)
  bool failed_ = false;  // a window was not valid: nothing more is taken
  bool stopping_ = false;
  std::thread helper_;  // last: started once everything above is initialised
};

}  // namespace opsight::io::chrome_json
