// opsight._native's recording primitives (src/record, include/opsight/opsight.hpp): span
// names, spans, async spans, flows, instants, counters, thread names, W3C trace context,
// sampling units, the Python switch, spans at times measured elsewhere (begin_at/end_at),
// log records (the logging bridge's, schema/log_names.hpp), and the recorder as a table of
// C functions for the package's other native extensions.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "bindings.hpp"
#include "opsight/opsight.hpp"
#include "record/registry.hpp"
#include "record/thread_buffers.hpp"
#include "recorder_api.h"
#include "schema/log_names.hpp"
#include "traced_callables.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

void add_python_arg(std::string_view key, nb::handle value) {
  if (nb::isinstance<nb::bool_>(value)) {
    opsight::add_arg_bool(key, nb::cast<bool>(value));
  } else if (nb::isinstance<nb::int_>(value)) {
    int64_t number = 0;
    if (nb::try_cast(value, number))
      opsight::add_arg(key, number);
    else
      opsight::add_arg(key, std::string_view(nb::str(value).c_str()));
  } else if (nb::isinstance<nb::float_>(value)) {
    opsight::add_arg(key, nb::cast<double>(value));
  } else if (nb::isinstance<nb::str>(value)) {
    opsight::add_arg(key, nb::cast<std::string_view>(value));
  } else {
    opsight::add_arg(key, std::string_view(nb::str(value).c_str()));
  }
}

// One log record of the logging bridge (opsight.integrations.logs), as
// schema/log_names.hpp lays it out: an instant of the "log" name `name_id` (registered in
// category schema::kLogCategory), now, on the calling thread's log lane, with the key of
// the track the thread was on and the record's arguments; then the thread is back on that
// track. Optional texts are skipped when empty; `extras` is None or a sequence of (key,
// value) pairs, each value typed as add_arg types it. Returns whether it was recorded:
// nothing is written when no session records here (none running, paused, a sampled-out
// unit), and no argument is written when the instant could not be (the pool is full).
bool record_log(uint32_t name_id, int64_t level, std::string_view message, std::string_view logger,
                std::string_view path, int64_t line, std::string_view function,
                std::string_view exception_type, std::string_view exception_message,
                std::string_view exception_stacktrace, std::string_view stack, nb::handle extras) {
  if (!opsight::recording()) return false;
  // The track the thread is on now, and whether its log lane was named in this session.
  uint64_t generation = record::registry().session_generation.load(std::memory_order_relaxed);
  record::sync_track_generation(generation);
  const uint64_t home = record::t_track.requested_key;
  thread_local uint64_t t_log_lane_named_in = ~uint64_t{0};
  bool first = t_log_lane_named_in != generation;
  t_log_lane_named_in = generation;
  opsight::switch_track(schema::kLogLaneKey, first ? schema::kLogLaneName : std::string_view());
  bool written = false;
  if (format::Slot* slot = internal::reserve(1)) {
    internal::write_slot(slot, internal::now_ticks(),
                         internal::slot_word(name_id, format::SlotKind::kInstant));
    internal::commit(1);
    written = true;
  }
  // The track goes back whatever happens to the arguments (an extra field's str() may raise).
  struct BackHome {
    uint64_t key;
    ~BackHome() { opsight::switch_track(key); }
  } back_home{home};
  if (!written) return false;
  opsight::add_arg(schema::kLogLevel, level);
  opsight::add_arg(schema::kLogLane, static_cast<int64_t>(home));
  opsight::add_arg(schema::kLogMessage, message);
  opsight::add_arg(schema::kLogLoggerName, logger);
  if (!path.empty()) opsight::add_arg("code.file.path", path);
  opsight::add_arg("code.line.number", line);
  if (!function.empty()) opsight::add_arg("code.function.name", function);
  if (!stack.empty()) opsight::add_arg("code.stacktrace", stack);
  if (!exception_type.empty()) {
    opsight::add_arg("exception.type", exception_type);
    opsight::add_arg("exception.message", exception_message);
    if (!exception_stacktrace.empty())
      opsight::add_arg("exception.stacktrace", exception_stacktrace);
  }
  if (!extras.is_none()) {
    for (nb::handle pair : extras) {
      nb::handle key = pair[0];
      if (!nb::isinstance<nb::str>(key)) continue;
      add_python_arg(nb::cast<std::string_view>(key), pair[1]);
    }
  }
  return true;
}

// The recorder as a table of C functions for the package's other native extensions (see
// recorder_api.h); static, so the capsule's pointer stays valid for the process.
const OpsightRecorderApi kRecorderApi = {
    OPSIGHT_RECORDER_API_VERSION,
    [](const char* name, size_t name_size, const char* category, size_t category_size) {
      return opsight::register_name(std::string_view(name, name_size),
                                    std::string_view(category, category_size));
    },
    [] { return opsight::recording() ? 1 : 0; },
    [](uint32_t name_id) { return opsight::begin(name_id) ? 1 : 0; },
    [] { opsight::end(); },
    [](const char* key, size_t key_size, const char* value, size_t value_size) {
      opsight::add_arg(std::string_view(key, key_size), std::string_view(value, value_size));
    },
    [](const char* key, size_t key_size, int64_t value) {
      opsight::add_arg(std::string_view(key, key_size), value);
    },
    [](double nanoseconds) { opsight::internal::add_overhead_ns(nanoseconds); },
    &opsight::internal::g_recording,
    [](void (*listener)(int)) {
      // One listener at a time (the torch observer's); the core's takes a bool.
      static std::atomic<void (*)(int)> g_listener{nullptr};
      g_listener.store(listener);
      opsight::set_sampling_listener(listener == nullptr ? nullptr : +[](bool sampled_out) {
        if (auto* current = g_listener.load()) current(sampled_out ? 1 : 0);
      });
    },
};

}  // namespace

void bind_record(nb::module_& m) {
  m.def("version", [] { return std::string(opsight::version()); });
  m.attr("_recorder_api") = nb::steal(PyCapsule_New(const_cast<OpsightRecorderApi*>(&kRecorderApi),
                                                    OPSIGHT_RECORDER_API_CAPSULE, nullptr));
  m.def("register_name", &opsight::register_name, nb::arg("name"), nb::arg("category") = "",
        "Interns a span name once; returns its id.");
  m.def(
      "begin", [](uint32_t name_id) { return opsight::begin(name_id); }, nb::arg("name_id"),
      "Begins a span by name id; returns whether it recorded (call end() only then).");
  m.def("end", [] { opsight::end(); });
  m.def(
      "begin_async",
      [](std::string_view name, uint64_t id) { return opsight::begin_async(name, id); },
      nb::arg("name"), nb::arg("id"));
  m.def(
      "end_async", [](uint64_t id) { opsight::end_async(id); }, nb::arg("id"));
  m.def("new_flow_id", [] { return opsight::new_flow_id(); });
  // W3C trace context (opsight.hpp): the traceparent text in and out, and the two events.
  m.def(
      "parse_traceparent",
      [](std::string_view header) -> std::optional<std::tuple<std::string, uint64_t, int>> {
        auto context = opsight::parse_traceparent(header);
        if (!context) return std::nullopt;
        std::string hex = opsight::format_traceparent(*context).substr(3, 32);
        return std::make_tuple(hex, context->span_id, static_cast<int>(context->trace_flags));
      },
      nb::arg("header"), "(trace id hex, parent span id, flags) or None.");
  m.def(
      "format_traceparent",
      [](const std::string& trace_id_hex, uint64_t span_id, int flags) {
        auto context = opsight::parse_traceparent("00-" + trace_id_hex + "-0000000000000001-00");
        if (!context) throw std::invalid_argument("not a W3C trace id: '" + trace_id_hex + "'");
        context->span_id = span_id;
        context->trace_flags = static_cast<uint8_t>(flags);
        return opsight::format_traceparent(*context);
      },
      nb::arg("trace_id_hex"), nb::arg("span_id"), nb::arg("flags") = 1);
  m.def(
      "join_remote_trace",
      [](std::string_view traceparent) {
        auto context = opsight::parse_traceparent(traceparent);
        if (context) opsight::join_remote_trace(*context);
        return context.has_value();
      },
      nb::arg("traceparent"),
      "The innermost open span joins the caller's trace; False if the header does not parse.");
  m.def(
      "begin_trace",
      [](int flags) {
        opsight::TraceContext context = opsight::begin_trace(static_cast<uint8_t>(flags));
        if ((context.trace_id_high | context.trace_id_low) == 0) return std::string();
        context.span_id = 1;  // format_traceparent writes the trace id whatever the span
        return opsight::format_traceparent(context).substr(3, 32);
      },
      nb::arg("flags") = 1,
      "The innermost open span begins a trace of its own (its root); the new trace id in "
      "hex, or '' when not recording.");
  m.def(
      "set_span_id", [](uint64_t span_id) { opsight::set_span_id(span_id); }, nb::arg("span_id"));
  m.def("session_trace_id", [] {
    opsight::TraceContext context = opsight::session_trace_id();
    if ((context.trace_id_high | context.trace_id_low) == 0) return std::string();
    context.span_id = 1;
    return opsight::format_traceparent(context).substr(3, 32);
  });
  m.def(
      "join_session_trace",
      [] {
        opsight::TraceContext context = opsight::join_session_trace();
        if ((context.trace_id_high | context.trace_id_low) == 0) return std::string();
        context.span_id = 1;
        return opsight::format_traceparent(context).substr(3, 32);
      },
      "For a call made outside any request served: the thread's outermost open span (and "
      "what is under it) stays in the session's trace, which is returned in hex ('' when not "
      "recording).");
  m.def("process_environment", [] {
    // The C library's environment as it is now (what a child gets when Popen's env is
    // None), including what native code changed with setenv behind os.environ's back.
    nb::dict environment;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      std::string_view text(*entry);
      size_t equals = text.find('=');
      if (equals == std::string_view::npos || equals == 0) continue;
      environment[nb::bytes(text.data(), equals)] =
          nb::bytes(text.data() + equals + 1, text.size() - equals - 1);
    }
    return environment;
  });
  m.def(
      "flow_out", [](uint64_t id) { opsight::flow_out(id); }, nb::arg("id"));
  m.def(
      "flow_in", [](uint64_t id) { opsight::flow_in(id); }, nb::arg("id"));
  m.def(
      "flow_step", [](uint64_t id) { opsight::flow_step(id); }, nb::arg("id"));
  m.def(
      "flow_into_next", [](uint64_t id) { opsight::flow_into_next(id); }, nb::arg("id"));
  m.def("set_pending_task_flow", &opsight::python::set_pending_task_flow, nb::arg("id"));
  m.def("take_pending_task_flow", &opsight::python::take_pending_task_flow);
  m.def(
      "note_task_flow",
      [](nb::handle task, uint64_t id) { opsight::python::note_task_flow(task.ptr(), id); },
      nb::arg("task"), nb::arg("id"));
  m.def("add_arg", &add_python_arg, nb::arg("key"), nb::arg("value"),
        "Adds an attribute to the calling thread's innermost open span.");
  m.def("instant", [](std::string_view name) { opsight::instant(name); });
  m.def("log_record", &record_log, nb::arg("name_id"), nb::arg("level"), nb::arg("message"),
        nb::arg("logger"), nb::arg("path"), nb::arg("line"), nb::arg("function"),
        nb::arg("exception_type") = "", nb::arg("exception_message") = "",
        nb::arg("exception_stacktrace") = "", nb::arg("stack") = "", nb::arg("extras") = nb::none(),
        "Records a log record (the logging bridge's) as an instant in category 'log' with its "
        "arguments; whether it was recorded.");
  m.def("counter", [](std::string_view name, double value) { opsight::counter(name, value); });
  m.def("set_thread_name", [](std::string_view name) { opsight::set_thread_name(name); });
  m.def(
      "name_thread_if_unnamed",
      [](int64_t native_id, std::string_view name) {
        opsight::internal::name_thread_if_unnamed(native_id, name);
      },
      nb::arg("native_id"), nb::arg("name"),
      "Names the thread with this system id (threading.Thread.native_id) unless it named "
      "itself; a thread that has not recorded yet takes the name when it does.");
  m.def(
      "forget_unclaimed_thread_name",
      [](int64_t native_id) { opsight::internal::forget_unclaimed_thread_name(native_id); },
      nb::arg("native_id"), "The thread is ending: a name it never took is dropped.");
  m.def("recording", [] { return opsight::recording(); });
  m.def(
      "sampled_out", [] { return opsight::sampled_out(); },
      "Whether the calling thread's current track is inside a sampled-out unit.");
  m.def(
      "sampling_unit", [] { return static_cast<int>(opsight::current_sampling_unit()); },
      "The unit the calling thread is in: 0 none (or no sampling), 1 recorded, 2 sampled out.");
  m.def("decide_next_sampling_unit", &opsight::decide_next_sampling_unit, nb::arg("recorded"),
        "The next sampling unit the calling thread begins is recorded (or not) whatever the "
        "rate says; nothing when the session does not sample.");
  m.def("set_tracing_enabled", &set_python_tracing_enabled, nb::arg("enabled"));
  m.def("tracing_enabled", &python_tracing_enabled);

  // Spans at times measured elsewhere, for a front end that records after the fact
  // (opsight bench writes its timed queries once they have run): `ticks` on the recorder's
  // clock, as metric_ticks() reads it. The calling thread writes each track's events in
  // time order; end_at closes the innermost open span of the thread's current track.
  m.def(
      "begin_at",
      [](uint32_t name_id, uint64_t ticks) {
        if (!opsight::recording()) return false;
        format::Slot* slot = internal::reserve(1);
        if (slot == nullptr) return false;
        internal::write_slot(slot, ticks, internal::slot_word(name_id, format::SlotKind::kBegin));
        internal::commit(1);
        return true;
      },
      nb::arg("name_id"), nb::arg("ticks"),
      "Begins a span at `ticks`; returns whether it recorded (call end_at() only then).");
  m.def(
      "end_at",
      [](uint64_t ticks) {
        format::Slot* slot = internal::reserve(1);
        if (slot == nullptr) {
          internal::note_lost_end();
          return;
        }
        internal::write_slot(slot, ticks, internal::slot_word(0, format::SlotKind::kEnd));
        internal::commit(1);
      },
      nb::arg("ticks"));
  m.def(
      "switch_track", [](uint64_t key, std::string_view name) { opsight::switch_track(key, name); },
      nb::arg("key"), nb::arg("name") = "",
      "The calling thread's following events belong to async track `key` (0: its own).");
}

}  // namespace opsight::python
