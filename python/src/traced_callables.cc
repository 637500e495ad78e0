// CPython types of the traced-call hot path; see traced_callables.hpp.
#include "traced_callables.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "opsight/metrics.hpp"
#include "opsight/opsight.hpp"

namespace opsight::python {
namespace {

bool g_tracing_enabled = true;

bool tracing_active() { return g_tracing_enabled && opsight::recording(); }

// ---- Exceptions ---------------------------------------------------------------------------

std::string utf8_or(PyObject* text, std::string_view fallback) {
  if (text != nullptr && PyUnicode_Check(text)) {
    Py_ssize_t size = 0;
    if (const char* data = PyUnicode_AsUTF8AndSize(text, &size))
      return std::string(data, static_cast<size_t>(size));
    PyErr_Clear();
  }
  return std::string(fallback);
}

// "ValueError" for built-in exceptions, "package.module.Error" for the others.
std::string exception_type_name(PyObject* exception) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(exception));
  PyObject* qualname = PyObject_GetAttrString(type, "__qualname__");
  PyObject* module = PyObject_GetAttrString(type, "__module__");
  PyErr_Clear();
  std::string name = utf8_or(qualname, Py_TYPE(exception)->tp_name);
  std::string module_name = utf8_or(module, "");
  Py_XDECREF(qualname);
  Py_XDECREF(module);
  if (!module_name.empty() && module_name != "builtins") name = module_name + "." + name;
  return name;
}

void record_exception_object(PyObject* exception) {
  if (exception == nullptr) return;
  std::string type = exception_type_name(exception);
  PyObject* message_object = PyObject_Str(exception);
  if (message_object == nullptr) PyErr_Clear();
  std::string message = utf8_or(message_object, "<unprintable>");
  Py_XDECREF(message_object);
  constexpr size_t kMaxMessage = 4096;
  if (message.size() > kMaxMessage) message.resize(kMaxMessage);
  opsight::add_arg("exception.type", type);
  opsight::add_arg("exception.message", message);
}

// Adds the pending exception's type and message to the innermost open span, leaving the
// exception pending exactly as it was.
void record_pending_exception() {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* exception = PyErr_GetRaisedException();
  record_exception_object(exception);
  PyErr_SetRaisedException(exception);
#else
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (traceback != nullptr && value != nullptr) PyException_SetTraceback(value, traceback);
  record_exception_object(value);
  PyErr_Restore(type, value, traceback);
#endif
}

// Sets StopIteration(value), the way a generator returns `value`.
void set_stop_iteration(PyObject* value) {
  PyObject* stop = PyObject_CallOneArg(PyExc_StopIteration, value);
  if (stop == nullptr) return;
  PyErr_SetObject(PyExc_StopIteration, stop);
  Py_DECREF(stop);
}

// ---- TracedFunction ----------------------------------------------------------------------

struct TracedFunction {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* wrapped;
  PyObject* dict;
  PyObject* weakrefs;
  NameId name_id;
  uint32_t metrics;  // opsight::MetricGroup bits measured per call
  bool heap;         // also the Python heap (tracemalloc, through the heap hooks)
};

// ---- Metrics ------------------------------------------------------------------------------

// What every traced call measures on top of its own metrics (opsight.profile(metrics=...)).
uint32_t g_session_metrics = 0;
bool g_session_heap = false;
// The Python heap metric's start() -> token and finish(token), from opsight._capture.metrics.
PyObject* g_heap_start = nullptr;
PyObject* g_heap_finish = nullptr;

// Calls `callable(argument)` (or with no argument) leaving any pending exception as it was;
// returns the result (a new reference) or nullptr, never with an error set.
PyObject* call_keeping_error(PyObject* callable, PyObject* argument) {
  if (callable == nullptr) return nullptr;
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* pending = PyErr_GetRaisedException();
#else
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
#endif
  PyObject* result =
      argument == nullptr ? PyObject_CallNoArgs(callable) : PyObject_CallOneArg(callable, argument);
  if (result == nullptr) PyErr_WriteUnraisable(callable);
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(pending);
#else
  PyErr_Restore(type, value, traceback);
#endif
  return result;
}

// The readings a traced call takes at its start, finished before its span ends.
struct CallMetrics {
  opsight::MetricStart native;
  PyObject* heap_token = nullptr;

  void start(uint32_t metrics, bool heap) {
    if (heap) heap_token = call_keeping_error(g_heap_start, nullptr);
    if (metrics != 0) native = opsight::start_metrics(metrics);
  }
  void finish() {
    opsight::finish_metrics(native);
    if (heap_token != nullptr) {
      Py_XDECREF(call_keeping_error(g_heap_finish, heap_token));
      Py_DECREF(heap_token);
    }
  }
};

PyObject* traced_function_call(PyObject* callable, PyObject* const* args, size_t nargsf,
                               PyObject* kwnames) {
  auto* self = reinterpret_cast<TracedFunction*>(callable);
  if (!tracing_active()) return PyObject_Vectorcall(self->wrapped, args, nargsf, kwnames);
  bool recorded = opsight::begin(self->name_id);
  uint32_t metrics = self->metrics | g_session_metrics;
  bool heap = self->heap || g_session_heap;
  if (recorded && (metrics != 0 || heap)) [[unlikely]] {
    CallMetrics measured;
    measured.start(metrics, heap);
    PyObject* result = PyObject_Vectorcall(self->wrapped, args, nargsf, kwnames);
    if (result == nullptr) record_pending_exception();
    measured.finish();
    opsight::end();
    return result;
  }
  PyObject* result = PyObject_Vectorcall(self->wrapped, args, nargsf, kwnames);
  if (recorded) {
    if (result == nullptr) record_pending_exception();
    opsight::end();
  }
  return result;
}

PyTypeObject g_traced_function_type{};  // filled in by add_traced_callable_types()
PyTypeObject g_traced_callable_type{};  // likewise

PyObject* traced_function_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* wrapped = nullptr;
  unsigned int name_id = 0;
  unsigned int metrics = 0;
  int heap = 0;
  static const char* keywords[] = {"wrapped", "name_id", "metrics", "heap", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OI|Ip:TracedFunction",
                                   const_cast<char**>(keywords), &wrapped, &name_id, &metrics,
                                   &heap))
    return nullptr;
  if (!PyCallable_Check(wrapped)) {
    PyErr_Format(PyExc_TypeError, "TracedFunction: %R is not callable", wrapped);
    return nullptr;
  }
  // A wrapper binds as a method only where the callable it wraps does: a Python function
  // or a method descriptor (list.append) does, a builtin function (math.sqrt), a partial
  // or a callable object does not, and stored as a class attribute it must not start
  // taking the instance as its first argument. TracedCallable is TracedFunction without
  // binding (and without Py_TPFLAGS_METHOD_DESCRIPTOR, which makes `obj.attr()` pass obj).
  if (type == &g_traced_function_type && Py_TYPE(wrapped)->tp_descr_get == nullptr)
    type = &g_traced_callable_type;
  auto* self = PyObject_GC_New(TracedFunction, type);
  if (self == nullptr) return nullptr;
  self->vectorcall = traced_function_call;
  Py_INCREF(wrapped);
  self->wrapped = wrapped;
  self->dict = nullptr;
  self->weakrefs = nullptr;
  self->name_id = name_id;
  self->metrics = metrics;
  self->heap = heap != 0;
  PyObject_GC_Track(self);
  return reinterpret_cast<PyObject*>(self);
}

int traced_function_traverse(PyObject* object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<TracedFunction*>(object);
  Py_VISIT(self->wrapped);
  Py_VISIT(self->dict);
  return 0;
}

int traced_function_clear(PyObject* object) {
  auto* self = reinterpret_cast<TracedFunction*>(object);
  Py_CLEAR(self->wrapped);
  Py_CLEAR(self->dict);
  return 0;
}

void traced_function_dealloc(PyObject* object) {
  auto* self = reinterpret_cast<TracedFunction*>(object);
  PyObject_GC_UnTrack(object);
  if (self->weakrefs != nullptr) PyObject_ClearWeakRefs(object);
  traced_function_clear(object);
  PyObject_GC_Del(object);
}

// Binds like a Python function: `instance.method` is a bound method of the wrapper.
PyObject* traced_function_get(PyObject* self, PyObject* instance, PyObject* /*owner*/) {
  if (instance == nullptr || instance == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, instance);
}

PyObject* dict_item(TracedFunction* self, const char* key) {
  if (self->dict == nullptr) return nullptr;
  return PyDict_GetItemString(self->dict, key);  // borrowed
}

PyObject* traced_function_repr(PyObject* object) {
  auto* self = reinterpret_cast<TracedFunction*>(object);
  PyObject* qualname = dict_item(self, "__qualname__");
  if (qualname != nullptr && PyUnicode_Check(qualname))
    return PyUnicode_FromFormat("<opsight traced %U>", qualname);
  return PyUnicode_FromFormat("<opsight traced %R>", self->wrapped);
}

// Whether `module_name`.`qualname` (an already imported module, then attributes) is `target`.
bool name_leads_to(PyObject* module_name, PyObject* qualname, PyObject* target) {
  if (!PyUnicode_Check(module_name) || !PyUnicode_Check(qualname)) return false;
  PyObject* current = PyImport_GetModule(module_name);  // no import, a new reference
  if (current == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* dot = PyUnicode_FromString(".");
  PyObject* parts = dot == nullptr ? nullptr : PyUnicode_Split(qualname, dot, -1);
  Py_XDECREF(dot);
  if (parts == nullptr) {
    PyErr_Clear();
    Py_DECREF(current);
    return false;
  }
  for (Py_ssize_t index = 0; index < PyList_GET_SIZE(parts) && current != nullptr; ++index) {
    PyObject* next = PyObject_GetAttr(current, PyList_GET_ITEM(parts, index));
    Py_DECREF(current);
    current = next;
  }
  Py_DECREF(parts);
  if (current == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool same = current == target;
  Py_DECREF(current);
  return same;
}

// Pickled by reference, like the function it replaces (multiprocessing pickles targets):
// by its name where that name leads back to this wrapper. Where it does not (a function
// wrapped where it was re-exported, `from a import f` in module b: its name `a.f` leads to
// the original), it is pickled as the callable it wraps, which pickles as it would
// untraced: copy.copy(f) is f itself for functions, builtins and classes.
PyObject* traced_function_reduce(PyObject* object, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<TracedFunction*>(object);
  PyObject* qualname = dict_item(self, "__qualname__");
  PyObject* module_name = dict_item(self, "__module__");
  if (qualname != nullptr && module_name != nullptr &&
      name_leads_to(module_name, qualname, object)) {
    Py_INCREF(qualname);
    return qualname;
  }
  PyObject* copy_module = PyImport_ImportModule("copy");
  if (copy_module == nullptr) return nullptr;
  PyObject* copy = PyObject_GetAttrString(copy_module, "copy");
  Py_DECREF(copy_module);
  if (copy == nullptr) return nullptr;
  return Py_BuildValue("(N(O))", copy, self->wrapped);
}

PyObject* traced_function_get_wrapped(PyObject* object, void* /*closure*/) {
  auto* self = reinterpret_cast<TracedFunction*>(object);
  Py_INCREF(self->wrapped);
  return self->wrapped;
}

PyObject* traced_function_get_name_id(PyObject* object, void* /*closure*/) {
  return PyLong_FromUnsignedLong(reinterpret_cast<TracedFunction*>(object)->name_id);
}

PyMethodDef traced_function_methods[] = {
    {"__reduce__", traced_function_reduce, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};

PyGetSetDef traced_function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {"_opsight_wrapped", traced_function_get_wrapped, nullptr, "the callable this wrapper calls",
     nullptr},
    {"_opsight_name_id", traced_function_get_name_id, nullptr, "the span name's id", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// ---- Asyncio task tracks ----------------------------------------------------------------

// The track the calling thread records on (0: its own); mirrors the recorder's view.
thread_local uint64_t t_current_track = 0;
// Keys whose track name was recorded this session (GIL-protected).
std::unordered_set<uint64_t> g_named_tracks;
// Flows from the span that created a task (asyncio's create_task, hooked in Python) to the
// task's first span, by task key; taken when the task's track is first used.
std::unordered_map<uint64_t, uint64_t> g_task_flows;
// A flow for a task being created right now (set around loop.create_task): an eager task
// (Python 3.12's eager_task_factory) runs its first step inside create_task, before the
// task object is known to the hook; its first new lane on this thread takes the flow.
thread_local uint64_t t_pending_task_flow = 0;
PyObject* g_forget_task_callback = nullptr;
PyObject* g_current_task = nullptr;   // asyncio.current_task
PyObject* g_current_tasks = nullptr;  // asyncio.tasks._current_tasks ({loop: task}), if a dict
// The event loop this thread last ran a traced coroutine in (a strong reference). With it,
// the running task is one dict lookup: asyncio.current_task() costs a getpid() system call
// on Python 3.11 (0.4-0.6 us on a VM), on every traced call. A loop that is no longer
// running has no entry, and the slow path finds the new one.
thread_local PyObject* t_event_loop = nullptr;

bool load_asyncio() {
  if (g_current_task != nullptr) return true;
  PyObject* asyncio = PyImport_ImportModule("asyncio");
  if (asyncio == nullptr) {
    PyErr_Clear();
    return false;
  }
  g_current_task = PyObject_GetAttrString(asyncio, "current_task");
  if (PyObject* tasks = PyObject_GetAttrString(asyncio, "tasks")) {
    PyObject* current_tasks = PyObject_GetAttrString(tasks, "_current_tasks");
    if (current_tasks != nullptr && PyDict_Check(current_tasks))
      g_current_tasks = current_tasks;
    else
      Py_XDECREF(current_tasks);
    Py_DECREF(tasks);
  }
  PyErr_Clear();
  Py_DECREF(asyncio);
  return g_current_task != nullptr;
}

// Whether the cached loop is the one running on this thread now: a loop that finished here
// may run in another thread later, and its current task is then that thread's.
bool loop_runs_on_this_thread() {
  PyObject* thread_id = PyObject_GetAttrString(t_event_loop, "_thread_id");
  if (thread_id == nullptr) {  // not an asyncio BaseEventLoop: always ask asyncio
    PyErr_Clear();
    return false;
  }
  bool here =
      PyLong_Check(thread_id) && PyLong_AsUnsignedLong(thread_id) == PyThread_get_thread_ident();
  Py_DECREF(thread_id);
  PyErr_Clear();
  return here;
}

// The running asyncio task, a new reference, or nullptr (no error) when there is none.
PyObject* running_task() {
  if (!load_asyncio()) return nullptr;
  if (g_current_tasks != nullptr && t_event_loop != nullptr && loop_runs_on_this_thread()) {
    if (PyObject* task = PyDict_GetItemWithError(g_current_tasks, t_event_loop)) {
      Py_INCREF(task);
      return task;
    }
    PyErr_Clear();
  }
  PyObject* task = PyObject_CallNoArgs(g_current_task);
  if (task == nullptr) {  // RuntimeError: no running event loop
    PyErr_Clear();
    return nullptr;
  }
  if (task == Py_None) {
    Py_DECREF(task);
    return nullptr;
  }
  if (g_current_tasks != nullptr) {
    if (PyObject* loop = PyObject_CallMethod(task, "get_loop", nullptr)) {
      Py_XSETREF(t_event_loop, loop);
    } else {
      PyErr_Clear();
    }
  }
  return task;
}

uint64_t object_key(PyObject* object) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(object));
}

PyObject* forget_task(PyObject* /*module*/, PyObject* task) {
  g_named_tracks.erase(object_key(task));
  g_task_flows.erase(object_key(task));
  Py_RETURN_NONE;
}

PyMethodDef g_forget_task_definition = {"_opsight_forget_task", forget_task, METH_O, nullptr};

// "asyncio Task-3 (handler)" for a task running coroutine `handler`.
std::string task_track_name(PyObject* task) {
  std::string name = "asyncio ";
  if (PyObject* task_name = PyObject_CallMethod(task, "get_name", nullptr)) {
    name += utf8_or(task_name, "task");
    Py_DECREF(task_name);
  } else {
    PyErr_Clear();
    name += "task";
  }
  if (PyObject* coroutine = PyObject_CallMethod(task, "get_coro", nullptr)) {
    PyObject* qualname = PyObject_GetAttrString(coroutine, "__qualname__");
    if (qualname != nullptr) name += " (" + utf8_or(qualname, "") + ")";
    Py_XDECREF(qualname);
    Py_DECREF(coroutine);
  }
  PyErr_Clear();
  return name;
}

void switch_thread_track(uint64_t key, std::string_view name = {}) {
  opsight::switch_track(key, name);
  t_current_track = key;
}

// ---- TracedAwaitable --------------------------------------------------------------------

constexpr uint64_t kTrackUnresolved = ~uint64_t{0};
// First resumed while tracing was off: no span, no track switches; a plain proxy.
constexpr uint64_t kTrackNone = ~uint64_t{0} - 1;

struct TracedAwaitable {
  PyObject_HEAD PyObject*
      inner;  // the coroutine, or the iterator an awaitable's __await__ returned
  PyObject* weakrefs;
  NameId name_id;
  uint64_t track;  // the task's key, or this object's own lane; resolved on first resume
  bool started;    // resumed at least once
  bool span_open;  // a span was begun and not yet ended
  bool owns_lane;  // `track` is this object's own lane (no asyncio task ran it)
};

// Resolves which track this awaitable records on and switches the thread to it; returns
// the thread's previous track. Begins the span on the first resume.
uint64_t awaitable_enter(TracedAwaitable* self) {
  if (self->track == kTrackUnresolved && !tracing_active()) {
    self->track = kTrackNone;
    self->started = true;
  }
  if (self->track == kTrackNone) return t_current_track;
  if (self->track == kTrackUnresolved) {
    std::string name;
    if (PyObject* task = running_task()) {
      self->track = object_key(task);
      if (!g_named_tracks.contains(self->track)) {
        name = task_track_name(task);
        g_named_tracks.insert(self->track);
        if (g_forget_task_callback != nullptr) {
          PyObject* added =
              PyObject_CallMethod(task, "add_done_callback", "O", g_forget_task_callback);
          if (added == nullptr) PyErr_Clear();
          Py_XDECREF(added);
        }
      }
      Py_DECREF(task);
    } else {  // driven by hand, outside asyncio: a lane of its own
      self->track = object_key(reinterpret_cast<PyObject*>(self));
      self->owns_lane = true;
      name = "coroutine";
      PyObject* qualname = PyObject_GetAttrString(self->inner, "__qualname__");
      if (qualname != nullptr) name += " " + utf8_or(qualname, "");
      Py_XDECREF(qualname);
      PyErr_Clear();
      g_named_tracks.insert(self->track);
    }
    uint64_t previous = t_current_track;
    if (self->track != previous || !name.empty()) switch_thread_track(self->track, name);
    if (!self->started) {
      self->started = true;
      self->span_open = tracing_active() && opsight::begin(self->name_id);
    }
    // The task's first span: the flow from the span that created the task arrives here.
    if (!name.empty() && !self->owns_lane) {
      if (t_pending_task_flow != 0) {
        if (self->span_open) opsight::flow_in(t_pending_task_flow);
        t_pending_task_flow = 0;
      } else if (!g_task_flows.empty()) {
        if (auto found = g_task_flows.find(self->track); found != g_task_flows.end()) {
          if (self->span_open) opsight::flow_in(found->second);
          g_task_flows.erase(found);
        }
      }
    }
    return previous;
  }
  uint64_t previous = t_current_track;
  if (self->track != previous) switch_thread_track(self->track);
  if (!self->started) {
    self->started = true;
    self->span_open = tracing_active() && opsight::begin(self->name_id);
  }
  return previous;
}

// Ends the span if the awaitable finished (recording a pending exception other than a
// normal end), then switches the thread back to `previous`. StopAsyncIteration is how an
// async generator's last step (`__anext__`) ends, so it is a normal end, not an error.
void awaitable_leave(TracedAwaitable* self, uint64_t previous, bool finished) {
  if (finished && self->span_open) {
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_StopIteration) &&
        !PyErr_ExceptionMatches(PyExc_StopAsyncIteration))
      record_pending_exception();
    opsight::end();
    self->span_open = false;
  }
  if (self->track != previous && self->track != kTrackNone) switch_thread_track(previous);
}

PySendResult awaitable_am_send(PyObject* object, PyObject* argument, PyObject** result) {
  auto* self = reinterpret_cast<TracedAwaitable*>(object);
  uint64_t previous = awaitable_enter(self);
  PySendResult status = PyIter_Send(self->inner, argument, result);
  awaitable_leave(self, previous, status != PYGEN_NEXT);
  return status;
}

PyObject* awaitable_send(PyObject* object, PyObject* argument) {
  PyObject* result = nullptr;
  PySendResult status = awaitable_am_send(object, argument, &result);
  if (status == PYGEN_RETURN) {
    set_stop_iteration(result);
    Py_DECREF(result);
    return nullptr;
  }
  return status == PYGEN_NEXT ? result : nullptr;
}

PyObject* awaitable_iternext(PyObject* object) {
  PyObject* result = nullptr;
  PySendResult status = awaitable_am_send(object, Py_None, &result);
  if (status == PYGEN_RETURN) {
    if (result != Py_None) set_stop_iteration(result);
    Py_DECREF(result);
    return nullptr;
  }
  return status == PYGEN_NEXT ? result : nullptr;
}

PyObject* awaitable_throw(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<TracedAwaitable*>(object);
  PyObject* method = PyObject_GetAttrString(self->inner, "throw");
  if (method == nullptr) return nullptr;
  uint64_t previous = awaitable_enter(self);
  PyObject* result = PyObject_Vectorcall(method, args, static_cast<size_t>(nargs), nullptr);
  Py_DECREF(method);
  awaitable_leave(self, previous, result == nullptr);
  return result;
}

PyObject* awaitable_close(PyObject* object, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<TracedAwaitable*>(object);
  PyObject* result = nullptr;
  if (PyObject_HasAttrString(self->inner, "close")) {
    result = PyObject_CallMethod(self->inner, "close", nullptr);
  } else {
    Py_INCREF(Py_None);
    result = Py_None;
  }
  if (self->span_open) {  // closed before it finished: end its span on its own track
    uint64_t previous = t_current_track;
    if (self->track != previous) switch_thread_track(self->track);
    opsight::add_arg("closed", std::string_view("before finishing"));
    awaitable_leave(self, previous, true);
  }
  return result;
}

PyObject* awaitable_self(PyObject* object) {
  Py_INCREF(object);
  return object;
}

PyObject* awaitable_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* awaitable = nullptr;
  unsigned int name_id = 0;
  static const char* keywords[] = {"awaitable", "name_id", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OI:TracedAwaitable", const_cast<char**>(keywords),
                                   &awaitable, &name_id))
    return nullptr;
  PyObject* inner = nullptr;
  if (PyCoro_CheckExact(awaitable) || PyIter_Check(awaitable)) {
    Py_INCREF(awaitable);
    inner = awaitable;
  } else if (Py_TYPE(awaitable)->tp_as_async != nullptr &&
             Py_TYPE(awaitable)->tp_as_async->am_await != nullptr) {
    inner = Py_TYPE(awaitable)->tp_as_async->am_await(awaitable);
    if (inner == nullptr) return nullptr;
  } else {
    PyErr_Format(PyExc_TypeError, "TracedAwaitable: %R is not awaitable", awaitable);
    return nullptr;
  }
  auto* self = PyObject_GC_New(TracedAwaitable, type);
  if (self == nullptr) {
    Py_DECREF(inner);
    return nullptr;
  }
  self->inner = inner;
  self->weakrefs = nullptr;
  self->name_id = name_id;
  self->track = kTrackUnresolved;
  self->started = false;
  self->span_open = false;
  self->owns_lane = false;
  PyObject_GC_Track(self);
  return reinterpret_cast<PyObject*>(self);
}

int awaitable_traverse(PyObject* object, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<TracedAwaitable*>(object)->inner);
  return 0;
}

int awaitable_clear(PyObject* object) {
  Py_CLEAR(reinterpret_cast<TracedAwaitable*>(object)->inner);
  return 0;
}

void awaitable_dealloc(PyObject* object) {
  auto* self = reinterpret_cast<TracedAwaitable*>(object);
  PyObject_GC_UnTrack(object);
  // Dropped while suspended: its span ends now, on its own track (the task, or the lane,
  // is gone, so nothing else is open there).
  if (self->span_open && self->track != kTrackUnresolved && self->track != 0) {
    uint64_t previous = t_current_track;
    if (self->track != previous) switch_thread_track(self->track);
    opsight::add_arg("closed", std::string_view("dropped before finishing"));
    opsight::end();
    self->span_open = false;
    if (self->track != previous) switch_thread_track(previous);
  }
  if (self->owns_lane) g_named_tracks.erase(self->track);
  if (self->weakrefs != nullptr) PyObject_ClearWeakRefs(object);
  awaitable_clear(object);
  PyObject_GC_Del(object);
}

PyMethodDef awaitable_methods[] = {
    {"send", awaitable_send, METH_O, nullptr},
    {"throw", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(awaitable_throw)),
     METH_FASTCALL, nullptr},
    {"close", awaitable_close, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyAsyncMethods awaitable_async_methods = {awaitable_self, nullptr, nullptr, awaitable_am_send};

PyTypeObject g_traced_awaitable_type{};  // filled in by add_traced_callable_types()

// ---- TracedIterator ---------------------------------------------------------------------

struct TracedIterator {
  PyObject_HEAD PyObject* inner;
  PyObject* weakrefs;
  NameId name_id;
};

bool is_normal_end() {
  return PyErr_ExceptionMatches(PyExc_StopIteration) || PyErr_ExceptionMatches(PyExc_GeneratorExit);
}

void iterator_end_span(bool failed) {
  if (failed && PyErr_Occurred() && !is_normal_end()) record_pending_exception();
  opsight::end();
}

PySendResult iterator_am_send(PyObject* object, PyObject* argument, PyObject** result) {
  auto* self = reinterpret_cast<TracedIterator*>(object);
  if (!tracing_active()) return PyIter_Send(self->inner, argument, result);
  bool recorded = opsight::begin(self->name_id);
  PySendResult status = PyIter_Send(self->inner, argument, result);
  if (recorded) iterator_end_span(status == PYGEN_ERROR);
  return status;
}

PyObject* iterator_iternext(PyObject* object) {
  auto* self = reinterpret_cast<TracedIterator*>(object);
  iternextfunc next = Py_TYPE(self->inner)->tp_iternext;
  if (!tracing_active()) return next(self->inner);
  bool recorded = opsight::begin(self->name_id);
  PyObject* result = next(self->inner);
  if (recorded) iterator_end_span(result == nullptr);
  return result;
}

PyObject* iterator_send(PyObject* object, PyObject* argument) {
  PyObject* result = nullptr;
  PySendResult status = iterator_am_send(object, argument, &result);
  if (status == PYGEN_RETURN) {
    set_stop_iteration(result);
    Py_DECREF(result);
    return nullptr;
  }
  return status == PYGEN_NEXT ? result : nullptr;
}

PyObject* iterator_call_method(PyObject* object, const char* name, PyObject* const* args,
                               Py_ssize_t nargs) {
  auto* self = reinterpret_cast<TracedIterator*>(object);
  PyObject* method = PyObject_GetAttrString(self->inner, name);
  if (method == nullptr) return nullptr;
  bool recorded = tracing_active() && opsight::begin(self->name_id);
  PyObject* result = PyObject_Vectorcall(method, args, static_cast<size_t>(nargs), nullptr);
  Py_DECREF(method);
  if (recorded) iterator_end_span(result == nullptr);
  return result;
}

PyObject* iterator_throw(PyObject* object, PyObject* const* args, Py_ssize_t nargs) {
  return iterator_call_method(object, "throw", args, nargs);
}

PyObject* iterator_close(PyObject* object, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<TracedIterator*>(object);
  if (!PyObject_HasAttrString(self->inner, "close")) Py_RETURN_NONE;
  return iterator_call_method(object, "close", nullptr, 0);
}

PyObject* iterator_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* iterable = nullptr;
  unsigned int name_id = 0;
  static const char* keywords[] = {"iterator", "name_id", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OI:TracedIterator", const_cast<char**>(keywords),
                                   &iterable, &name_id))
    return nullptr;
  PyObject* inner = PyObject_GetIter(iterable);
  if (inner == nullptr) return nullptr;
  auto* self = PyObject_GC_New(TracedIterator, type);
  if (self == nullptr) {
    Py_DECREF(inner);
    return nullptr;
  }
  self->inner = inner;
  self->weakrefs = nullptr;
  self->name_id = name_id;
  PyObject_GC_Track(self);
  return reinterpret_cast<PyObject*>(self);
}

int iterator_traverse(PyObject* object, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<TracedIterator*>(object)->inner);
  return 0;
}

int iterator_clear(PyObject* object) {
  Py_CLEAR(reinterpret_cast<TracedIterator*>(object)->inner);
  return 0;
}

void iterator_dealloc(PyObject* object) {
  auto* self = reinterpret_cast<TracedIterator*>(object);
  PyObject_GC_UnTrack(object);
  if (self->weakrefs != nullptr) PyObject_ClearWeakRefs(object);
  iterator_clear(object);
  PyObject_GC_Del(object);
}

PyMethodDef iterator_methods[] = {
    {"send", iterator_send, METH_O, nullptr},
    {"throw", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(iterator_throw)),
     METH_FASTCALL, nullptr},
    {"close", iterator_close, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyAsyncMethods iterator_async_methods = {nullptr, nullptr, nullptr, iterator_am_send};

PyTypeObject g_traced_iterator_type{};  // filled in by add_traced_callable_types()

bool ready_and_add(PyObject* module, PyTypeObject* type, const char* name) {
  if (PyType_Ready(type) < 0) return false;
  Py_INCREF(type);
  if (PyModule_AddObject(module, name, reinterpret_cast<PyObject*>(type)) < 0) {
    Py_DECREF(type);
    return false;
  }
  return true;
}

}  // namespace

void set_python_tracing_enabled(bool enabled) { g_tracing_enabled = enabled; }
bool python_tracing_enabled() { return g_tracing_enabled; }

void set_session_metrics(uint32_t metrics, bool heap) {
  g_session_metrics = metrics;
  g_session_heap = heap;
}
uint32_t session_metrics() { return g_session_metrics; }
bool session_heap() { return g_session_heap; }

void set_heap_hooks(PyObject* start, PyObject* finish) {
  Py_XINCREF(start);
  Py_XINCREF(finish);
  Py_XSETREF(g_heap_start, start);
  Py_XSETREF(g_heap_finish, finish);
}
void reset_task_tracks() {
  g_named_tracks.clear();
  g_task_flows.clear();
}

void set_pending_task_flow(uint64_t flow_id) { t_pending_task_flow = flow_id; }

bool take_pending_task_flow() {
  bool was_pending = t_pending_task_flow != 0;
  t_pending_task_flow = 0;
  return was_pending;
}

void note_task_flow(PyObject* task, uint64_t flow_id) {
  if (g_task_flows.size() > 1'000'000) return;  // tasks created and never run: bounded
  g_task_flows[object_key(task)] = flow_id;
  // Forgotten when the task ends, whether or not a traced coroutine ever ran in it.
  if (g_forget_task_callback != nullptr) {
    PyObject* added = PyObject_CallMethod(task, "add_done_callback", "O", g_forget_task_callback);
    if (added == nullptr) PyErr_Clear();
    Py_XDECREF(added);
  }
}

bool add_traced_callable_types(PyObject* module) {
  for (PyTypeObject* type :
       {&g_traced_function_type, &g_traced_awaitable_type, &g_traced_iterator_type})
    Py_SET_REFCNT(reinterpret_cast<PyObject*>(type), 1);  // static types are never freed
  PyTypeObject& function = g_traced_function_type;
  function.tp_name = "opsight._native.TracedFunction";
  function.tp_doc = "A callable that records a span around each call of the one it wraps.";
  function.tp_basicsize = sizeof(TracedFunction);
  function.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                      Py_TPFLAGS_METHOD_DESCRIPTOR;
  function.tp_new = traced_function_new;
  function.tp_dealloc = traced_function_dealloc;
  function.tp_traverse = traced_function_traverse;
  function.tp_clear = traced_function_clear;
  function.tp_call = PyVectorcall_Call;
  function.tp_vectorcall_offset = offsetof(TracedFunction, vectorcall);
  function.tp_descr_get = traced_function_get;
  function.tp_dictoffset = offsetof(TracedFunction, dict);
  function.tp_weaklistoffset = offsetof(TracedFunction, weakrefs);
  function.tp_repr = traced_function_repr;
  function.tp_methods = traced_function_methods;
  function.tp_getset = traced_function_getset;

  PyTypeObject& callable = g_traced_callable_type;
  callable = function;  // the same slots (filled in above, not yet readied), but:
  callable.tp_name = "opsight._native.TracedCallable";
  callable.tp_doc =
      "A TracedFunction of a callable that does not bind as a method (a builtin function, a "
      "partial, a callable object): it does not bind either.";
  callable.tp_flags &= ~Py_TPFLAGS_METHOD_DESCRIPTOR;
  callable.tp_descr_get = nullptr;

  PyTypeObject& awaitable = g_traced_awaitable_type;
  awaitable.tp_name = "opsight._native.TracedAwaitable";
  awaitable.tp_doc = "An awaitable whose whole run is one span on its asyncio task's track.";
  awaitable.tp_basicsize = sizeof(TracedAwaitable);
  awaitable.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  awaitable.tp_new = awaitable_new;
  awaitable.tp_dealloc = awaitable_dealloc;
  awaitable.tp_traverse = awaitable_traverse;
  awaitable.tp_clear = awaitable_clear;
  awaitable.tp_as_async = &awaitable_async_methods;
  awaitable.tp_iter = awaitable_self;
  awaitable.tp_iternext = awaitable_iternext;
  awaitable.tp_methods = awaitable_methods;
  awaitable.tp_weaklistoffset = offsetof(TracedAwaitable, weakrefs);

  PyTypeObject& iterator = g_traced_iterator_type;
  iterator.tp_name = "opsight._native.TracedIterator";
  iterator.tp_doc = "An iterator with one span around each resume of the one it wraps.";
  iterator.tp_basicsize = sizeof(TracedIterator);
  iterator.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  iterator.tp_new = iterator_new;
  iterator.tp_dealloc = iterator_dealloc;
  iterator.tp_traverse = iterator_traverse;
  iterator.tp_clear = iterator_clear;
  iterator.tp_as_async = &iterator_async_methods;
  iterator.tp_iter = awaitable_self;
  iterator.tp_iternext = iterator_iternext;
  iterator.tp_methods = iterator_methods;
  iterator.tp_weaklistoffset = offsetof(TracedIterator, weakrefs);

  g_forget_task_callback = PyCFunction_New(&g_forget_task_definition, nullptr);
  if (g_forget_task_callback == nullptr) return false;
  return ready_and_add(module, &function, "TracedFunction") &&
         ready_and_add(module, &callable, "TracedCallable") &&
         ready_and_add(module, &awaitable, "TracedAwaitable") &&
         ready_and_add(module, &iterator, "TracedIterator");
}

}  // namespace opsight::python
