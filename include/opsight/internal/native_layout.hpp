// The byte layout of the native .opsight format, shared by its only writers (the recorder's
// stream writer, io's model writer) and its reader. docs/native-format.md explains it.
//
// A file is a 16-byte header followed by chunks. Each chunk is a 16-byte header and a
// payload; the header carries the payload's size and XXH3-64 checksum (low 32 bits) and
// its own checksum, so a reader stops at the first chunk that is cut short or damaged and
// keeps everything before it. The writer only appends, so a process killed mid-write
// leaves a file whose whole chunks are all readable.
//
// All integers are little-endian. This header depends on nothing but the C++ library.
#pragma once

#include <cstdint>
#include <cstring>

namespace opsight::format {

inline constexpr char kFileMagic[8] = {'O', 'P', 'S', 'I', 'G', 'H', 'T', '\0'};
// Version 2 added kAsyncBegin, kAsyncEnd and kFlow; version 3 added their one-slot forms
// kAsyncBeginPacked and kAsyncEndPacked, and kSpanContext and kSpanId (W3C trace context).
// A reader reads every older version unchanged (an older file has none of the newer kinds).
inline constexpr uint16_t kFormatVersion = 3;
inline constexpr uint16_t kOldestReadableVersion = 1;

struct FileHeader {
  char magic[8];
  uint16_t version;
  uint16_t header_bytes;  // 16; lets later versions grow the header
  uint32_t flags;         // reserved, 0
};
static_assert(sizeof(FileHeader) == 16);

enum class ChunkType : uint32_t {
  kRunInfo = 1,       // key/value strings: "host", "command_line", "pid", ...
  kClockSync = 2,     // ClockSync records: pairs of (ticks, monotonic ns, realtime ns)
  kNames = 3,         // NameRecord entries: interned span names with category and source
  kThread = 4,        // ThreadRecord: a thread's index, pid, tid and name
  kEvents = 5,        // EventsHeader then 16-byte Slots of one thread, in time order
  kStats = 6,         // the footer: ThreadStats per thread and the session's totals
  kDropsSoFar = 7,    // kStats's payload, written mid-session whenever drops grew, so a file
                      // cut short (SIGKILL) still reports the drops up to its last flush
  kIndex = 8,         // IndexHeader then IndexEntry per chunk before it: a part of the index
  kIndexTrailer = 9,  // IndexTrailer: the file's last 32 bytes, pointing at its kIndex chunk
};

struct ChunkHeader {
  uint32_t type;           // ChunkType
  uint32_t payload_bytes;  // at most kMaxChunkPayload
  uint32_t payload_check;  // low 32 bits of XXH3-64 of the payload
  uint32_t header_check;   // low 32 bits of XXH3-64 of the 12 bytes before it
};
static_assert(sizeof(ChunkHeader) == 16);
inline constexpr uint32_t kMaxChunkPayload = 64u << 20;

// kRunInfo payload: u32 count, then count times (u32 key_bytes, key, u32 value_bytes, value).

// kClockSync payload: one or more of these. The reader maps ticks to ns by the line
// through the first and the last sync point of the file (one point: slope 1/ns_per_tick
// from "ticks_per_second" in the run info).
struct ClockSync {
  uint64_t ticks;
  int64_t monotonic_ns;
  int64_t realtime_ns;
};
static_assert(sizeof(ClockSync) == 24);

// kNames payload: entries of (u32 id, u32 line, u16 name_bytes, u16 category_bytes,
// u16 file_bytes, u16 reserved, then the three strings). Ids start at 1.
struct NameRecordHeader {
  uint32_t id;
  uint32_t line;
  uint16_t name_bytes;
  uint16_t category_bytes;
  uint16_t file_bytes;
  uint16_t reserved;
};
static_assert(sizeof(NameRecordHeader) == 16);

// kThread payload: this header then the name's bytes.
struct ThreadRecordHeader {
  uint32_t thread_index;  // dense, per file; Events chunks refer to it
  uint32_t name_bytes;
  int64_t pid;
  int64_t tid;
};
static_assert(sizeof(ThreadRecordHeader) == 24);

// kEvents payload: this header then slot_count Slots.
struct EventsHeader {
  uint32_t thread_index;
  uint32_t slot_count;
  uint64_t first_sequence;  // index of the first slot in the thread's whole stream
};
static_assert(sizeof(EventsHeader) == 16);

// One event slot. Most events are one slot; the kinds marked "+ bytes" are followed by
// `extra_slots` slots holding raw bytes (strings, zero-padded to 16).
enum class SlotKind : uint8_t {
  kBegin = 1,         // ticks; id = name id (kNames)
  kEnd = 2,           // ticks; closes the innermost open span of the thread
  kBeginNamed = 3,    // ticks; id = name length; + bytes (name)
  kInstant = 4,       // ticks; id = name id; arg_type = trace::InstantScope (0: thread)
  kInstantNamed = 5,  // ticks; id = name length; + bytes (name)
  kCounter = 6,       // ticks; id = name length; + one slot holding a double, + bytes (name)
  kArg = 7,           // ticks holds the value (int64, double bits or bool) or, for a
                      // string, its length; id = key length | string length << 16;
                      // arg_type = trace::ArgType; + bytes (key then string value).
                      // Attaches to the innermost open span, or to an instant it follows.
  kTrack = 8,         // ticks holds the track key (no time); id = name length; + bytes
                      // (name, may be empty). The thread's following events belong to
                      // track `key` (0: the thread's own track) until the next kTrack. A
                      // name for a key already seen starts a new track for that key.
  kAsyncBegin = 9,    // ticks; + one slot whose first 8 bytes are the async id; arg_type
                      // kAsyncNameId: id = name id (kNames); kAsyncNameBytes: id = name
                      // length, + bytes (name) after the id slot. Opens a slice on the
                      // process's async track of that id (nestable; may end on any thread).
  kAsyncEnd = 10,     // ticks; + one slot holding the async id. Closes the innermost open
                      // async slice of that id, whichever thread began it.
  kFlow = 11,         // ticks holds the flow id (no time); arg_type = FlowDirection. Binds
                      // one end of flow `id` to the innermost open span of the thread's
                      // current track (kFlowIntoNext: to the next span it begins).
  // The one-slot forms of kAsyncBegin/kAsyncEnd (a span's begin or end is one slot too).
  // Only the kind byte keeps its place: the first 8 bytes hold the payload below, and the
  // other 7 bytes (id, arg_type, extra_slots) the low 56 bits of the ticks (see
  // pack_async/unpack_async_ticks). Never followed by extra slots.
  kAsyncBeginPacked = 12,  // payload: name id (kNames, < 2^24) | async id (< 2^40) << 24
  kAsyncEndPacked = 13,    // payload: the async id
  kSpanContext = 14,       // ticks holds the remote parent span id (0: none; no time); arg_type
                           // = W3C trace flags; + one slot: the trace id (high 8 bytes, then
                           // low). The innermost open span of the thread's current track joins
                           // that trace.
  kSpanId = 15,            // ticks holds a span id (no time): the innermost open span of the
                           // thread's current track takes it (the id sent in a traceparent).
};

// The packed async forms' limits: a begin whose name id or async id is larger is written
// in the two-slot form.
inline constexpr uint32_t kPackedNameIdLimit = uint32_t{1} << 24;
inline constexpr uint64_t kPackedAsyncIdLimit = uint64_t{1} << 40;
inline constexpr int kPackedTicksBits = 56;

enum AsyncNameForm : uint8_t { kAsyncNameId = 0, kAsyncNameBytes = 1 };

// kFlow's arg_type: which end of the flow the event binds. A flow runs from its kFlowOut
// end through any kFlowStep ends (each both an arrival and a new departure) to its
// kFlowIn end; ends are ordered by time when a flow id has several.
enum FlowDirection : uint8_t {
  kFlowOut = 1,
  kFlowIn = 2,
  kFlowStep = 3,
  kFlowIntoNext = 4,
};
// Or'ed into kFlow's arg_type (the model writer's form): the end binds to the async span
// begun by this thread's last kAsyncBegin, not to a span of the thread's track.
inline constexpr uint8_t kFlowOnAsyncBegin = 0x80;

// kSpanContext's id: the context binds to the lane's outermost open span (the root of what
// is open: opsight::join_session_trace), not to its innermost (0).
inline constexpr uint32_t kSpanContextOnRoot = 1;

// kEnd's arg_type: the real end was dropped and this one was written as soon as the thread
// could record again (the span is unfinished).
inline constexpr uint8_t kEndIsLate = 1;
// kEnd's arg_type: the span never ended in the trace this file was converted from (the
// model writer's form of trace::kSliceUnfinished); this end is where that trace closed it.
inline constexpr uint8_t kEndOfUnfinished = 2;

struct Slot {
  uint64_t ticks;
  uint32_t id;
  uint8_t kind;      // SlotKind
  uint8_t arg_type;  // for kArg
  uint16_t extra_slots;
};
static_assert(sizeof(Slot) == 16);

constexpr bool is_packed_async(uint8_t kind) {
  return kind == static_cast<uint8_t>(SlotKind::kAsyncBeginPacked) ||
         kind == static_cast<uint8_t>(SlotKind::kAsyncEndPacked);
}

// How many payload slots follow the event `slot` (0 for the packed kinds, whose
// extra_slots bytes hold ticks).
constexpr uint32_t extra_slots_of(const Slot& slot) {
  return is_packed_async(slot.kind) ? 0 : slot.extra_slots;
}

// The second 8 bytes of a packed async slot: the low 56 bits of `ticks` around the kind.
constexpr uint64_t packed_async_word(SlotKind kind, uint64_t ticks) {
  return (ticks & 0xFFFF'FFFFu) | (uint64_t{static_cast<uint8_t>(kind)} << 32) |
         (((ticks >> 32) & 0xFF'FFFFu) << 40);
}

// The low 56 bits of the ticks a packed async slot holds.
constexpr uint64_t packed_async_ticks_low(const Slot& slot) {
  return uint64_t{slot.id} | (uint64_t{slot.arg_type} << 32) | (uint64_t{slot.extra_slots} << 40);
}

// A packed slot's full ticks, from its low 56 bits and `reference`, a tick count near it
// (the same thread's previous event): the value nearest the reference, so a thread whose
// events are less than 2^55 ticks apart (139 days at 3 GHz) reads exactly, across a carry
// into bit 56 too.
constexpr uint64_t unpack_async_ticks(uint64_t low56, uint64_t reference) {
  constexpr uint64_t kMask = (uint64_t{1} << kPackedTicksBits) - 1;
  uint64_t delta = (low56 - reference) & kMask;  // forward distance, modulo 2^56
  if (delta >= (uint64_t{1} << (kPackedTicksBits - 1)))
    return reference - ((reference - low56) & kMask);  // behind the reference
  return reference + delta;
}

constexpr uint16_t slots_for_bytes(size_t bytes) {
  return static_cast<uint16_t>((bytes + sizeof(Slot) - 1) / sizeof(Slot));
}
inline constexpr uint32_t kMaxInlineString = 16383;  // longer names/values are truncated

// kStats payload: SessionStats then thread_count ThreadStats.
struct SessionStats {
  uint64_t stop_ticks;
  uint64_t thread_count;
  uint64_t events_dropped;  // all threads
  double event_cost_ns;     // calibrated cost of recording one event
};
static_assert(sizeof(SessionStats) == 32);

struct ThreadStats {
  uint32_t thread_index;
  uint32_t reserved;
  uint64_t events_recorded;
  uint64_t events_dropped;
  uint64_t slow_path_ticks;  // measured time in the recorder's slow paths
};
static_assert(sizeof(ThreadStats) == 32);

// The time index (chunk types 8 and 9; older readers skip both). The index comes in parts:
// each kIndex chunk is an IndexHeader then entry_count IndexEntry, one per chunk since the
// previous part, in file order, and names the previous part, so that a writer holds at most
// one part (kIndexEntriesPerPart entries, 4 MiB) whatever the recording's length. The file
// ends with the last part and a kIndexTrailer chunk (32 bytes in all) holding that part's
// offset, so a reader finds the index with one read from the end. A file without them (a
// process killed mid-session, a file from before the index) is indexed by a scan.
// docs/native-format.md, "Time index".
inline constexpr uint32_t kIndexVersion = 1;
inline constexpr uint32_t kIndexEntriesPerPart = 65536;
struct IndexHeader {
  uint32_t index_version;  // kIndexVersion: a reader ignores an index of another version
  uint32_t entry_bytes;    // sizeof(IndexEntry); later versions may grow an entry
  uint64_t entry_count;
  uint64_t previous_part;  // the offset of the previous kIndex chunk; 0: this is the first
};
static_assert(sizeof(IndexHeader) == 24);

// IndexEntry::flags.
enum IndexFlags : uint32_t {
  // The thread's state is empty where this kEvents chunk begins: no span open on it, never
  // switched tracks, no instant that args could still attach to, no flow waiting for the
  // next begin. A windowed read may start decoding the thread here.
  kIndexCleanStart = 1,
  kIndexHasTicksBefore = 2,  // ticks_before holds the thread's previous timed event
  kIndexHasAsync = 4,        // the chunk holds async begins or ends (or flows bound to them)
  kIndexHasSpans = 8,        // the chunk holds a begin or an instant (the thread has a track)
  // The thread's state is empty somewhere in this kEvents chunk (at its start, or after an
  // end): no span open, never switched tracks, no flow waiting for the next begin. A windowed
  // read may start decoding the thread at this chunk with an empty state (what was open at
  // its start ends before that point), and may stop after it (what was open before ends).
  kIndexResumable = 16,
};

struct IndexEntry {
  uint64_t offset;        // of the chunk's header
  uint32_t type;          // ChunkType
  uint32_t thread_index;  // kEvents: EventsHeader::thread_index; else 0
  // kEvents: the earliest and latest ticks of the chunk's timed events (min > max: none).
  uint64_t min_ticks;
  uint64_t max_ticks;
  // kEvents, what decoding the thread from this chunk needs from the chunks before it: the
  // ticks of its last timed event (packed ticks' reference), its begins and async begins
  // so far (derived span ids).
  uint64_t ticks_before;
  uint64_t begins_before;
  uint64_t async_begins_before;
  uint32_t event_count;  // kEvents: events (not payload slots), stale ones left out
  uint32_t flags;        // IndexFlags
};
static_assert(sizeof(IndexEntry) == 64);

inline constexpr char kIndexTrailerMagic[8] = {'O', 'P', 'S', 'I', 'N', 'D', 'E', 'X'};
struct IndexTrailer {
  uint64_t index_offset;  // of the kIndex chunk's header
  char magic[8];          // kIndexTrailerMagic
};
static_assert(sizeof(IndexTrailer) == 16);

}  // namespace opsight::format
