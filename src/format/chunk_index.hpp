// The native format's time index (layout: include/opsight/internal/native_layout.hpp,
// docs/native-format.md "Time index"): built by every writer as it writes its chunks, and
// by a reader's scan when a file has none (a process killed mid-session, an older file).
//
// IndexBuilder keeps, per thread, what a reader needs to start decoding a thread at any of
// its kEvents chunks (its previous ticks, begins and async begins so far) and whether its
// state is empty there (no span open, no track switched, nothing waiting for a next event),
// mirroring the slot decoder's rules (src/io/native/slot_decoder.hpp). It walks a chunk's
// slot headers only (kind, ticks, extra slots): no names, no model.
//
// Thread-safety: none; one builder per writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "opsight/internal/native_layout.hpp"

namespace opsight::format {

class IndexBuilder {
 public:
  // `entries_per_part`: how many entries a part holds before part_full() (tests use few).
  explicit IndexBuilder(size_t entries_per_part = kIndexEntriesPerPart)
      : entries_per_part_(entries_per_part) {}

  // A kEvents chunk at file offset `offset` of thread `thread_index`, with `slot_count`
  // slots at `slots` (the payload after its EventsHeader).
  void add_events(uint64_t offset, uint32_t thread_index, const char* slots, uint32_t slot_count);
  // Any other chunk. The first kClockSync's ticks mark the session's start (events before
  // it are stale and, as in the reader, neither counted nor nested).
  void add_other(uint64_t offset, ChunkType type, std::string_view payload);
  // Every whole chunk in `bytes`, which start at file offset `offset` (a writer's buffer of
  // complete chunks; a file header at its start is skipped when `offset` is 0).
  void add_chunks(std::string_view bytes, uint64_t offset);

  // The entries since the last part fill a part: the writer should append_part() at its
  // next chunk boundary (between whole chunks), so that it holds one part at most.
  bool part_full() const { return entries_.size() >= entries_per_part_; }
  // Appends a kIndex chunk of the entries since the last part and forgets them; `offset` is
  // the file offset at which `out`'s current end lies. Returns false (appending nothing)
  // when the part would pass the format's chunk limit.
  bool append_part(std::string& out, uint64_t offset);
  // The last part and the kIndexTrailer chunk: the file's end.
  bool append_index(std::string& out, uint64_t offset);

  // The entries since the last part (a scan that appends no part: every chunk's).
  const std::vector<IndexEntry>& entries() const { return entries_; }

 private:
  struct ThreadFacts {
    uint64_t last_ticks = 0;
    bool has_last_ticks = false;
    bool skipping_stale = false;
    uint64_t begins = 0;
    uint64_t async_begins = 0;
    uint64_t open_spans = 0;
    bool switched_tracks = false;
    bool after_instant = false;
    bool into_next_waiting = false;
  };
  size_t entries_per_part_;
  uint64_t previous_part_ = 0;
  std::vector<IndexEntry> entries_;
  std::unordered_map<uint32_t, ThreadFacts> threads_;
  bool has_session_start_ = false;
  uint64_t session_start_ticks_ = 0;
};

// A file's index, read from its trailer and its parts: the entries, or nullopt with
// *problem set when the file has none or it does not check out (a reader then scans).
// Checks the trailer's and every part's checksums, and that the entries lie in file order,
// each before its part.
std::optional<std::vector<IndexEntry>> read_index(std::string_view file, std::string* problem);

}  // namespace opsight::format
