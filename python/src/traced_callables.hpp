// The hot path of Python tracing: CPython types, written against the C API (not nanobind)
// because each traced call goes through them and every nanosecond shows.
//
//   TracedFunction   wraps any callable: a span around each call (vectorcall, no Python
//                    frame of its own); binds as a method (a method descriptor, so
//                    `obj.method()` does not even build a bound method); records the type
//                    and message of an exception that leaves the call, then re-raises it.
//   TracedAwaitable  wraps one awaitable (a coroutine, or one step of an async generator):
//                    a span from its first resume to its end, on the track of the asyncio
//                    task that runs it, so concurrent tasks on one thread never nest into
//                    each other. Every resume switches the thread to the task's track and
//                    every suspension switches it back.
//   TracedIterator   wraps a generator: a span around each resume (next/send/throw), which
//                    is the time the generator spends computing its items.
//
// All three do nothing but delegate while Python tracing is disabled or no session records.
// Thread-safety: they run under the GIL (or, free-threaded, on their own objects).
#pragma once

#include <Python.h>

#include <cstdint>

namespace opsight::python {

// Creates the three types and adds them to `module`; false with a Python error set on
// failure.
bool add_traced_callable_types(PyObject* module);

// The global switch of opsight.enable()/disable() for traced callables.
void set_python_tracing_enabled(bool enabled);
bool python_tracing_enabled();

// Metrics every traced call measures on top of its own (opsight.MetricGroup bits, and the
// Python heap), for opsight.profile(metrics=...). GIL-protected.
void set_session_metrics(uint32_t metrics, bool heap);
uint32_t session_metrics();
bool session_heap();
// The Python heap metric's start() -> token and finish(token) (opsight._metrics); both
// called with the GIL, around the call, only when a call measures the heap.
void set_heap_hooks(PyObject* start, PyObject* finish);

// Forgets which asyncio tasks have a named track (a new session names them again).
void reset_task_tracks();
// Remembers that the asyncio task `task` was created inside a span that sent flow
// `flow_id`: the task's first traced span receives it. Under the GIL.
void note_task_flow(PyObject* task, uint64_t flow_id);
// Around loop.create_task: the flow an eager task's first span takes if the task starts
// running inside create_task; take_pending_task_flow clears it and says whether it was
// still unused (then the task did not start, and note_task_flow follows).
void set_pending_task_flow(uint64_t flow_id);
bool take_pending_task_flow();

}  // namespace opsight::python
