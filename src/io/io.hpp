// Readers and writers of trace files. Every reader turns bytes into a trace::Trace; every
// writer turns a Trace into bytes. Nothing here touches the recorder.
//
// Errors name the file and, for a bad file, the byte offset. A damaged file (a native
// file cut short by a crash, a JSON array left open) is read as far as it is whole:
// ReadResult::trace holds what was recovered and ReadResult::damage says where it stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/trace.hpp"

namespace opsight::io {

enum class FileFormat { kNative, kChromeJson, kPerfetto };

// The format a path names by its extension (io/trace_formats.hpp's table: ".opsight"
// native, ".json" Chrome JSON, ".pftrace" or ".perfetto-trace" Perfetto protobuf; and a
// session's ".opsight.tmp" stream, native). nullopt for anything else.
std::optional<FileFormat> format_from_path(std::string_view path);
// The format of a file's first bytes (native magic, or '{' / '[' after whitespace).
std::optional<FileFormat> format_from_content(std::string_view head);

// A problem found in an input, with where it was found. `byte_offset` is meaningful only
// when has_offset is true.
struct Diagnostic {
  std::string message;
  uint64_t byte_offset = 0;
  bool has_offset = false;

  // "FILE: at byte N: MESSAGE" (or "FILE: MESSAGE" without an offset).
  std::string to_string(std::string_view file) const;
};

struct ReadResult {
  trace::Trace trace;
  // Set when nothing usable could be read; `trace` is then empty.
  std::optional<Diagnostic> error;
  // Set when the input was read only up to some point (crash, truncation, corruption);
  // `trace` holds everything before it.
  std::optional<Diagnostic> damage;

  bool ok() const { return !error.has_value(); }
};

// Where a streaming writer puts its bytes, piece by piece and in order, so that writing a
// trace holds a bounded buffer (about kSinkPieceBytes) instead of the whole output. write()
// returns false when the bytes could not be taken (a full disk): the writer then stops early.
inline constexpr size_t kSinkPieceBytes = size_t{1} << 20;  // a writer hands on from here
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual bool write(std::string_view bytes) = 0;
};

// A sink into a string (what the string-returning writers use).
class StringSink final : public ByteSink {
 public:
  bool write(std::string_view bytes) override {
    out.append(bytes);
    return true;
  }
  std::string out;
};

// A file written as a whole or not at all: the bytes go to a new temporary file beside
// `path`, renamed over `path` by commit() (a crash or a full disk mid-write leaves the old
// file, or none, never a torn one); destroyed without commit(), the temporary is removed.
class FileSink final : public ByteSink {
 public:
  explicit FileSink(std::string path);
  ~FileSink() override;
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  bool write(std::string_view bytes) override;
  // Closes and renames the file into place; nullopt on success, else the error (which
  // names the path). Also reports an error met by open or an earlier write().
  std::optional<std::string> commit();
  // The first error met so far (naming the path), if any.
  const std::optional<std::string>& error() const { return error_; }

 private:
  void fail(const char* doing);
  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  std::optional<std::string> error_;
};

// Native .opsight (layout: docs/native-format.md, constants:
// include/opsight/internal/native_layout.hpp).
ReadResult read_native(std::string_view bytes);
// A time window of a trace: [from_ns, to_ns] in ns from the trace's first event (as the
// reports count time).
struct TimeWindow {
  int64_t from_ns = 0;
  int64_t to_ns = 0;
};
// read_native(bytes) cut to `window` (trace::keep_time_window's kOverlaps rule: the spans
// that overlap it, the instants and counter samples inside it), decoding only the chunks
// the window needs: the file's time index tells which (docs/native-format.md, "Time
// index"). A file without an index (a process killed mid-session, a file older than the
// index) or whose index does not check out is indexed by a scan of its chunks first. The
// run metadata says which: "native_index" is "read" or "rebuilt by a scan: <why>", and
// "window_chunks_read" counts the kEvents chunks decoded.
ReadResult read_native(std::string_view bytes, const TimeWindow& window);
std::string write_native(const trace::Trace& trace);
// `opsight index FILE`: the time index a native file lacks (a process killed mid-session,
// a file older than the index), built by a scan of its chunks and appended to it in place
// (native/native_index_file.cc; docs/native-format.md, "Time index"). The file's bytes are
// never rewritten: one kIndex part and the trailer go after its end, so a crash mid-write
// leaves a file without a valid trailer, read by a scan as before. A cut or damaged chunk
// ends the scan: the chunks before it are indexed, the bytes from it on are left out.
struct NativeIndexAdded {
  uint64_t chunks_indexed = 0;
  uint64_t events_chunks_indexed = 0;
  uint64_t bytes_appended = 0;
  uint64_t left_out_offset = 0;  // where the left-out bytes begin (0: none left out)
  uint64_t bytes_left_out = 0;
  std::string left_out_why;  // the chunk problem there ("chunk cut short", ...)
};
// The bytes to append to `bytes` (a whole native file), or nullopt with *problem set: not
// a native file, already indexed ("already has a time index"), too many chunks for one part.
std::optional<std::string> build_native_index(std::string_view bytes, NativeIndexAdded* added,
                                              std::string* problem, bool* already_indexed);
// The same on a file, appending in place (then fsync). nullopt on success; otherwise the
// error, naming `path` (*already_indexed set when the file had a valid index).
std::optional<std::string> add_native_index(const std::string& path, NativeIndexAdded* added,
                                            bool* already_indexed);
// The same into a sink, a chunk at a time. Returns false when the sink refused bytes.
bool write_native(const trace::Trace& trace, ByteSink& sink);
// read_native(bytes) that calls `done_before(p)` after each Events chunk: the bytes before
// p are no longer needed for speed (read_trace_file then hands a mapped file's pages back;
// the reader may still touch them again, which faults them in from the page cache).
ReadResult read_native_dropping_input(std::string_view bytes,
                                      const std::function<void(const char*)>& done_before);

// Chrome Trace Event Format JSON: object form {"traceEvents": [...]} or a bare array,
// possibly left unterminated; X, B/E, i/I, C, M, async (b/e/n, S/T/F) and flow (s/t/f,
// v2 bind_id) events; PyTorch-profiler and ONNX Runtime profile files. `bytes` need no
// padding. What each phase becomes: docs/reports.md, "What the Chrome JSON reader maps".
ReadResult read_chrome_json(std::string_view bytes);
// The same with the decoding threads chosen: with 1, everything runs on the calling thread;
// with 2 (what the overload above uses where the machine has two cores or more), a helper
// thread parses the JSON a 1 MiB window ahead while the calling thread builds the model.
// Inputs of one window (about 1 MiB) are always read on the calling thread alone.
ReadResult read_chrome_json(std::string_view bytes, int threads);
std::string write_chrome_json(const trace::Trace& trace);
// The same into a sink, in pieces of about 1 MiB. Returns false when the sink refused bytes.
bool write_chrome_json(const trace::Trace& trace, ByteSink& sink);

// A native file to Chrome JSON in bounded memory (native/native_to_chrome_json.cc): read a
// window at a time, each event written once complete, so that a run of any length converts
// holding the open spans, the names and about 1 MiB of output (what differs from
// write_chrome_json of the whole trace: docs/formats.md, "Streaming conversion"). Returns an
// error (naming the path) or nullopt.
struct StreamedConversion {
  uint64_t slices = 0;
  uint64_t async_slices = 0;
  uint64_t instants = 0;
  uint64_t counter_samples = 0;
  uint64_t flows_left_out = 0;  // flow events: not converted by the streaming path
  bool complete = false;        // the file's footer was read
};
std::optional<std::string> convert_native_to_chrome_json(const std::string& path, ByteSink& sink,
                                                         StreamedConversion* counts = nullptr);
// The same to Perfetto protobuf (perfetto/native_to_perfetto.cc): each span a SLICE_BEGIN at
// its begin and a SLICE_END with its arguments at its end, in file order; read back, the
// same slices, instants and counter samples as write_perfetto of the whole trace (what
// differs: docs/formats.md, "Streaming conversion").
std::optional<std::string> convert_native_to_perfetto(const std::string& path, ByteSink& sink,
                                                      StreamedConversion* counts = nullptr);

// Perfetto's protobuf trace format (a .pftrace; what is written and how:
// perfetto/perfetto_writer.cc and docs/formats.md).
// Reading takes what opsight writes and what Perfetto's SDK writes for track events (what is
// read and what is left out: perfetto/perfetto_reader.cc and docs/formats.md, "Reading
// .pftrace"); the first malformed packet ends the read, with the packets before it kept.
ReadResult read_perfetto(std::string_view bytes);
std::string write_perfetto(const trace::Trace& trace);
// The same into a sink, in pieces of about 1 MiB. Returns false when the sink refused bytes.
bool write_perfetto(const trace::Trace& trace, ByteSink& sink);

// Files: by extension (falling back to content for unknown extensions). A regular file is
// mapped, not copied (a Chrome JSON file's pages leave memory as its events are merged);
// anything else (a pipe) is read with read_file_bytes.
ReadResult read_trace_file(const std::string& path);
// The same cut to `window` (see read_native(bytes, window)): a native file reads only the
// chunks the window needs; other formats are read whole, then cut.
ReadResult read_trace_file(const std::string& path, const TimeWindow& window);

// Several trace files read and merged into one trace, in the order given (see
// trace::append_trace): the files the processes of one run wrote, one each.
struct ReadFilesResult {
  trace::Trace trace;
  // The first file that could not be used, as "FILE: problem"; `trace` is then empty.
  std::optional<std::string> error;
  // One message per damaged file ("FILE: at byte N: problem"); what was whole is merged.
  std::vector<std::string> damage;

  bool ok() const { return !error.has_value(); }
};
ReadFilesResult read_trace_files(const std::vector<std::string>& paths);

// The native files of one run's processes merged into one native file written to `sink`,
// in memory bounded by a constant whatever their size (about 16 MiB besides their names,
// threads and clock syncs: native/native_merge.cc): reading the output gives the trace
// read_trace_files(paths) gives (docs/native-format.md, "Streaming merge"). `error`: the
// first file that cannot be used, or the sink's refusal; `damage` as read_trace_files's.
// `more_run_info`: pairs added to the merged run info, each replacing a pair of its key
// (what `opsight run`'s exports did, "export:<target>", which a merge in memory notes in the
// trace).
struct MergeFilesResult {
  std::optional<std::string> error;
  std::vector<std::string> damage;
};
MergeFilesResult merge_native_files(
    const std::vector<std::string>& paths, ByteSink& sink,
    const std::vector<std::pair<std::string, std::string>>& more_run_info = {});

// Writes `trace` to `path` in the format its extension names, through a temporary file in
// the same folder renamed over `path` (a crash mid-write never leaves a torn file), holding
// about 1 MiB of the output in memory at a time (FileSink); returns an error message
// (naming the path) or nullopt on success.
std::optional<std::string> write_trace_file(const trace::Trace& trace, const std::string& path);

// Reads a whole file; nullopt and *error set if it cannot be read.
std::optional<std::string> read_file_bytes(const std::string& path, std::string* error);
std::optional<std::string> write_file_bytes(const std::string& path, std::string_view bytes);

}  // namespace opsight::io
