// The Chrome JSON reader's entry for a file mapped into memory (io.cc's read_trace_file).
#pragma once
#include <functional>
#include <string_view>

#include "io/io.hpp"

namespace opsight::io::chrome_json {

// read_chrome_json(bytes) that calls `done_before(p)` as it goes: the bytes before `p` are
// no longer needed for speed (a mapped file's pages can then leave memory; the reader may
// still touch them again, when it describes a bad event or reads the input a second time).
ReadResult read_chrome_json_dropping_input(std::string_view bytes,
                                           const std::function<void(const char*)>& done_before);

}  // namespace opsight::io::chrome_json
