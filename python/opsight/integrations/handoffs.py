"""Flows across hand-offs: work one span hands to another task, thread or process.

While a session records, the standard library's hand-off points link the span that hands
work off to the span that picks it up, as flows of the trace model (arrows in Perfetto,
"from" lines in ``opsight report --tree``):

* **asyncio tasks**: ``loop.create_task`` (so ``asyncio.create_task``, ``ensure_future``,
  ``TaskGroup.create_task``, ``gather`` of coroutines) sends a flow from the span open
  where the task is created to the task's first traced span (on the task's own track);
* **thread pools**: ``concurrent.futures.ThreadPoolExecutor.submit`` (so also
  ``map`` and ``loop.run_in_executor``) runs the job inside a span ``job <function>`` on
  the worker thread, with a flow from the submitting span; the HTTP request the submitter
  was serving (``opsight.propagation``) goes with the job, so calls it makes are in the
  request's trace;
* **child processes**: ``subprocess.Popen`` runs inside a span ``subprocess <program>``
  whose flow goes to the child's first span (on the thread that starts its session),
  through ``OPSIGHT_PARENT_FLOW`` in the child's environment, read by the core when the
  child's session starts; ``multiprocessing``'s ``Process.start`` runs inside a span
  ``multiprocessing <name>`` whose flow travels in the ``Process`` object itself (pickled
  to a spawned or forkserver child, inherited by a forked one) to the first span of the
  child's ``run``. The child must be traced too (``opsight run``, ``OPSIGHT_OUTPUT``); the
  two ends meet when the traces of the processes are merged.

The hooks are installed when a session starts and removed when it stops (a hook someone
replaced meanwhile is left alone). Each costs one ``recording()`` check when no session
records; a hand-off recorded costs one flow event at each end.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

import opsight._native as _native
from .._session.integrations import Integration
from ..propagation import _current as _served_request
from .._capture.wrapping import name_id

#: The environment variable that carries a flow to a child process: "<pid>:<flow hex>".
PARENT_FLOW_VARIABLE = "OPSIGHT_PARENT_FLOW"


def _traced_create_task(original: Callable) -> Callable:
    @functools.wraps(original)
    def create_task(self, coro, *args, **kwargs):
        if not _native.recording():
            return original(self, coro, *args, **kwargs)
        flow = _native.new_flow_id()
        _native.flow_out(flow)
        # An eager task (eager_task_factory) takes the flow while create_task runs it.
        _native.set_pending_task_flow(flow)
        try:
            task = original(self, coro, *args, **kwargs)
        finally:
            unused = _native.take_pending_task_flow()
        if unused:
            _native.note_task_flow(task, flow)
        return task

    create_task.__opsight_handoff__ = original
    return create_task


def _job_name(function: Any) -> str:
    """``job <qualname>`` without calling ``repr`` (slow, unbounded, may raise): a
    ``functools.partial`` is named by its function, a callable object by its type."""
    try:
        while isinstance(function, functools.partial):
            function = function.func
        name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
        if not isinstance(name, str) or not name:
            name = type(function).__qualname__
    except Exception:  # noqa: BLE001 - naming must never break submit
        name = "?"
    return f"job {name}"


def _job(function: Callable, name: int, flow: int = 0, served: Any = None,
         unit: bool | None = None) -> Callable:
    """``function`` as a span ``name`` on the thread that runs it, the end of ``flow`` (0:
    none), serving the request ``served``; ``unit`` is the sampling unit of the submitter
    (True recorded, False sampled out, None: none), which the job joins."""

    def run_job(*args, **kwargs):
        if unit is not None:
            _native.decide_next_sampling_unit(unit)
        began = _native.begin(name)
        if began and flow:
            _native.flow_in(flow)
        # The request the submitter was serving (opsight.propagation): calls the job makes
        # are in its trace. Only opsight's own variable travels, not the submitter's context.
        token = _served_request.set(served) if served is not None else None
        try:
            return function(*args, **kwargs)
        finally:
            if token is not None:
                _served_request.reset(token)
            if began:
                _native.end()

    return run_job


_SAMPLED_OUT_JOB = name_id("job (sampled out)")
# _native.sampling_unit(): the unit the calling thread is in.
_RECORDED_UNIT = 1
#: The environment variable that carries the parent's unit to a child process ("1": it was
#: recorded, "0": sampled out); read by the core with PARENT_FLOW_VARIABLE.
PARENT_SAMPLED_VARIABLE = "OPSIGHT_PARENT_SAMPLED"


def _traced_submit(original: Callable) -> Callable:
    @functools.wraps(original)
    def submit(self, fn, /, *args, **kwargs):
        if not _native.recording():
            if _native.sampled_out():  # the job is part of the submitter's unit: left out too
                return original(self, _job(fn, _SAMPLED_OUT_JOB, unit=False), *args, **kwargs)
            return original(self, fn, *args, **kwargs)
        flow = _native.new_flow_id()
        _native.flow_out(flow)
        # With sampling, a job submitted inside a recorded unit is part of it.
        unit = True if _native.sampling_unit() == _RECORDED_UNIT else None
        job = _job(fn, name_id(_job_name(fn)), flow, _served_request.get(), unit)
        return original(self, job, *args, **kwargs)

    submit.__opsight_handoff__ = original
    return submit


def _program_name(args: Any) -> str:
    """The program a Popen runs, for the span's name; never consumes or changes ``args``."""
    try:
        if isinstance(args, (str, bytes, os.PathLike)):
            words = os.fsdecode(args).split()
            program = words[0] if words else ""
        elif isinstance(args, (list, tuple)) and args:
            program = os.fsdecode(args[0])
        else:  # any other iterable is left alone (iterating it could consume it)
            program = ""
    except (TypeError, ValueError):
        program = ""
    return os.path.basename(program) or "?"


def _parent_flow_value(flow: int) -> str:
    return f"{os.getpid()}:{flow:x}"


def _child_environment(environment: Any, variables: dict[str, str]) -> Any:
    """The environment a child gets (``Popen``'s ``env``, or the process's own when None)
    with ``variables`` added, in the same kind of keys (str or bytes) as it has."""
    if environment is None:  # what the child would get: the C environment
        environment = _native.process_environment()
        as_bytes = True
    else:
        environment = dict(environment)
        as_bytes = any(isinstance(key, bytes) for key in environment)
    for name, value in variables.items():
        if as_bytes:
            environment[os.fsencode(name)] = os.fsencode(value)
        else:
            environment[name] = value
    return environment


def _traced_popen_init(original: Callable) -> Callable:
    @functools.wraps(original)
    def __init__(self, args, *positional, **kwargs):
        if positional:
            return original(self, args, *positional, **kwargs)
        if not _native.recording():
            if _native.sampled_out():  # the child's work is part of this unit: left out too
                kwargs["env"] = _child_environment(kwargs.get("env"), {
                    PARENT_FLOW_VARIABLE: _parent_flow_value(0), PARENT_SAMPLED_VARIABLE: "0"})
            return original(self, args, **kwargs)
        began = _native.begin(name_id(f"subprocess {_program_name(args)}"))
        try:
            if began:
                flow = _native.new_flow_id()
                _native.flow_out(flow)
                variables = {PARENT_FLOW_VARIABLE: _parent_flow_value(flow)}
                if _native.sampling_unit() == _RECORDED_UNIT:
                    variables[PARENT_SAMPLED_VARIABLE] = "1"
                kwargs["env"] = _child_environment(kwargs.get("env"), variables)
            return original(self, args, **kwargs)
        finally:
            if began:
                _native.end()

    __init__.__opsight_handoff__ = original
    return __init__


#: The attribute of a ``multiprocessing`` Process object that carries its flow to the child.
_PROCESS_FLOW_ATTRIBUTE = "_opsight_parent_flow"
#: ... and the unit it was started in, when the session samples (True: recorded).
_PROCESS_SAMPLED_ATTRIBUTE = "_opsight_parent_sampled"


def _traced_process_start(original: Callable) -> Callable:
    @functools.wraps(original)
    def start(self):
        if not _native.recording():
            if _native.sampled_out():  # the child's run is part of this unit: left out too
                setattr(self, _PROCESS_SAMPLED_ATTRIBUTE, False)
            return original(self)
        began = _native.begin(name_id(f"multiprocessing {getattr(self, 'name', 'process')}"))
        try:
            if began:
                flow = _native.new_flow_id()
                _native.flow_out(flow)
                # Pickled with the object to a spawned or forkserver child, inherited by a
                # forked one; read there by _traced_process_bootstrap.
                setattr(self, _PROCESS_FLOW_ATTRIBUTE, flow)
                if _native.sampling_unit() == _RECORDED_UNIT:
                    setattr(self, _PROCESS_SAMPLED_ATTRIBUTE, True)
            return original(self)
        finally:
            if began:
                _native.end()

    start.__opsight_handoff__ = original
    return start


def _traced_process_bootstrap(original: Callable) -> Callable:
    @functools.wraps(original)
    def _bootstrap(self, *args, **kwargs):
        flow = self.__dict__.pop(_PROCESS_FLOW_ATTRIBUTE, None)
        sampled = self.__dict__.pop(_PROCESS_SAMPLED_ATTRIBUTE, None)
        if sampled is not None:  # the parent's unit goes on in the child's run()
            _native.decide_next_sampling_unit(sampled)
        if flow is not None and _native.recording():
            _native.flow_into_next(flow)  # the first span of the child's run()
        return original(self, *args, **kwargs)

    _bootstrap.__opsight_handoff__ = original
    return _bootstrap


def _hook_points() -> list[tuple[Any, str, Callable[[Callable], Callable]]]:
    # Imported here, at the first session's start, not at ``import opsight``.
    import asyncio.base_events
    import concurrent.futures
    import multiprocessing.process
    import subprocess

    return [
        (asyncio.base_events.BaseEventLoop, "create_task", _traced_create_task),
        (concurrent.futures.ThreadPoolExecutor, "submit", _traced_submit),
        (subprocess.Popen, "__init__", _traced_popen_init),
        (multiprocessing.process.BaseProcess, "start", _traced_process_start),
        (multiprocessing.process.BaseProcess, "_bootstrap", _traced_process_bootstrap),
    ]


class HandoffIntegration(Integration):
    """Installs the hand-off hooks while a session runs (see the module's documentation)."""

    name = "handoffs"

    def on_start(self) -> None:
        for owner, attribute, make in _hook_points():
            current = owner.__dict__.get(attribute)
            if current is None or hasattr(current, "__opsight_handoff__"):
                continue
            setattr(owner, attribute, make(current))

    def on_stop(self) -> None:
        for owner, attribute, _ in _hook_points():
            current = owner.__dict__.get(attribute)
            original = getattr(current, "__opsight_handoff__", None)
            if original is not None:
                setattr(owner, attribute, original)


__all__ = ["HandoffIntegration", "PARENT_FLOW_VARIABLE", "PARENT_SAMPLED_VARIABLE"]
