#include "store/run_store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <thread>

#include "store/sqlite_statement.hpp"

namespace opsight::store {

namespace {

constexpr std::string_view kTraceCodec = "zstd";
// A trace kept as a file: run_traces.data holds the file's name in traces_folder().
constexpr std::string_view kFileCodec = "opsight-file";
constexpr int kCompressionLevel = 3;
// The candidates an ambiguous uuid prefix error lists.
constexpr int kAmbiguousCandidatesShown = 5;
// The fewest characters of a uuid that name a run (shorter ones are too likely to be a name).
constexpr size_t kMinUuidPrefix = 4;

// The schema, one step per version: migration i takes a store from version i to i + 1.
// Every store, new ones included, is built by running them in order, so the upgrade path
// of an old store is the path every test takes. Never edit a released step; add one.
constexpr std::string_view kMigrations[] = {
    // 0 -> 1: runs with their metadata columns and the trace inline; tags and versions.
    R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  uuid TEXT NOT NULL UNIQUE,
  created_unix_ns INTEGER NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  command TEXT NOT NULL DEFAULT '',
  working_directory TEXT NOT NULL DEFAULT '',
  git_commit TEXT NOT NULL DEFAULT '',
  host TEXT NOT NULL DEFAULT '',
  cpu TEXT NOT NULL DEFAULT '',
  gpu TEXT NOT NULL DEFAULT '',
  slice_count INTEGER NOT NULL DEFAULT 0,
  duration_ns INTEGER NOT NULL DEFAULT 0,
  source_format TEXT NOT NULL DEFAULT '',
  trace_codec TEXT NOT NULL,
  trace_bytes INTEGER NOT NULL,
  trace BLOB NOT NULL
);
CREATE INDEX runs_created ON runs(created_unix_ns);
CREATE INDEX runs_name ON runs(name);
CREATE TABLE run_tags (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
);
CREATE INDEX run_tags_key ON run_tags(key, value);
CREATE TABLE run_versions (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  package TEXT NOT NULL,
  version TEXT NOT NULL,
  PRIMARY KEY (run_id, package)
);
)sql",
    // 1 -> 2: traces move to their own table (listing runs never reads trace pages, and a
    // damaged trace page cannot hide a run); free-form metadata; when the trace started.
    R"sql(
CREATE TABLE run_traces (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  codec TEXT NOT NULL,
  data BLOB NOT NULL
);
INSERT INTO run_traces (run_id, codec, data) SELECT id, trace_codec, trace FROM runs;
ALTER TABLE runs ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET stored_bytes = length(trace);
ALTER TABLE runs DROP COLUMN trace;
ALTER TABLE runs DROP COLUMN trace_codec;
ALTER TABLE runs ADD COLUMN trace_start_unix_ns INTEGER NOT NULL DEFAULT 0;
CREATE TABLE run_extra (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
);
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion);

constexpr std::string_view kRunColumns =
    "id, uuid, created_unix_ns, trace_start_unix_ns, name, command, working_directory, "
    "git_commit, host, cpu, gpu, slice_count, duration_ns, source_format, trace_bytes, "
    "stored_bytes";

RunRecord record_from_row(Statement& row) {
  RunRecord record;
  record.id = row.column_int64(0);
  record.uuid = row.column_text(1);
  record.created_unix_ns = row.column_int64(2);
  record.trace_start_unix_ns = row.column_int64(3);
  record.metadata.name = row.column_text(4);
  record.metadata.command = row.column_text(5);
  record.metadata.working_directory = row.column_text(6);
  record.metadata.git_commit = row.column_text(7);
  record.metadata.host = row.column_text(8);
  record.metadata.cpu = row.column_text(9);
  record.metadata.gpu = row.column_text(10);
  record.slice_count = static_cast<uint64_t>(row.column_int64(11));
  record.duration_ns = row.column_int64(12);
  record.source_format = row.column_text(13);
  record.trace_bytes = static_cast<uint64_t>(row.column_int64(14));
  record.stored_bytes = static_cast<uint64_t>(row.column_int64(15));
  return record;
}

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string new_uuid() {
  std::random_device entropy;
  uint8_t bytes[16];
  for (size_t i = 0; i < sizeof(bytes); i += 4) {
    uint32_t word = entropy();
    std::memcpy(bytes + i, &word, 4);
  }
  bytes[6] = static_cast<uint8_t>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<uint8_t>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0xF];
  }
  return text;
}

// Creates the missing directories of `directory`, each with mode 0700 (a store holds
// command lines and paths: not for other users).
std::optional<std::string> create_private_directories(const std::filesystem::path& directory) {
  if (directory.empty()) return std::nullopt;
  std::error_code error;
  if (std::filesystem::is_directory(directory, error)) return std::nullopt;
  if (auto problem = create_private_directories(directory.parent_path())) return problem;
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST)
    return directory.string() +
           ": cannot create the run store's directory: " + std::strerror(errno);
  return std::nullopt;
}

// About the bytes write_native gives `trace` (what decides a file or a blob).
uint64_t estimated_native_bytes(const trace::Trace& trace) {
  return 4096 + uint64_t{40} * trace.slices.size() + uint64_t{24} * trace.instants.size() +
         uint64_t{24} * trace.counters.size() + uint64_t{24} * trace.slice_args.size();
}

// A stored trace's native bytes read back; damage is named as the store's (`run` says which).
io::ReadResult read_stored_native(std::string_view native, const std::string& run) {
  io::ReadResult result = io::read_native(native);
  if (result.error)
    result.error->message =
        run + ": its stored trace is damaged: " + result.error->to_string("trace");
  if (result.damage)
    result.damage->message =
        run + ": its stored trace is damaged: " + result.damage->to_string("trace");
  if (result.error) result.error->has_offset = false;
  if (result.damage) result.damage->has_offset = false;
  return result;
}

// A ByteSink that compresses what it is given into a file (a zstd frame, streamed: the
// compressor's window and a 1 MiB output buffer are all it holds).
class ZstdFileSink final : public io::ByteSink {
 public:
  explicit ZstdFileSink(const std::string& path) : file_(path), context_(ZSTD_createCCtx()) {
    if (context_ != nullptr) {
      ZSTD_CCtx_setParameter(context_, ZSTD_c_compressionLevel, kCompressionLevel);
      ZSTD_CCtx_setParameter(context_, ZSTD_c_checksumFlag, 1);
    }
    buffer_.resize(ZSTD_CStreamOutSize() * 8);
  }
  ~ZstdFileSink() override { ZSTD_freeCCtx(context_); }
  ZstdFileSink(const ZstdFileSink&) = delete;
  ZstdFileSink& operator=(const ZstdFileSink&) = delete;

  bool write(std::string_view bytes) override {
    raw_bytes_ += bytes.size();
    return pump(bytes, ZSTD_e_continue);
  }
  // Ends the frame and renames the file into place; nullopt or the error.
  std::optional<std::string> commit() {
    if (!pump({}, ZSTD_e_end)) return error_ ? error_ : file_.error();
    return file_.commit();
  }
  uint64_t raw_bytes() const { return raw_bytes_; }
  // The first error met (the compressor's or the file's, naming the path), if any.
  std::optional<std::string> error() const { return error_ ? error_ : file_.error(); }

 private:
  bool pump(std::string_view bytes, ZSTD_EndDirective directive) {
    if (context_ == nullptr) {
      error_ = "cannot compress the trace: out of memory";
      return false;
    }
    ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
    for (;;) {
      ZSTD_outBuffer out{buffer_.data(), buffer_.size(), 0};
      size_t left = ZSTD_compressStream2(context_, &out, &in, directive);
      if (ZSTD_isError(left)) {
        error_ = std::string("cannot compress the trace: ") + ZSTD_getErrorName(left);
        return false;
      }
      if (out.pos > 0 && !file_.write(std::string_view(buffer_.data(), out.pos))) return false;
      bool done = directive == ZSTD_e_end ? left == 0 : in.pos == in.size;
      if (done) return true;
    }
  }

  io::FileSink file_;
  ZSTD_CCtx* context_;
  std::string buffer_;
  uint64_t raw_bytes_ = 0;
  std::optional<std::string> error_;
};

// Decompresses the zstd file at `path` into `out`, 1 MiB at a time; it must come to
// `expected_bytes` exactly (the size the store recorded; more is damage, never written).
std::optional<std::string> decompress_file(const std::string& path, uint64_t expected_bytes,
                                           io::ByteSink& out) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return std::string("cannot open: ") + std::strerror(errno);
  ZSTD_DCtx* context = ZSTD_createDCtx();
  std::string input(ZSTD_DStreamInSize() * 8, '\0');
  std::string output(size_t{1} << 20, '\0');
  uint64_t produced = 0;
  size_t left = 1;  // what the frame still needs: 0 once it is whole
  std::optional<std::string> problem;
  if (context == nullptr) problem = "cannot decompress: out of memory";
  for (size_t got; !problem && (got = std::fread(input.data(), 1, input.size(), file)) > 0;) {
    ZSTD_inBuffer in{input.data(), got, 0};
    while (!problem && in.pos < in.size) {
      ZSTD_outBuffer into{output.data(), output.size(), 0};
      left = ZSTD_decompressStream(context, &into, &in);
      if (ZSTD_isError(left)) {
        problem = std::string("zstd: ") + ZSTD_getErrorName(left);
      } else if (produced + into.pos > expected_bytes) {
        problem = "it holds more than the recorded " + std::to_string(expected_bytes) + " bytes";
      } else if (!out.write(std::string_view(output.data(), into.pos))) {
        problem = "cannot write its decompressed bytes";
      } else if (left == 0 && in.pos < in.size) {
        problem = "bytes follow the end of its zstd frame";
      }
      produced += into.pos;
    }
  }
  if (!problem && std::ferror(file)) problem = std::string("cannot read: ") + std::strerror(errno);
  std::fclose(file);
  ZSTD_freeDCtx(context);
  if (!problem && (left != 0 || produced != expected_bytes))
    problem = "it is cut short (" + std::to_string(produced) + " of " +
              std::to_string(expected_bytes) + " bytes)";
  return problem;
}

// What RunStore::add keeps of a trace: the run_traces row's codec and data (the zstd bytes
// of a small trace, or the name of the file a large one is kept in), the native size and
// what it takes on disk.
struct StoredTrace {
  std::string_view codec = kTraceCodec;
  std::string data;
  uint64_t raw_bytes = 0;
  uint64_t stored_bytes = 0;
  bool in_file() const { return codec == kFileCodec; }
};

std::optional<std::string> compress(std::string_view bytes, StoredTrace* out) {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  if (context == nullptr) return "cannot compress the trace: out of memory";
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, kCompressionLevel);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1);
  out->data.resize(ZSTD_compressBound(bytes.size()));
  size_t written =
      ZSTD_compress2(context, out->data.data(), out->data.size(), bytes.data(), bytes.size());
  ZSTD_freeCCtx(context);
  if (ZSTD_isError(written))
    return std::string("cannot compress the trace: ") + ZSTD_getErrorName(written);
  out->data.resize(written);
  out->codec = kTraceCodec;
  out->raw_bytes = bytes.size();
  out->stored_bytes = written;
  return std::nullopt;
}

std::optional<std::string> decompress(std::string_view data, uint64_t expected_bytes,
                                      std::string* out) {
  unsigned long long frame_size = ZSTD_getFrameContentSize(data.data(), data.size());
  if (frame_size == ZSTD_CONTENTSIZE_ERROR) return "not a zstd frame";
  // opsight always writes the content size; a frame without one, or a recorded size the
  // frame cannot hold, is damage, and must not make us allocate what a corrupt row says.
  if (frame_size == ZSTD_CONTENTSIZE_UNKNOWN) return "its zstd frame does not record its size";
  // zstd never expands a block of at most 128 KiB to more than 128 KiB, and a block takes
  // at least 3 bytes: a frame cannot hold more than about 44,000 times its size.
  const uint64_t bound = static_cast<uint64_t>(data.size()) * 44000 + (1u << 17);
  if (expected_bytes > bound)
    return "the recorded size (" + std::to_string(expected_bytes) + " bytes) is more than its " +
           std::to_string(data.size()) + "-byte zstd frame can hold";
  if (frame_size != expected_bytes)
    return "its size (" + std::to_string(frame_size) + " bytes) differs from the recorded " +
           std::to_string(expected_bytes);
  out->resize(expected_bytes);
  size_t got = ZSTD_decompress(out->data(), out->size(), data.data(), data.size());
  if (ZSTD_isError(got)) return std::string("zstd: ") + ZSTD_getErrorName(got);
  if (got != expected_bytes)
    return "it holds " + std::to_string(got) + " bytes instead of " +
           std::to_string(expected_bytes);
  return std::nullopt;
}

bool is_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_uuid_prefix(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
  });
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return lower;
}

}  // namespace

RunStore::RunStore(std::string path, sqlite3* database)
    : path_(std::move(path)), database_(database) {}

RunStore::~RunStore() {
  if (database_ != nullptr) sqlite3_close_v2(database_);
}

std::string RunStore::describe_error(std::string_view doing) const {
  return path_ + ": " + std::string(doing) + ": " + sqlite_problem();
}

std::string RunStore::sqlite_problem() const {
  std::string text = sqlite3_errmsg(database_);
  int code = sqlite3_errcode(database_) & 0xFF;
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
    text += " (another process kept the store busy for longer than the wait allowed)";
  else if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
    text += " (the store file is damaged)";
  return text;
}

std::string RunStore::default_path() {
  if (const char* home = std::getenv("OPSIGHT_HOME"); home != nullptr && *home != '\0')
    return (std::filesystem::path(home) / "runs.db").string();
  const char* user_home = std::getenv("HOME");
  std::filesystem::path base = user_home != nullptr && *user_home != '\0' ? user_home : ".";
  return (base / ".opsight" / "runs.db").string();
}

Result<std::unique_ptr<RunStore>> RunStore::open(const std::string& path,
                                                 const OpenOptions& options) {
  using OpenResult = Result<std::unique_ptr<RunStore>>;
  std::error_code error;
  std::filesystem::path file(path);
  if (std::filesystem::is_directory(file, error))
    return OpenResult::failure(path + ": is a directory, not a run store file");
  if (!options.create && !std::filesystem::exists(file, error))
    return OpenResult::failure("no run store at " + path);
  if (options.create) {
    if (auto problem = create_private_directories(file.parent_path()))
      return OpenResult::failure(*problem);
  }
  sqlite3* database = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0);
  int status = sqlite3_open_v2(path.c_str(), &database, flags, nullptr);
  if (status != SQLITE_OK) {
    std::string message = path + ": cannot open the run store: " +
                          (database != nullptr ? sqlite3_errmsg(database) : sqlite3_errstr(status));
    sqlite3_close_v2(database);
    return OpenResult::failure(message);
  }
  std::unique_ptr<RunStore> store(new RunStore(path, database));
  store->file_threshold_bytes_ = options.file_threshold_bytes;
  sqlite3_extended_result_codes(database, 1);
  sqlite3_busy_timeout(database, options.busy_timeout_ms);
  if (auto problem = store->migrate()) {
    int code = sqlite3_errcode(database) & 0xFF;
    if (code != SQLITE_CORRUPT || !options.salvage_damaged) return OpenResult::failure(*problem);
    std::string damage = sqlite3_errmsg(database);
    if (store->open_for_salvage(damage, options.busy_timeout_ms))
      return OpenResult::failure(*problem);
  }
  return OpenResult::success(std::move(store));
}

// Reopens the damaged file read-only, reading past a cut (writable_schema makes SQLite
// take the file's own length over the page count in its header).
std::optional<std::string> RunStore::open_for_salvage(const std::string& damage,
                                                      int busy_timeout_ms) {
  sqlite3_close_v2(database_);
  database_ = nullptr;
  // Read-only for real: closing must not checkpoint a WAL into the damaged file.
  if (sqlite3_open_v2(path_.c_str(), &database_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    return "cannot reopen";
  sqlite3_extended_result_codes(database_, 1);
  sqlite3_busy_timeout(database_, busy_timeout_ms);
  Connection connection(database_);
  int version = 0;
  int runs_tables = 0;
  if (!connection.exec("PRAGMA writable_schema = ON") ||
      !connection.exec("PRAGMA query_only = ON") ||
      !connection.query_int("PRAGMA user_version", &version) || version != kSchemaVersion ||
      !connection.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'runs'",
                            &runs_tables) ||
      runs_tables != 1)
    return "not salvageable";
  damage_ = damage;
  return std::nullopt;
}

std::optional<std::string> RunStore::refuse_writes_if_damaged(std::string_view doing) const {
  if (!damage_) return std::nullopt;
  return path_ + ": cannot " + std::string(doing) + ": the run store is damaged (" + *damage_ +
         ") and was opened read-only to read what is left; move it aside to start a new one";
}

std::optional<std::string> RunStore::migrate() {
  Connection connection(database_);
  // The first read tells a store from a file that is not one (garbage, truncated header).
  int version = 0;
  if (!connection.query_int("PRAGMA user_version", &version))
    return path_ + ": not a usable run store: " + sqlite3_errmsg(database_);
  if (version > kSchemaVersion)
    return path_ + ": the run store has schema version " + std::to_string(version) +
           ", newer than this opsight knows (" + std::to_string(kSchemaVersion) +
           "): upgrade opsight to use it";
  if (version == 0) {
    int tables = 0;
    if (!connection.query_int("SELECT count(*) FROM sqlite_master", &tables))
      return path_ + ": not a usable run store: " + sqlite3_errmsg(database_);
    // Another program's database is refused before anything below changes it (the WAL
    // switch would); the check under the write lock below covers a race with a migration.
    int runs_tables = 0;
    if (tables > 0 &&
        (!connection.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'runs'",
                               &runs_tables) ||
         runs_tables == 0))
      return path_ + ": not an opsight run store (a SQLite database with other tables)";
    // Takes effect only before the first table: lets removals give space back.
    if (tables == 0) connection.exec("PRAGMA auto_vacuum = INCREMENTAL");
  } else {
    int runs_tables = 0;
    if (!connection.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'runs'",
                              &runs_tables) ||
        runs_tables == 0)
      return path_ + ": not an opsight run store (schema version " + std::to_string(version) +
             " but no runs table)";
  }
  // WAL: readers never wait for a writer. Switching needs a moment of exclusive access,
  // which another process opening the store at the same time may hold: retry briefly.
  const auto switch_started = std::chrono::steady_clock::now();
  for (;;) {
    if (connection.exec("PRAGMA journal_mode = WAL")) break;
    int code = sqlite3_errcode(database_) & 0xFF;
    // Each attempt may already wait in the busy handler: give up after 15 s in all.
    if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) ||
        std::chrono::steady_clock::now() - switch_started > std::chrono::seconds(15))
      return path_ + ": not a usable run store: " + sqlite3_errmsg(database_);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!connection.exec("PRAGMA synchronous = NORMAL") ||
      !connection.exec("PRAGMA foreign_keys = ON"))
    return describe_error("cannot configure the run store");
  if (version == kSchemaVersion) return std::nullopt;

  // Migrate under the write lock; another process may have done it meanwhile.
  if (!connection.exec("BEGIN IMMEDIATE")) return describe_error("cannot migrate the run store");
  if (!connection.query_int("PRAGMA user_version", &version)) {
    std::string problem = describe_error("cannot migrate the run store");
    connection.exec("ROLLBACK");
    return problem;
  }
  if (version >= kSchemaVersion) {  // another process migrated it meanwhile
    connection.exec("ROLLBACK");
    if (version == kSchemaVersion) return std::nullopt;
    return path_ + ": the run store has schema version " + std::to_string(version) +
           ", newer than this opsight knows (" + std::to_string(kSchemaVersion) +
           "): upgrade opsight to use it";
  }
  if (version == 0) {
    // Checked under the lock: tables seen before it may be another opsight's migration.
    int tables = 0;
    if (!connection.query_int("SELECT count(*) FROM sqlite_master", &tables) || tables > 0) {
      std::string problem =
          tables > 0 ? path_ + ": not an opsight run store (a SQLite database with other tables)"
                     : describe_error("cannot migrate the run store");
      connection.exec("ROLLBACK");
      return problem;
    }
  }
  for (int step = version; step < kSchemaVersion; ++step) {
    if (!connection.exec(kMigrations[step])) {
      std::string problem =
          describe_error("cannot migrate the run store from schema version " +
                         std::to_string(step) + " to " + std::to_string(step + 1));
      connection.exec("ROLLBACK");
      return problem;
    }
  }
  if (!connection.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion)) ||
      !connection.exec("COMMIT")) {
    std::string problem = describe_error("cannot migrate the run store");
    connection.exec("ROLLBACK");
    return problem;
  }
  return std::nullopt;
}

Result<RunRecord> RunStore::add(const trace::Trace& trace, const RunMetadata& metadata) {
  if (auto problem = refuse_writes_if_damaged("save the run"))
    return Result<RunRecord>::failure(*problem);
  RunRecord record;
  record.uuid = new_uuid();
  // The slow part, outside the lock and the write transaction: a large trace streams to
  // its file (1 MiB in memory at a time), a small one is written and compressed in memory.
  StoredTrace stored;
  if (estimated_native_bytes(trace) >= file_threshold_bytes_) {
    const std::string trace_file = record.uuid + ".opsight.zst";
    make_traces_folder();
    const std::string file_path = traces_folder() + "/" + trace_file;
    ZstdFileSink sink(file_path);
    bool whole = false;
    try {
      whole = io::write_native(trace, sink);
    } catch (const std::bad_alloc&) {
      return Result<RunRecord>::failure(file_path + ": out of memory while writing");
    }
    auto problem = sink.commit();
    if (!whole && !problem) problem = file_path + ": cannot write";
    if (problem) return Result<RunRecord>::failure(*problem);
    std::error_code size_error;
    stored.codec = kFileCodec;
    stored.data = trace_file;
    stored.raw_bytes = sink.raw_bytes();
    stored.stored_bytes = std::filesystem::file_size(file_path, size_error);
  } else {
    std::string native = io::write_native(trace);
    if (auto problem = compress(native, &stored))
      return Result<RunRecord>::failure(path_ + ": " + *problem);
  }
  record.trace_start_unix_ns = trace.run.start_unix_ns;
  record.metadata = metadata;
  record.slice_count = trace.slices.size();
  auto [first, last] = trace.time_bounds();
  record.duration_ns = last - first;
  record.source_format = trace.run.source_format;
  record.trace_bytes = stored.raw_bytes;
  record.stored_bytes = stored.stored_bytes;
  return insert_run(std::move(record), stored.codec, stored.data);
}

Result<RunRecord> RunStore::add_native_file(const std::string& native_path, const TraceFacts& facts,
                                            const RunMetadata& metadata) {
  if (auto problem = refuse_writes_if_damaged("save the run"))
    return Result<RunRecord>::failure(*problem);
  RunRecord record;
  record.uuid = new_uuid();
  std::error_code size_error;
  const uint64_t native_bytes = std::filesystem::file_size(native_path, size_error);
  if (size_error)
    return Result<RunRecord>::failure(native_path + ": cannot read: " + size_error.message());
  StoredTrace stored;
  if (native_bytes >= file_threshold_bytes_) {
    // Copied through the compressor a MiB at a time: the file is never in memory whole.
    const std::string trace_file = record.uuid + ".opsight.zst";
    make_traces_folder();
    const std::string file_path = traces_folder() + "/" + trace_file;
    std::FILE* input = std::fopen(native_path.c_str(), "rb");
    if (input == nullptr)
      return Result<RunRecord>::failure(native_path + ": cannot read: " + std::strerror(errno));
    ZstdFileSink sink(file_path);
    std::string buffer(size_t{1} << 20, '\0');
    std::optional<std::string> problem;
    while (!problem) {
      const size_t got = std::fread(buffer.data(), 1, buffer.size(), input);
      if (got > 0 && !sink.write(std::string_view(buffer.data(), got)))
        problem = sink.error().value_or(file_path + ": cannot write");
      if (got < buffer.size()) {
        if (std::ferror(input)) problem = native_path + ": cannot read: " + std::strerror(errno);
        break;
      }
    }
    std::fclose(input);
    if (!problem) problem = sink.commit();
    if (problem) {
      ::unlink(file_path.c_str());
      return Result<RunRecord>::failure(*problem);
    }
    stored.codec = kFileCodec;
    stored.data = trace_file;
    stored.raw_bytes = sink.raw_bytes();
    stored.stored_bytes = std::filesystem::file_size(file_path, size_error);
  } else {
    std::string read_problem;
    std::optional<std::string> native = io::read_file_bytes(native_path, &read_problem);
    if (!native) return Result<RunRecord>::failure(read_problem);
    if (auto problem = compress(*native, &stored))
      return Result<RunRecord>::failure(path_ + ": " + *problem);
  }
  record.trace_start_unix_ns = facts.start_unix_ns;
  record.metadata = metadata;
  record.slice_count = facts.slice_count;
  record.duration_ns = facts.duration_ns;
  record.source_format = facts.source_format;
  record.trace_bytes = stored.raw_bytes;
  record.stored_bytes = stored.stored_bytes;
  return insert_run(std::move(record), stored.codec, stored.data);
}

Result<RunRecord> RunStore::insert_run(RunRecord record, std::string_view codec,
                                       const std::string& data) {
  // A file written for a run the database then refused is removed again.
  struct FileGuard {
    std::string path;
    bool keep = false;
    ~FileGuard() {
      if (!path.empty() && !keep) ::unlink(path.c_str());
    }
  } file_guard{codec == kFileCodec ? traces_folder() + "/" + data : std::string()};

  record.created_unix_ns = unix_now_ns();

  std::lock_guard lock(mutex_);
  Connection connection(database_);
  auto fail = [&](std::string_view doing) {
    std::string problem = describe_error(doing);
    connection.exec("ROLLBACK");
    return Result<RunRecord>::failure(problem);
  };
  if (!connection.exec("BEGIN IMMEDIATE")) return fail("cannot save the run");
  {
    Statement insert(database_,
                     "INSERT INTO runs (uuid, created_unix_ns, trace_start_unix_ns, name, command, "
                     "working_directory, git_commit, host, cpu, gpu, slice_count, duration_ns, "
                     "source_format, trace_bytes, stored_bytes) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    const RunMetadata& m = record.metadata;
    if (!insert.ok() ||
        !insert.bind_all(record.uuid, record.created_unix_ns, record.trace_start_unix_ns, m.name,
                         m.command, m.working_directory, m.git_commit, m.host, m.cpu, m.gpu,
                         static_cast<int64_t>(record.slice_count), record.duration_ns,
                         record.source_format, static_cast<int64_t>(record.trace_bytes),
                         static_cast<int64_t>(record.stored_bytes)) ||
        insert.step() != SQLITE_DONE)
      return fail("cannot save the run");
  }
  record.id = sqlite3_last_insert_rowid(database_);
  struct KeyValueTable {
    const char* sql;
    const KeyValues& rows;
  };
  for (const KeyValueTable& table :
       {KeyValueTable{"INSERT OR REPLACE INTO run_tags (run_id, key, value) VALUES (?, ?, ?)",
                      record.metadata.tags},
        KeyValueTable{"INSERT OR REPLACE INTO run_versions (run_id, package, version) "
                      "VALUES (?, ?, ?)",
                      record.metadata.versions},
        KeyValueTable{"INSERT OR REPLACE INTO run_extra (run_id, key, value) VALUES (?, ?, ?)",
                      record.metadata.extra}}) {
    Statement insert(database_, table.sql);
    if (!insert.ok()) return fail("cannot save the run");
    for (const auto& [key, value] : table.rows) {
      insert.reset();
      if (!insert.bind_all(record.id, key, value) || insert.step() != SQLITE_DONE)
        return fail("cannot save the run's metadata");
    }
  }
  {
    Statement insert(database_, "INSERT INTO run_traces (run_id, codec, data) VALUES (?, ?, ?)");
    if (!insert.ok() || !insert.bind_all(record.id, std::string(codec)) ||
        !insert.bind_blob(3, data) || insert.step() != SQLITE_DONE)
      return fail("cannot save the run's trace");
  }
  if (!connection.exec("COMMIT")) return fail("cannot save the run");
  file_guard.keep = true;
  // Later metadata rows replace earlier ones with the same key, as the store keeps them.
  auto deduplicate = [](KeyValues& rows) {
    KeyValues kept;
    for (auto& row : rows) {
      auto same = std::find_if(kept.begin(), kept.end(),
                               [&](const auto& other) { return other.first == row.first; });
      if (same != kept.end())
        same->second = row.second;
      else
        kept.push_back(row);
    }
    std::sort(kept.begin(), kept.end());
    rows = std::move(kept);
  };
  deduplicate(record.metadata.tags);
  deduplicate(record.metadata.versions);
  deduplicate(record.metadata.extra);
  return Result<RunRecord>::success(std::move(record));
}

namespace {
bool bind_values(Statement& statement, int first,
                 const std::vector<std::variant<int64_t, std::string>>& binds) {
  for (size_t i = 0; i < binds.size(); ++i) {
    int index = first + static_cast<int>(i);
    bool bound = std::holds_alternative<int64_t>(binds[i])
                     ? statement.bind(index, std::get<int64_t>(binds[i]))
                     : statement.bind(index, std::get<std::string>(binds[i]));
    if (!bound) return false;
  }
  return true;
}
}  // namespace

Result<std::vector<RunRecord>> RunStore::query_runs(const std::string& where_sql,
                                                    const Binds& binds, size_t limit,
                                                    size_t offset) {
  using ListResult = Result<std::vector<RunRecord>>;
  if (damage_) return salvage_runs(where_sql, binds, limit, offset);
  std::string sql = "SELECT " + std::string(kRunColumns) + " FROM runs";
  if (!where_sql.empty()) sql += " WHERE " + where_sql;
  sql += " ORDER BY id DESC";
  if (limit > 0 || offset > 0)
    sql += " LIMIT " + (limit > 0 ? std::to_string(limit) : std::string("-1")) + " OFFSET " +
           std::to_string(offset);
  Statement select(database_, sql);
  if (!select.ok() || !bind_values(select, 1, binds))
    return ListResult::failure(describe_error("cannot list the runs"));
  std::vector<RunRecord> records;
  int status = SQLITE_ROW;
  while ((status = select.step()) == SQLITE_ROW) records.push_back(record_from_row(select));
  if (status != SQLITE_DONE) return ListResult::failure(describe_error("cannot list the runs"));
  if (!fill_key_values(records))
    return ListResult::failure(describe_error("cannot read the runs' tags and versions"));
  return ListResult::success(std::move(records));
}

// In a damaged store a scan stops at the first lost page, so runs are looked up one id at a
// time, newest first: a lost page hides only the runs it held.
Result<std::vector<RunRecord>> RunStore::salvage_runs(const std::string& where_sql,
                                                      const Binds& binds, size_t limit,
                                                      size_t offset) {
  using ListResult = Result<std::vector<RunRecord>>;
  int64_t highest_id = 0;
  for (const char* sql :
       {"SELECT seq FROM sqlite_sequence WHERE name = 'runs'", "SELECT max(id) FROM runs"}) {
    Statement highest(database_, sql);
    if (highest.ok() && highest.step() == SQLITE_ROW) {
      highest_id = std::max(highest_id, highest.column_int64(0));
    }
  }
  std::string sql = "SELECT " + std::string(kRunColumns) + " FROM runs WHERE id = ?";
  if (!where_sql.empty()) sql += " AND (" + where_sql + ")";
  Statement probe(database_, sql);
  if (!probe.ok()) return ListResult::failure(describe_error("cannot list the runs"));
  std::vector<RunRecord> records;
  for (int64_t id = highest_id; id >= 1 && (limit == 0 || records.size() < limit + offset); --id) {
    probe.reset();
    if (!probe.bind(1, id) || !bind_values(probe, 2, binds))
      return ListResult::failure(describe_error("cannot list the runs"));
    if (probe.step() == SQLITE_ROW) records.push_back(record_from_row(probe));
  }
  records.erase(records.begin(),
                records.begin() + static_cast<ptrdiff_t>(std::min(offset, records.size())));
  fill_key_values(records);  // what is readable
  return ListResult::success(std::move(records));
}

bool RunStore::fill_key_values(std::vector<RunRecord>& records) {
  Statement tags(database_, "SELECT key, value FROM run_tags WHERE run_id = ? ORDER BY key");
  Statement versions(database_,
                     "SELECT package, version FROM run_versions WHERE run_id = ? ORDER BY package");
  Statement extra(database_, "SELECT key, value FROM run_extra WHERE run_id = ? ORDER BY key");
  if (!tags.ok() || !versions.ok() || !extra.ok()) return false;
  bool complete = true;
  for (RunRecord& record : records) {
    for (auto [statement, rows] :
         {std::pair{&tags, &record.metadata.tags}, std::pair{&versions, &record.metadata.versions},
          std::pair{&extra, &record.metadata.extra}}) {
      statement->reset();
      if (!statement->bind(1, record.id)) return false;
      int status = SQLITE_ROW;
      while ((status = statement->step()) == SQLITE_ROW)
        rows->emplace_back(statement->column_text(0), statement->column_text(1));
      if (status != SQLITE_DONE) {
        if (!damage_) return false;
        complete = false;
      }
    }
  }
  return complete;
}

Result<std::vector<RunRecord>> RunStore::list(const RunFilter& filter) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> conditions;
  std::vector<std::variant<int64_t, std::string>> binds;
  if (!filter.name_glob.empty()) {
    conditions.push_back("name GLOB ?");
    binds.emplace_back(filter.name_glob);
  }
  if (!filter.tag.empty()) {
    size_t equals = filter.tag.find('=');
    if (equals == std::string::npos) {
      conditions.push_back(
          "EXISTS (SELECT 1 FROM run_tags WHERE run_tags.run_id = runs.id AND key = ?)");
      binds.emplace_back(filter.tag);
    } else {
      conditions.push_back(
          "EXISTS (SELECT 1 FROM run_tags WHERE run_tags.run_id = runs.id AND key = ? AND "
          "value = ?)");
      binds.emplace_back(filter.tag.substr(0, equals));
      binds.emplace_back(filter.tag.substr(equals + 1));
    }
  }
  if (filter.since_unix_ns) {
    conditions.push_back("created_unix_ns >= ?");
    binds.emplace_back(*filter.since_unix_ns);
  }
  if (filter.until_unix_ns) {
    conditions.push_back("created_unix_ns < ?");
    binds.emplace_back(*filter.until_unix_ns);
  }
  std::string where;
  for (const std::string& condition : conditions)
    where += (where.empty() ? "" : " AND ") + condition;
  return query_runs(where, binds, filter.limit);
}

Result<RunRecord> RunStore::find_by_id(int64_t id) {
  auto found = query_runs("id = ?", {id});
  if (!found.ok()) return Result<RunRecord>::failure(found.error());
  if (found.value().empty())
    return Result<RunRecord>::failure("no run " + std::to_string(id) + " in " + path_);
  return Result<RunRecord>::success(std::move(found.value().front()));
}

Result<RunRecord> RunStore::resolve(std::string_view reference) {
  using RecordResult = Result<RunRecord>;
  std::lock_guard lock(mutex_);
  std::string quoted = "'" + std::string(reference) + "'";
  if (reference.empty()) return RecordResult::failure("an empty run reference names no run");
  if (is_digits(reference) && reference.size() <= 18) {
    // An id first; digits that are no run's id may still begin a uuid.
    auto found = query_runs("id = ?", {std::stoll(std::string(reference))});
    if (!found.ok()) return RecordResult::failure(found.error());
    if (!found.value().empty()) return RecordResult::success(std::move(found.value().front()));
  }
  if (reference == "latest" || reference.starts_with("latest~")) {
    int64_t back = 0;
    if (reference != "latest") {
      std::string_view count = reference.substr(7);
      if (!is_digits(count) || count.size() > 9)
        return RecordResult::failure("bad run reference " + quoted +
                                     ": latest~N needs a whole number N");
      back = std::stoll(std::string(count));
    }
    auto found = query_runs("", {}, 1, static_cast<size_t>(back));
    if (!found.ok()) return RecordResult::failure(found.error());
    if (found.value().empty())
      return RecordResult::failure("no run " + quoted + " in " + path_ +
                                   (back == 0 ? " (the store holds no runs)" : ""));
    return RecordResult::success(std::move(found.value().front()));
  }
  // An exact name wins over a uuid prefix ("a", "b" and "cafe" are names people give), and
  // a uuid prefix needs at least kMinUuidPrefix characters.
  auto named = query_runs("name = ?", {std::string(reference)}, 1);
  if (!named.ok()) return RecordResult::failure(named.error());
  if (!named.value().empty()) return RecordResult::success(std::move(named.value().front()));
  std::string lower = lowercase(reference);
  if (lower.size() >= kMinUuidPrefix && is_uuid_prefix(lower)) {
    auto found = query_runs("substr(uuid, 1, ?) = ?", {static_cast<int64_t>(lower.size()), lower});
    if (!found.ok()) return RecordResult::failure(found.error());
    std::vector<RunRecord>& matches = found.value();
    if (matches.size() == 1) return RecordResult::success(std::move(matches.front()));
    if (matches.size() > 1) {
      std::string message = "run reference " + quoted + " is ambiguous in " + path_ +
                            ": it begins the uuids of " + std::to_string(matches.size()) +
                            " runs: ";
      for (size_t i = 0; i < matches.size() && i < kAmbiguousCandidatesShown; ++i)
        message += (i > 0 ? ", " : "") + std::string("run ") + std::to_string(matches[i].id) +
                   " (" + matches[i].uuid + ")";
      if (matches.size() > kAmbiguousCandidatesShown) message += ", ...";
      return RecordResult::failure(message + "; give more of the uuid, or the run id");
    }
  }
  return RecordResult::failure("no run " + quoted + " in " + path_ +
                               " (name a run by its id, latest, latest~N, its name or at least " +
                               std::to_string(kMinUuidPrefix) +
                               " characters of its uuid; `opsight runs` lists them)");
}

std::optional<std::string> RunStore::select_stored_trace(int64_t id, StoredTraceRow* row) {
  const std::string run = "run " + std::to_string(id) + " in " + path_;
  std::lock_guard lock(mutex_);
  Statement select(database_,
                   "SELECT runs.trace_bytes, run_traces.codec, run_traces.data FROM runs "
                   "LEFT JOIN run_traces ON run_traces.run_id = runs.id WHERE runs.id = ?");
  if (!select.ok() || !select.bind(1, id))
    return run + ": cannot read its trace: " + sqlite_problem();
  int status = select.step();
  if (status == SQLITE_DONE) return "no run " + std::to_string(id) + " in " + path_;
  if (status != SQLITE_ROW) return run + ": cannot read its trace: " + sqlite_problem();
  if (select.column_is_null(1)) return run + ": its trace is missing from the store";
  row->trace_bytes = static_cast<uint64_t>(select.column_int64(0));
  row->codec = select.column_text(1);
  row->data = select.column_blob(2);
  if (row->codec == kFileCodec) {
    // The name comes from the database: only a plain file name of the folder is followed.
    const std::string& name = row->data;
    if (name.empty() || name.find('/') != std::string::npos || name.front() == '.' ||
        name.find('\0') != std::string::npos)
      return run + ": its trace file name is damaged";
  } else if (row->codec != kTraceCodec) {
    return run + ": its trace is stored with an unknown codec '" + row->codec + "'";
  }
  return std::nullopt;
}

void RunStore::make_traces_folder() const {
  std::error_code ignored;  // a folder that cannot be made fails the file's open, which says so
  std::filesystem::create_directories(traces_folder(), ignored);
  ::chmod(traces_folder().c_str(), 0700);
}

namespace {

// A ByteSink into an open file descriptor (the unnamed scratch file of open_native_scratch).
class DescriptorSink final : public io::ByteSink {
 public:
  explicit DescriptorSink(int fd) : fd_(fd) {}
  bool write(std::string_view bytes) override {
    while (!bytes.empty()) {
      ssize_t wrote = ::write(fd_, bytes.data(), bytes.size());
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        error_ = std::string("cannot write the scratch file: ") + std::strerror(errno);
        return false;
      }
      bytes.remove_prefix(static_cast<size_t>(wrote));
    }
    return true;
  }
  const std::optional<std::string>& error() const { return error_; }

 private:
  int fd_;
  std::optional<std::string> error_;
};

}  // namespace

std::optional<std::string> RunStore::write_native(int64_t id, io::ByteSink& sink) {
  const std::string run = "run " + std::to_string(id) + " in " + path_;
  StoredTraceRow row;
  if (auto problem = select_stored_trace(id, &row)) return problem;
  if (row.codec == kFileCodec) {
    const std::string file_path = traces_folder() + "/" + row.data;
    if (auto problem = decompress_file(file_path, row.trace_bytes, sink))
      return run + ": its trace file " + file_path + ": " + *problem;
    return std::nullopt;
  }
  std::string native;
  if (auto problem = decompress(row.data, row.trace_bytes, &native))
    return run + ": its stored trace is damaged: " + *problem;
  if (!sink.write(native)) return run + ": its trace could not be written out";
  return std::nullopt;
}

std::optional<std::string> RunStore::write_native_file(int64_t id, const std::string& path) {
  io::FileSink sink(path);  // renamed into place by commit() only: `path` is kept on failure
  std::optional<std::string> problem = write_native(id, sink);
  if (!problem) problem = sink.commit();
  if (problem && sink.error()) problem = *sink.error();  // the output failed: the cause
  return problem;
}

int RunStore::open_native_scratch(int64_t id, std::string* problem) {
  make_traces_folder();
  // An unnamed file (O_TMPFILE): never seen in its folder, its space freed when the
  // descriptor closes, whatever ends the process. Where the file system cannot make one, a
  // named file removed as soon as it is open does the same. In the traces folder (the
  // store's disk), else, where that cannot be written (a read-only store), the temporary
  // directory.
  std::error_code ignored;
  const std::string folders[] = {traces_folder(),
                                 std::filesystem::temp_directory_path(ignored).string()};
  int fd = -1;
  std::string tried;
  for (const std::string& folder : folders) {
    if (folder.empty()) continue;
    fd = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      std::string name =
          folder + "/.reading-" + std::to_string(::getpid()) + "-" + std::to_string(id) + "-XXXXXX";
      fd = ::mkostemp(name.data(), O_CLOEXEC);
      if (fd >= 0) ::unlink(name.c_str());
    }
    if (fd >= 0) break;
    tried += (tried.empty() ? "" : ", ") + folder + ": " + std::strerror(errno);
  }
  if (fd < 0) {
    *problem = "run " + std::to_string(id) + " in " + path_ +
               ": cannot make a scratch file to read its trace from (" + tried + ")";
    return -1;
  }
  DescriptorSink sink(fd);
  std::optional<std::string> failed = write_native(id, sink);
  if (failed && sink.error()) failed = traces_folder() + ": " + *sink.error();
  if (failed) {
    ::close(fd);
    *problem = *failed;
    return -1;
  }
  return fd;
}

std::string RunStore::descriptor_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

io::ReadResult RunStore::load_trace(int64_t id) {
  io::ReadResult result;
  std::string run = "run " + std::to_string(id) + " in " + path_;
  auto failure = [&](std::string message) {
    result.error = io::Diagnostic{std::move(message), 0, false};
    return std::move(result);
  };
  StoredTraceRow row;
  if (auto problem = select_stored_trace(id, &row)) return failure(*problem);
  if (row.codec == kFileCodec) {
    const std::string file_path = traces_folder() + "/" + row.data;
    // Decompressed into a file of the same folder, which the reader maps and hands back
    // page by page: loading holds the model, not the native bytes too. Removed once read.
    std::string problem;
    const int fd = open_native_scratch(id, &problem);
    if (fd < 0) return failure(problem);
    io::ReadResult read = io::read_trace_file(descriptor_path(fd));
    ::close(fd);
    if (read.error)
      read.error->message =
          run + ": its trace file " + file_path + " is damaged: " + read.error->to_string("trace");
    if (read.damage)
      read.damage->message =
          run + ": its trace file " + file_path + " is damaged: " + read.damage->to_string("trace");
    if (read.error) read.error->has_offset = false;
    if (read.damage) read.damage->has_offset = false;
    return read;
  }
  std::string native;
  if (auto problem = decompress(row.data, row.trace_bytes, &native))
    return failure(run + ": its stored trace is damaged: " + *problem);
  row.data.clear();
  row.data.shrink_to_fit();
  return read_stored_native(native, run);
}

std::optional<std::string> RunStore::delete_runs(const std::vector<int64_t>& ids) {
  Connection connection(database_);
  if (!connection.exec("BEGIN IMMEDIATE")) return describe_error("cannot remove runs");
  // The files of traces kept as files, removed once the rows are gone.
  std::vector<std::string> files;
  {
    Statement select(database_, "SELECT data FROM run_traces WHERE run_id = ? AND codec = ?");
    for (int64_t id : ids) {
      if (!select.ok()) break;
      select.reset();
      if (!select.bind_all(id, std::string(kFileCodec))) break;
      if (select.step() == SQLITE_ROW) {
        std::string name = select.column_blob(0);
        if (!name.empty() && name.find('/') == std::string::npos && name.front() != '.')
          files.push_back(traces_folder() + "/" + name);
      }
    }
  }
  for (const char* sql :
       {"DELETE FROM run_traces WHERE run_id = ?", "DELETE FROM run_tags WHERE run_id = ?",
        "DELETE FROM run_versions WHERE run_id = ?", "DELETE FROM run_extra WHERE run_id = ?",
        "DELETE FROM runs WHERE id = ?"}) {
    Statement remove(database_, sql);
    if (!remove.ok()) {
      std::string problem = describe_error("cannot remove runs");
      connection.exec("ROLLBACK");
      return problem;
    }
    for (int64_t id : ids) {
      remove.reset();
      if (!remove.bind(1, id) || remove.step() != SQLITE_DONE) {
        std::string problem = describe_error("cannot remove run " + std::to_string(id));
        connection.exec("ROLLBACK");
        return problem;
      }
    }
  }
  if (!connection.exec("COMMIT")) {
    std::string problem = describe_error("cannot remove runs");
    connection.exec("ROLLBACK");
    return problem;
  }
  for (const std::string& file : files) ::unlink(file.c_str());  // a missing one is fine
  // Give the freed pages back to the file system (best effort).
  connection.exec("PRAGMA incremental_vacuum");
  return std::nullopt;
}

Result<RunRecord> RunStore::remove(int64_t id) {
  if (auto problem = refuse_writes_if_damaged("remove runs"))
    return Result<RunRecord>::failure(*problem);
  std::lock_guard lock(mutex_);
  auto found = find_by_id(id);
  if (!found.ok()) return found;
  if (auto problem = delete_runs({id})) return Result<RunRecord>::failure(*problem);
  return found;
}

Result<RunRecord> RunStore::set_tag(int64_t id, const std::string& key, const std::string& value) {
  if (auto problem = refuse_writes_if_damaged("tag runs"))
    return Result<RunRecord>::failure(*problem);
  if (key.empty()) return Result<RunRecord>::failure("a tag needs a key");
  std::lock_guard lock(mutex_);
  auto found = find_by_id(id);
  if (!found.ok()) return found;
  Statement insert(database_,
                   "INSERT OR REPLACE INTO run_tags (run_id, key, value) VALUES (?, ?, ?)");
  if (!insert.ok() || !insert.bind_all(id, key, value) || insert.step() != SQLITE_DONE)
    return Result<RunRecord>::failure(describe_error("cannot tag run " + std::to_string(id)));
  return find_by_id(id);
}

Result<RunRecord> RunStore::remove_tag(int64_t id, const std::string& key) {
  if (auto problem = refuse_writes_if_damaged("untag runs"))
    return Result<RunRecord>::failure(*problem);
  std::lock_guard lock(mutex_);
  auto found = find_by_id(id);
  if (!found.ok()) return found;
  const auto& tags = found.value().metadata.tags;
  if (std::none_of(tags.begin(), tags.end(), [&](const auto& tag) { return tag.first == key; }))
    return Result<RunRecord>::failure("run " + std::to_string(id) + " has no tag '" + key + "'");
  Statement remove(database_, "DELETE FROM run_tags WHERE run_id = ? AND key = ?");
  if (!remove.ok() || !remove.bind_all(id, key) || remove.step() != SQLITE_DONE)
    return Result<RunRecord>::failure(describe_error("cannot untag run " + std::to_string(id)));
  return find_by_id(id);
}

Result<std::vector<int64_t>> RunStore::retention_candidates(const RetentionPolicy& policy) {
  std::lock_guard lock(mutex_);
  return select_retention_candidates(policy);
}

Result<std::vector<int64_t>> RunStore::select_retention_candidates(const RetentionPolicy& policy) {
  using Ids = Result<std::vector<int64_t>>;
  std::vector<int64_t> doomed;
  Connection connection(database_);
  auto collect = [&](const std::string& sql, std::optional<int64_t> bound) -> bool {
    Statement select(database_, sql);
    if (!select.ok() || (bound && !select.bind(1, *bound))) return false;
    int status = SQLITE_ROW;
    while ((status = select.step()) == SQLITE_ROW) doomed.push_back(select.column_int64(0));
    return status == SQLITE_DONE;
  };
  if (policy.keep_last &&
      !collect("SELECT id FROM runs ORDER BY id DESC LIMIT -1 OFFSET ?",
               static_cast<int64_t>(std::min<uint64_t>(*policy.keep_last, INT64_MAX))))
    return Ids::failure(describe_error("cannot apply the retention policy"));
  if (policy.max_age_ns) {
    int64_t now = policy.now_unix_ns.value_or(unix_now_ns());
    if (!collect("SELECT id FROM runs WHERE created_unix_ns < ?", now - *policy.max_age_ns))
      return Ids::failure(describe_error("cannot apply the retention policy"));
  }
  std::sort(doomed.begin(), doomed.end());
  doomed.erase(std::unique(doomed.begin(), doomed.end()), doomed.end());
  return Ids::success(std::move(doomed));
}

Result<uint64_t> RunStore::apply_retention(const RetentionPolicy& policy) {
  if (auto problem = refuse_writes_if_damaged("remove runs"))
    return Result<uint64_t>::failure(*problem);
  std::lock_guard lock(mutex_);
  auto doomed = select_retention_candidates(policy);
  if (!doomed.ok()) return Result<uint64_t>::failure(doomed.error());
  if (doomed.value().empty()) return Result<uint64_t>::success(0);
  if (auto problem = delete_runs(doomed.value())) return Result<uint64_t>::failure(*problem);
  return Result<uint64_t>::success(doomed.value().size());
}

}  // namespace opsight::store
