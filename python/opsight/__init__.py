"""opsight: see where the time of a Python program goes, with tracing that costs
nanoseconds.

Quick start::

    import opsight

    @opsight.trace
    def preprocess(batch): ...

    with opsight.profile() as prof:           # or profile("run.opsight" | "trace.json" | "run.pftrace")
        with prof.record("warm up"):
            preprocess(batch)
        with opsight.span("infer", batch=8):
            model(batch)
    prof.print_tree()                           # HiQ's call tree
    prof.print_summary()                        # count, total, p50 ... p99.9 per span name
    frame = prof.dataframe()                    # one row per span (pandas)

Without changing the program: ``opsight run -c targets.yaml -- python app.py`` (a targets
file lists the functions to trace, see ``opsight.targets``), or ``OPSIGHT_OUTPUT=trace.json
python app.py``. ``opsight.disable()``/``enable()`` (or ``opsight ctl PID off|on`` from
outside) switch tracing at run time.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, TypeVar, overload

from . import _native
from ._capture.span import Span, span
from ._capture.wrapping import wrap as _wrap
from ._results import TraceFile, compare, compare_report, load, spans_dataframe
from ._session import integrations as _integrations
from ._session.flight_recorder import dump
from ._session.profile import Profile, profile
from ._session.switch import set_enabled as _set_enabled
from .integrations.handoffs import HandoffIntegration as _HandoffIntegration
from .integrations.thread_names import ThreadNameIntegration as _ThreadNameIntegration
from .onnxruntime import OnnxRuntimeIntegration as _OnnxRuntimeIntegration
from .integrations._integration import HttpIntegration as _HttpIntegration
from .integrations.cuda import CudaIntegration as _CudaIntegration
from .integrations.logs import LogsIntegration as _LogsIntegration
from .targets import Target, TargetsError, load_targets
from .model_view import print_model
from . import propagation
from .torch._integration import TorchIntegration as _TorchIntegration

__version__ = _native.version()

__all__ = [
    "Profile", "Span", "Target", "TargetsError", "TraceFile", "compare", "compare_report",
    "begin_async", "disable", "dump", "enable", "enabled", "end_async", "flow_in", "flow_out",
    "instant", "counter", "load", "load_targets", "new_flow_id", "profile", "propagation",
    "print_model", "read_trace", "span",
    "spans_dataframe", "trace",
]

_Callable = TypeVar("_Callable", bound=Callable[..., Any])


@overload
def trace(function: _Callable, /) -> _Callable: ...
@overload
def trace(name: str | None = None, /, *, category: str = "python",
          metrics: list[str] | tuple[str, ...] | None = None) -> Callable[[_Callable], _Callable]: ...


def trace(function_or_name: Any = None, /, *, category: str = "python",
          metrics: list[str] | tuple[str, ...] | None = None) -> Any:
    """Records a span around each call of the decorated function.

    ``@opsight.trace`` names the span after the function's ``__qualname__``;
    ``@opsight.trace("name")`` names it. Works on functions, methods (also under
    ``@staticmethod``/``@classmethod``), ``async def`` functions (one span per call, on the
    asyncio task's own track), generators (one span per resume) and async generators (one
    span per step). Behaviour is unchanged: same results, same exceptions (recorded on the
    span as ``exception.type``/``exception.message``), ``functools.wraps`` metadata.
    ``@opsight.trace(metrics=["cpu", "memory"])`` also measures those metrics per call
    (docs/metrics.md).
    """
    # A classmethod object is not callable (a staticmethod is, since 3.10), yet
    # ``@opsight.trace`` above ``@classmethod`` must wrap it rather than take it for a name.
    if (callable(function_or_name) or isinstance(function_or_name, (staticmethod, classmethod))) \
            and not isinstance(function_or_name, str):
        return _wrap(function_or_name, None, category, metrics)
    name = function_or_name
    if name is not None and not isinstance(name, str):
        raise TypeError(f"opsight.trace: expected a callable or a span name, got {name!r}")

    def decorate(function: _Callable) -> _Callable:
        return _wrap(function, name, category, metrics)

    return decorate


def enable() -> None:
    """Switches Python tracing back on: decorators record and targets are wrapped again."""
    _set_enabled(True)


def disable() -> None:
    """Switches Python tracing off: targets get their original functions back (no cost at
    all) and decorated functions call straight through."""
    _set_enabled(False)


def enabled() -> bool:
    return _native.tracing_enabled()


def instant(name: str) -> None:
    """Marks a point in time on the calling thread's track."""
    _native.instant(name)


def counter(name: str, value: float) -> None:
    """Records one sample of a counter (a value over time)."""
    _native.counter(name, value)


def begin_async(name: str, id: int) -> bool:  # noqa: A002 - the model's word
    """Begins an async span ``name`` on the process's async track for ``id`` (a request id,
    a queue entry): it may end on any thread, with :func:`end_async`. Spans of one id nest
    by time. Returns whether it was recorded (a session records)."""
    return _native.begin_async(name, id & 0xFFFF_FFFF_FFFF_FFFF)


def end_async(id: int) -> None:  # noqa: A002
    """Ends the innermost open async span of ``id``, whichever thread began it."""
    _native.end_async(id & 0xFFFF_FFFF_FFFF_FFFF)


def new_flow_id() -> int:
    """A flow id unique across threads and processes, for :func:`flow_out`/:func:`flow_in`."""
    return _native.new_flow_id()


def flow_out(id: int | None = None) -> int:  # noqa: A002
    """Marks the innermost open span of this thread (or asyncio task) as handing work off:
    a flow leaves it. Returns the flow's id (a new one unless given); hand it with the work
    to whoever picks it up, who calls :func:`flow_in` with it inside the span doing the
    work. asyncio tasks, thread-pool jobs and child processes are linked without this."""
    flow = _native.new_flow_id() if id is None else id & 0xFFFF_FFFF_FFFF_FFFF
    _native.flow_out(flow)
    return flow


def flow_in(id: int) -> None:  # noqa: A002
    """The flow ``id`` (from :func:`flow_out`) arrives at the innermost open span of this
    thread (or asyncio task)."""
    _native.flow_in(id & 0xFFFF_FFFF_FFFF_FFFF)


def read_trace(path: str) -> Any:
    """Deprecated: use :func:`opsight.load`, the one reader (files and stored runs), whose
    result has every report; ``opsight.load(path).trace`` is what this returned."""
    warnings.warn("opsight.read_trace is deprecated: use opsight.load(path) (its .trace is the "
                  "same object)", DeprecationWarning, stacklevel=2)
    return _native.read_trace(path)


# The integrations take part in every session from here (opsight._session.integrations).
_integrations.register(_HandoffIntegration())
_integrations.register(_ThreadNameIntegration())
_integrations.register(_TorchIntegration())
_integrations.register(_OnnxRuntimeIntegration())
_integrations.register(_HttpIntegration())
_integrations.register(_CudaIntegration())
_integrations.register(_LogsIntegration())
