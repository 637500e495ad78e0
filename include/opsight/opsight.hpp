// opsight: see where the time of a program goes, at nanosecond cost.
//
// Quick start
// -----------
//   #include <opsight/opsight.hpp>
//
//   void load_batch() {
//     OPSIGHT_SPAN("load_batch");          // a scoped span: recorded from here to the '}'
//     ...
//   }
//
//   int main() {
//     opsight::Session session("run.opsight");  // records while alive, writes at exit
//     for (int step = 0; step < 100; ++step) {
//       opsight::Span span("step");             // a span with a run-time name
//       span.arg("step", step).arg("lr", 0.1);   // attributes: int, double, string, bool
//       load_batch();
//       OPSIGHT_COUNTER("queue_depth", 3);       // a counter sample
//     }
//   }                                           // `opsight report run.opsight --tree`
//
// Or change no code at all: OPSIGHT_OUTPUT=run.opsight ./app (or trace.json for a Chrome /
// Perfetto trace) records the whole run of any program linked with opsight.
//
// CMake: find_package(opsight CONFIG REQUIRED) and
//        target_link_libraries(app PRIVATE opsight::opsight).
// Compile with -DOPSIGHT_ENABLE=0 and every OPSIGHT_* macro compiles to nothing.
//
// Cost: an enabled span costs about 2 rdtsc reads and 4 stores (docs/performance.md); with
// no session running, one load and one branch. Memory is bounded by
// SessionOptions::buffer_bytes; events beyond it are dropped and the drops reported.
//
// Thread-safety: every function here may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "opsight/internal/recorder_inline.hpp"

#ifndef OPSIGHT_ENABLE
#define OPSIGHT_ENABLE 1
#endif

namespace opsight {

// The version of the library, e.g. "0.1.0".
OPSIGHT_API const char* version();

// A name registered once and then recorded by id (what front ends such as the Python
// package use for their wrapped functions). Never 0 for a registered name.
using NameId = uint32_t;
OPSIGHT_API NameId register_name(std::string_view name, std::string_view category = {});

// True while a session is recording (not paused), and the calling thread's current track
// is not inside a sampled-out unit (see SessionOptions::sample_rate).
inline bool recording() {
  return internal::g_recording.load(std::memory_order_relaxed) && !internal::thread_sampled_out();
}

// Begin/end calls for front ends. Each thread's spans nest: end() closes the innermost
// span the thread began. begin() returns whether it recorded; call end() only if it did.
// (With sampling, the begin of a sampled-out unit's root returns true without writing:
// its end() closes the unit.)
inline bool begin(NameId name) {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return false;
  if (internal::g_sampling.load(std::memory_order_relaxed)) [[unlikely]]
    return internal::begin_sampled(name);
  return internal::write_begin(name);
}
OPSIGHT_API bool begin(std::string_view name);  // a run-time name, copied
inline void end() { internal::end_span(); }

// Attributes of the innermost open span of this thread (or of the instant just recorded).
OPSIGHT_API void add_arg(std::string_view key, int64_t value);
OPSIGHT_API void add_arg(std::string_view key, double value);
OPSIGHT_API void add_arg(std::string_view key, std::string_view value);
OPSIGHT_API void add_arg_bool(std::string_view key, bool value);
inline void add_arg(std::string_view key, int value) { add_arg(key, static_cast<int64_t>(value)); }
inline void add_arg(std::string_view key, const char* value) {
  add_arg(key, std::string_view(value));
}

// A point in time, a counter sample, the current thread's name.
OPSIGHT_API void instant(std::string_view name);
OPSIGHT_API void counter(std::string_view name, double value);
OPSIGHT_API void set_thread_name(std::string_view name);

// Async tracks: the calling thread's following begins, ends, args and instants belong to
// the track `key` until its next switch_track, so that tasks interleaved on one thread
// (asyncio tasks, coroutines, fibers) each get a timeline of their own on which their
// spans nest. Key 0 is the thread's own track, where every thread starts. `name` labels
// the track ("asyncio Task-3 (handler)"); pass it the first time a key is used. Passing a
// name again for a key already used means the key now stands for a new task (an address
// reused after the old task finished): a new track is started for it. Without a name a
// track is shown as "track <key>".
// Recorded whenever a session runs, paused or not (ends recorded while paused must land
// on the right track); does nothing when no session runs. Without a name it costs one
// event slot: no lock, no allocation. Switch back to key 0 before running code that is
// not part of a task.
OPSIGHT_API void switch_track(uint64_t key, std::string_view name = {});

// Async spans: a slice on the process's async track for `id` (a request id, a queue
// entry, a CUDA stream), begun on one thread and ended on any other. Spans of one id nest
// by time; end_async(id) closes the innermost open one of that id. Recorded like begin():
// only while recording; an async span that never ends is shown unfinished at the end of
// the trace. Inlined like begin()/end(), and as cheap: each call writes one event slot
// (a begin_async whose id is 2^40 or more takes two).
inline bool begin_async(NameId name, uint64_t id) {
  if (!recording()) return false;
  return internal::write_async_begin(name, id);
}
OPSIGHT_API bool begin_async(std::string_view name, uint64_t id);  // a run-time name, copied
// Recorded even while paused, like end(): the begin may have been recorded before the
// pause. Without a session the reserve fails and nothing is written.
inline void end_async(uint64_t id) {
  internal::write_packed_async(format::SlotKind::kAsyncEndPacked, id);
}

// Flows: arrows from the span that hands work off to the span that picks it up, on any
// thread, asyncio task or process (a job submitted to a pool, a request queued for a
// batcher, a child process started by its parent). The sender calls flow_out(id) inside
// its span; the receiver calls flow_in(id) inside the span that does the work (or
// flow_into_next(id) before it begins), with the same id, taken from new_flow_id() and
// handed across with the work. flow_step(id) marks an intermediate stop (arrives and
// leaves again). Each costs one event slot; does nothing when not recording. An end with
// no open span to bind to, or a flow whose other end never comes, is counted, not shown.
OPSIGHT_API uint64_t new_flow_id();  // unique across threads and processes (never 0)
inline void flow_out(uint64_t id) { internal::write_flow(id, format::kFlowOut); }
inline void flow_in(uint64_t id) { internal::write_flow(id, format::kFlowIn); }
inline void flow_step(uint64_t id) { internal::write_flow(id, format::kFlowStep); }
inline void flow_into_next(uint64_t id) { internal::write_flow(id, format::kFlowIntoNext); }

// W3C trace context (https://www.w3.org/TR/trace-context/), so that one request's spans
// in several processes form one trace in Jaeger or any OpenTelemetry back-end:
//   server side: inside the span begun for a request whose `traceparent` header parses,
//     join_remote_trace(context): that span (and every span under it) belongs to the
//     caller's trace, its parent the caller's span; for a request without one,
//     begin_trace(): that span is the root of a trace of its own (a trace per request,
//     as the OpenTelemetry SDK gives every root span a new trace id);
//   client side: inside the span that makes the call, take an id (new_flow_id()),
//     set_span_id(id), and send format_traceparent({trace id of the request being served,
//     or, outside any, the trace join_session_trace() returns, id, flags}).
// Every other root span (a thread's or task's outermost span that joined no trace) is the
// root of a trace of its own, derived from the run's trace id and its span id when the
// trace is exported (trace::root_trace_id).
// Each call writes one event (join_remote_trace two) for the innermost open span of the
// thread's current track; without one it is counted, not shown. Does nothing when not
// recording. The front ends keep which trace a thread is serving (Python: a contextvar).
struct TraceContext {
  uint64_t trace_id_high = 0;
  uint64_t trace_id_low = 0;
  uint64_t span_id = 0;     // the caller's span: the parent of the span that joins
  uint8_t trace_flags = 1;  // bit 0: sampled
  bool valid() const { return (trace_id_high | trace_id_low) != 0 && span_id != 0; }
};
// Parses "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>" (version 00, and any later
// version's first four fields as the specification asks); nullopt for anything else,
// all-zero ids included.
OPSIGHT_API std::optional<TraceContext> parse_traceparent(std::string_view header);
OPSIGHT_API std::string format_traceparent(const TraceContext& context);
OPSIGHT_API void join_remote_trace(const TraceContext& remote);
// The innermost open span begins a new trace (a new 128-bit id, unique across threads,
// processes and runs) as its root; returns that trace's context (span_id 0: no parent),
// all zero when not recording.
OPSIGHT_API TraceContext begin_trace(uint8_t trace_flags = 1);
OPSIGHT_API void set_span_id(uint64_t span_id);
// The running session's trace id; all zero when no session runs.
OPSIGHT_API TraceContext session_trace_id();
// For a call made outside any request being served: the outermost open span of the
// thread's current track (the root of what is open there), and every span under it, stay
// in the session's trace instead of a trace of their own, so that the callee, told that
// trace, joins the caller's. The recorder keeps no stack of open spans, so it cannot name
// that root's own trace while it runs; the session's is the one trace every call of every
// root agrees on. Writes one event (two slots); returns session_trace_id() (all zero, and
// nothing written, when not recording). Several calls in one root write the same thing.
OPSIGHT_API TraceContext join_session_trace();

namespace internal {
// For front ends whose hooks cost time the recorder cannot see (the torch operator
// observer: torch's RecordFunction machinery runs only because a callback is installed):
// adds `nanoseconds` to the calling thread's tracer overhead, which the reports' overhead
// line shows. Does nothing on a thread that never recorded.
OPSIGHT_API void add_overhead_ns(double nanoseconds);
// For front ends whose threads have names the recorder cannot see (Python's
// threading.Thread.name): names the thread with system id `tid` (gettid), unless it was
// named already (set_thread_name wins). A thread that has not recorded yet takes the name
// when it first records; such names are kept until forget_unclaimed_thread_name(tid) or
// the session's end, for at most 4,096 threads.
OPSIGHT_API void name_thread_if_unnamed(int64_t tid, std::string_view name);
// The thread `tid` is ending: a name it never took is dropped (its id may be reused).
OPSIGHT_API void forget_unclaimed_thread_name(int64_t tid);
}  // namespace internal

// A scoped span from a static call site; what OPSIGHT_SPAN expands to.
class SpanScope {
 public:
  explicit SpanScope(const CallSite& site) noexcept : recorded_(internal::begin_span(site)) {}
  ~SpanScope() {
    if (recorded_) internal::end_span();
  }
  SpanScope(const SpanScope&) = delete;
  SpanScope& operator=(const SpanScope&) = delete;

 private:
  bool recorded_;
};

// A scoped span with a run-time name and attributes. Attributes attach to the innermost
// open span of the thread: set them before opening child spans.
class Span {
 public:
  explicit Span(std::string_view name) noexcept : recorded_(begin(name)) {}
  explicit Span(NameId name) noexcept : recorded_(begin(name)) {}
  ~Span() { end(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  Span& arg(std::string_view key, int64_t value) {
    if (recorded_) add_arg(key, value);
    return *this;
  }
  Span& arg(std::string_view key, int value) { return arg(key, static_cast<int64_t>(value)); }
  Span& arg(std::string_view key, double value) {
    if (recorded_) add_arg(key, value);
    return *this;
  }
  Span& arg(std::string_view key, std::string_view value) {
    if (recorded_) add_arg(key, value);
    return *this;
  }
  Span& arg(std::string_view key, const char* value) { return arg(key, std::string_view(value)); }
  Span& arg(std::string_view key, bool value) {
    if (recorded_) add_arg_bool(key, value);
    return *this;
  }
  // Ends the span before the end of the scope; later calls do nothing.
  void end() {
    if (recorded_) internal::end_span();
    recorded_ = false;
  }

 private:
  bool recorded_;
};

// What a Session records and where it writes it.
struct SessionOptions {
  // ".opsight" (native, streamed while recording: a crash loses at most the last flush
  // interval), ".json" (Chrome Trace Event Format, for Perfetto UI and chrome://tracing;
  // streamed to "<output>.opsight.tmp" and converted at stop), or empty (kept in memory:
  // take it with Session::take_native_bytes()).
  std::string output;
  // Memory for events recorded and not yet written out (in 64 KiB chunks; each recording
  // thread also holds one chunk of its own). When the writer falls this far behind,
  // events are dropped and counted, never waited for.
  size_t buffer_bytes = size_t{64} << 20;
  // How often recorded events are streamed to the output.
  uint32_t flush_interval_ms = 100;
  // When > 0, a background thread samples the process's RSS, CPU use and I/O rates and
  // every GPU's utilization, memory, power and temperature this often, as counter tracks
  // (docs/metrics.md). 0: no sampler.
  uint32_t sample_interval_ms = 0;
  // Sampling by unit (always-on tracing at a fraction of the cost): below 1, only this
  // share of the units is recorded, spread evenly (the first, then one in every
  // 1/sample_rate); a unit sampled out records nothing (a torch forward left out costs
  // within about 1% of an untraced one: docs/performance.md). A unit is a root span (the
  // first span a thread or async track begins with none open) or, when `sample_root` is
  // set, a span of that name ("category:NAME": of that category) begun outside a unit,
  // with everything under it. 0 records no unit at all (OpenTelemetry's `always_off`).
  // The run info says the policy and how many units were seen and recorded
  // ("sampling", "sampling_units", "sampling_units_recorded"); reports state it.
  double sample_rate = 1.0;
  std::string sample_root = {};
  // Sample only the front ends' hooks (torch operators): every span is recorded, and the
  // operators of the units sampled out are not (the always-on preset, docs/production.md).
  bool sample_operators_only = false;
  // GPU tracing (docs/gpu.md): CUDA kernels, copies, memsets, syncs, runtime and driver
  // API calls and NVTX ranges through CUPTI, each kernel linked to the call (and so the
  // operator, module and Python line) that launched it; merged into the output at stop.
  // Where it cannot run (no libcupti, driver or GPU; another CUPTI client attached)
  // gpu_status() says why in one line and the session records everything else.
  bool cuda = false;
  // libcupti to load (empty: OPSIGHT_CUPTI_PATH, a copy already loaded, the loader's path).
  std::string cupti_path = {};
  // Flight recorder (docs/production.md): "60s", "256MiB" or both ("60s,1GiB"): keep only
  // the most recent events, in memory, and write nothing until a dump (Session::dump(),
  // `opsight ctl PID dump`, SIGUSR2, a root span ending with an exception or slower than
  // `dump_on_slow`) or the session's end, when the output gets what the ring holds. Empty:
  // off (everything is streamed to the output).
  std::string ring = {};
  // Where dumps go: "<dump_prefix>.dump-N.opsight". Empty: the output without its
  // extension, or "opsight-<pid>" in the working directory for an in-memory session.
  std::string dump_prefix = {};
  // Dump when a root span of a name lasts longer than a duration: "NAME>200ms", comma
  // separated.
  std::string dump_on_slow = {};
  // Dump when a root span ends with an exception (its `exception.type` argument).
  bool dump_on_exception = true;
};

// Sampling, for front ends: the next span the calling thread begins (on whichever track)
// opens a unit that is recorded (or not) whatever its name and the rate say, unless it
// begins inside a unit: the sampled flag of a caller's W3C traceparent, the decision of the
// unit that handed work to a thread pool or a child process. Counted with the others. Does
// nothing when the session does not sample.
OPSIGHT_API void decide_next_sampling_unit(bool recorded);
// The unit the calling thread's current track is in, for a front end handing work over
// (to a thread pool, a child process): the receiving side continues it with
// decide_next_sampling_unit. kNone also when the session does not sample.
enum class SamplingUnit : uint8_t { kNone, kRecorded, kSampledOut };
OPSIGHT_API SamplingUnit current_sampling_unit();
// Whether the calling thread's current track is inside a sampled-out unit.
inline bool sampled_out() { return internal::thread_sampled_out(); }
// Called on a thread when it enters (true) or leaves (false) a sampled-out unit, so that a
// front end can switch its own hooks off meanwhile (the torch operator observer does).
OPSIGHT_API void set_sampling_listener(void (*listener)(bool sampled_out));

// Records while alive. One session at a time per process: a second one reports an error
// through ok()/error() and records nothing. Thread-safety: construct, pause, resume and
// stop from one thread; recording happens on all threads.
class OPSIGHT_API Session {
 public:
  explicit Session(SessionOptions options);
  explicit Session(std::string output) : Session(SessionOptions{std::move(output)}) {}
  ~Session();  // stops (and writes) if still running
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void pause();
  void resume();
  // Stops recording and finishes the output. Returns ok(). Later calls do nothing.
  bool stop();

  bool ok() const;
  // What went wrong (names the file), empty if nothing did.
  const std::string& error() const;
  // Events lost to the memory bound so far (reported in the output too).
  uint64_t events_dropped() const;
  // For an in-memory session after stop(): the recording in the native format.
  std::string take_native_bytes();
  // Why GPU tracing is off when SessionOptions::cuda asked for it (one line), or what it
  // recorded after stop ("GPU: 1234 kernels, 56 copies ..."); empty when not asked.
  const std::string& gpu_status() const;
  // Starts GPU tracing in a running session that did not ask for it at its start (a front
  // end that waits for the program to initialise CUDA). Returns gpu_status(): empty when
  // tracing started (or already runs), else the one line that says why not.
  const std::string& start_gpu_tracing(const std::string& cupti_path = {});
  // With a flight recorder (SessionOptions::ring): writes what the ring holds now to the
  // next dump file and returns its path; else, or when it cannot, an empty path and
  // *error says why.
  std::string dump(std::string_view trigger, std::string* error);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace opsight

#define OPSIGHT_INTERNAL_CONCAT2(a, b) a##b
#define OPSIGHT_INTERNAL_CONCAT(a, b) OPSIGHT_INTERNAL_CONCAT2(a, b)

#if OPSIGHT_ENABLE
// A span from here to the end of the enclosing scope. `name` must be a string literal.
#define OPSIGHT_SPAN(name) OPSIGHT_SPAN_CATEGORY("", name)
#define OPSIGHT_SPAN_CATEGORY(category, name)                                                 \
  static constinit ::opsight::CallSite OPSIGHT_INTERNAL_CONCAT(opsight_call_site_, __LINE__){ \
      name, category, __FILE__, static_cast<uint32_t>(__LINE__)};                             \
  ::opsight::SpanScope OPSIGHT_INTERNAL_CONCAT(opsight_span_, __LINE__) {                     \
    OPSIGHT_INTERNAL_CONCAT(opsight_call_site_, __LINE__)                                     \
  }
#define OPSIGHT_INSTANT(name) ::opsight::instant(name)
#define OPSIGHT_COUNTER(name, value) ::opsight::counter(name, static_cast<double>(value))
#define OPSIGHT_THREAD_NAME(name) ::opsight::set_thread_name(name)
#else
#define OPSIGHT_SPAN(name) static_cast<void>(0)
#define OPSIGHT_SPAN_CATEGORY(category, name) static_cast<void>(0)
#define OPSIGHT_INSTANT(name) static_cast<void>(0)
#define OPSIGHT_COUNTER(name, value) static_cast<void>(0)
#define OPSIGHT_THREAD_NAME(name) static_cast<void>(0)
#endif
