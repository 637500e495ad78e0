// opsight._native's sessions (src/session): Session (start, pause, resume, stop, dump),
// `opsight ctl`'s control watcher and files, the flight recorder's options.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "opsight/opsight.hpp"
#include "record/ring_sink.hpp"
#include "session/control.hpp"
#include "session/flight_recorder.hpp"
#include "traced_callables.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

// `opsight ctl`: the core's control watcher (session/control.hpp) calls this on its own
// thread; it calls the Python callable that start_control_watcher() was given
// (opsight._capture.instrument.set_enabled, which also wraps and unwraps the targets).
// The callable is set and replaced with the GIL held, and held by the call while it runs.
PyObject* g_control_apply = nullptr;
// "requests N": opsight._session.live_control's handler, called with N; returns the state
// to publish. Set and replaced as g_control_apply is.
PyObject* g_control_apply_requests = nullptr;

bool python_is_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

void apply_control_request(bool enabled) {
  // A watcher left running at exit must not take the GIL of an interpreter going away.
  if (!Py_IsInitialized() || python_is_finalizing()) return;
  nb::gil_scoped_acquire gil;
  PyObject* apply = g_control_apply;
  if (apply == nullptr) return;
  Py_INCREF(apply);
  PyObject* result = PyObject_CallOneArg(apply, enabled ? Py_True : Py_False);
  if (result == nullptr)
    PyErr_WriteUnraisable(apply);  // a warning on stderr, never an error in the program
  else
    Py_DECREF(result);
  Py_DECREF(apply);
}

std::string apply_control_requests(int64_t count) {
  const std::string unchanged = opsight::recording() ? "on" : "off";
  if (!Py_IsInitialized() || python_is_finalizing()) return unchanged;
  nb::gil_scoped_acquire gil;
  PyObject* apply = g_control_apply_requests;
  if (apply == nullptr) return unchanged;
  Py_INCREF(apply);
  std::string state = unchanged;
  PyObject* argument = PyLong_FromLongLong(count);
  PyObject* result = argument ? PyObject_CallOneArg(apply, argument) : nullptr;
  Py_XDECREF(argument);
  if (result == nullptr) {
    PyErr_WriteUnraisable(apply);
  } else {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_Check(result) ? PyUnicode_AsUTF8AndSize(result, &size) : nullptr;
    if (text != nullptr)
      state.assign(text, static_cast<size_t>(size));
    else
      PyErr_Clear();
    Py_DECREF(result);
  }
  Py_DECREF(apply);
  return state;
}

// Starts (or restarts) the process's watcher. The GIL is released while it stops an
// earlier watcher, whose thread may be waiting for it inside apply_control_request.
bool start_python_control_watcher(nb::callable apply, bool enabled,
                                  std::optional<nb::callable> apply_requests) {
  {
    nb::gil_scoped_release release;
    session::stop_control_watcher();
  }
  PyObject* callable = apply.ptr();
  Py_INCREF(callable);
  Py_XSETREF(g_control_apply, callable);
  PyObject* requests_callable = apply_requests ? apply_requests->ptr() : nullptr;
  Py_XINCREF(requests_callable);
  Py_XSETREF(g_control_apply_requests, requests_callable);
  return session::start_control_watcher(apply_control_request, enabled,
                                        apply_requests
                                            ? session::ControlRequestsApply(apply_control_requests)
                                            : session::ControlRequestsApply());
}

}  // namespace

void bind_session(nb::module_& m) {
  // opsight ctl (opsight._session.control wraps these; the protocol is session/control.hpp).
  m.def("control_directory", [] { return session::control_directory(); });
  m.def("start_control_watcher", &start_python_control_watcher, nb::arg("apply"),
        nb::arg("enabled"), nb::arg("apply_requests") = nb::none(),
        "Publishes this process's state and calls apply(enabled) on a request, "
        "apply_requests(N) on 'requests N' (its answer is the state published); false (after "
        "one warning on stderr) where the control directory is refused.");
  m.def("stop_control_watcher", &session::stop_control_watcher,
        nb::call_guard<nb::gil_scoped_release>());
  m.def("publish_control_state", &session::publish_control_state, nb::arg("state"),
        nb::call_guard<nb::gil_scoped_release>(),
        "Rewrites this process's published state (no watcher: does nothing).");
  m.def(
      "control_state",
      [](int pid) {
        session::TracedProcessState found = session::traced_process_state(pid);
        return std::make_tuple(found.state_path, found.state, found.problem);
      },
      nb::arg("pid"), "(state file, its state or None, a refused directory's problem or '').");
  m.def(
      "control_request",
      [](int pid, std::string_view state) { return session::request_state(pid, state); },
      nb::arg("pid"), nb::arg("state"), "Asks process pid to switch; an error message or None.");
  m.def(
      "check_ring_options",
      [](const std::string& ring, const std::string& dump_on_slow) -> std::optional<std::string> {
        std::string error;
        if (!record::parse_ring_limits(ring, &error)) return error;
        if (!session::parse_slow_span_rules(dump_on_slow, &error)) return error;
        return std::nullopt;
      },
      nb::arg("ring"), nb::arg("dump_on_slow") = "",
      "What is wrong with a flight recorder's ring spec or dump-on-slow rules, or None.");
  m.def(
      "control_dumped",
      [](int pid) -> std::optional<std::pair<std::string, int64_t>> {
        return session::dumped_state(pid);
      },
      nb::arg("pid"), "(the answer to the last dump request, its modification time ns) or None.");
  m.def("control_published_states", [] {
    session::PublishedStates published = session::published_states();
    std::vector<std::pair<int, std::string>> processes(published.processes.begin(),
                                                       published.processes.end());
    return std::make_pair(std::move(processes), std::move(published.problems));
  });

  nb::class_<Session>(m, "Session")
      .def(
          "__init__",
          [](Session* self, const std::string& output, size_t buffer_mb, uint32_t flush_ms,
             uint32_t sample_ms, double sample_rate, const std::string& sample_root, bool cuda,
             const std::string& cupti_path, const std::string& ring, const std::string& dump_prefix,
             const std::string& dump_on_slow, bool dump_on_exception, bool sample_operators_only) {
            SessionOptions options;
            options.ring = ring;
            options.dump_prefix = dump_prefix;
            options.dump_on_slow = dump_on_slow;
            options.dump_on_exception = dump_on_exception;
            options.sample_operators_only = sample_operators_only;
            options.cuda = cuda;
            options.cupti_path = cupti_path;
            options.output = output;
            options.buffer_bytes = buffer_mb << 20;
            options.flush_interval_ms = flush_ms;
            options.sample_interval_ms = sample_ms;
            options.sample_rate = sample_rate;
            options.sample_root = sample_root;
            reset_task_tracks();
            new (self) Session(options);
          },
          nb::arg("output") = "", nb::arg("buffer_mb") = 64, nb::arg("flush_interval_ms") = 100,
          nb::arg("sample_interval_ms") = 0, nb::arg("sample_rate") = 1.0,
          nb::arg("sample_root") = "", nb::arg("cuda") = false, nb::arg("cupti_path") = "",
          nb::arg("ring") = "", nb::arg("dump_prefix") = "", nb::arg("dump_on_slow") = "",
          nb::arg("dump_on_exception") = true, nb::arg("sample_operators_only") = false)
      .def(
          "dump",
          [](Session& session, const std::string& trigger) {
            std::string error;
            std::string path = session.dump(trigger, &error);
            if (path.empty()) throw std::runtime_error(error);
            return path;
          },
          nb::arg("trigger"), nb::call_guard<nb::gil_scoped_release>(),
          "Writes what the flight recorder's ring holds to the next dump file; its path. "
          "RuntimeError without a ring.")
      .def("pause", &Session::pause)
      .def("resume", &Session::resume)
      .def("stop", &Session::stop, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("ok", &Session::ok)
      .def_prop_ro("error", &Session::error)
      .def_prop_ro("events_dropped", &Session::events_dropped)
      .def_prop_ro("gpu_status", &Session::gpu_status)
      .def(
          "start_gpu_tracing",
          [](Session& session, const std::string& cupti_path) {
            return session.start_gpu_tracing(cupti_path);
          },
          nb::arg("cupti_path") = "")
      .def("take_native_bytes", [](Session& session) {
        std::string bytes = session.take_native_bytes();
        return nb::bytes(bytes.data(), bytes.size());
      });
}

}  // namespace opsight::python
