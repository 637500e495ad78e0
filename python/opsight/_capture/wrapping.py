"""Wrapping callables so that each call records a span.

One function, :func:`wrap`, turns any callable into its traced twin, picking the wrapper by
what the callable is:

* plain functions, methods, builtins, C-extension methods and other callables: a native
  ``TracedFunction`` (no Python frame of its own; binds as a method);
* ``async def`` functions: an ``async def`` wrapper (so ``inspect.iscoroutinefunction``
  stays true) whose coroutine is driven through a native ``TracedAwaitable``: one span from
  the coroutine's first resume to its end, on the track of the asyncio task running it;
* generator functions: a generator wrapper delegating to a native ``TracedIterator``: one
  span per resume (each ``next``/``send``/``throw``), i.e. the time spent computing items,
  not the time the consumer holds the generator open;
* async generator functions: an async-iterator proxy with one span per step (each
  ``__anext__``/``asend``/``athrow``), on the task's track;
* ``staticmethod``/``classmethod`` objects: the function inside is wrapped and re-wrapped.

Every wrapper keeps the callable's behaviour: the same return values, the same exceptions
re-raised unchanged (the span records ``exception.type`` and ``exception.message``),
``functools.wraps`` metadata (``__wrapped__``, ``__name__``, ``__qualname__``, ``__doc__``,
so ``inspect.signature`` is unchanged), and methods still bind.
"""

from __future__ import annotations

import functools
import inspect
import types
import warnings
from typing import Any, Callable, Iterable

import opsight._native as _native
from .metrics import parse_metrics

#: The category of spans of wrapped Python callables.
PYTHON_CATEGORY = "python"

_name_ids: dict[tuple[str, str], int] = {}


def name_id(name: str, category: str = PYTHON_CATEGORY) -> int:
    """The recorder's id for a span name (interned once per process)."""
    key = (name, category)
    found = _name_ids.get(key)
    if found is None:
        found = _name_ids[key] = _native.register_name(name, category)
    return found


def default_name(function: Any) -> str:
    """The span name of a callable: its ``__qualname__`` (``Model.forward``)."""
    for attribute in ("__qualname__", "__name__"):
        value = getattr(function, attribute, None)
        if isinstance(value, str) and value:
            return value
    return repr(function)


def is_traced(function: Any) -> bool:
    """Whether ``function`` is already one of opsight's wrappers."""
    return getattr(function, "_opsight_wrapped", None) is not None


def unwrap(function: Any) -> Any:
    """The callable an opsight wrapper calls (``function`` itself if it is not one)."""
    while is_traced(function):
        function = function._opsight_wrapped
    return function


def wrap(function: Any, name: str | None = None, category: str = PYTHON_CATEGORY,
         metrics: Iterable[str] | None = None) -> Any:
    """Returns a traced twin of ``function`` that records a span named ``name``.

    ``metrics`` (names from opsight._capture.metrics.METRIC_NAMES) are measured per call of plain
    functions; generators and coroutines record latency only (their other metrics would
    mix in whatever else their thread runs while they are suspended).
    """
    if isinstance(function, (staticmethod, classmethod)):
        return type(function)(wrap(function.__func__, name, category, metrics))
    if is_traced(function):
        return function
    if not callable(function):
        raise TypeError(f"opsight: cannot trace {function!r}: it is not callable")
    span_name = name if name is not None else default_name(function)
    if metrics and (inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
                    or inspect.isgeneratorfunction(function)):
        _warn_latency_only(span_name, metrics)
    identifier = name_id(span_name, category)
    if inspect.iscoroutinefunction(function):
        wrapper = _wrap_coroutine_function(function, identifier)
    elif inspect.isasyncgenfunction(function):
        wrapper = _wrap_async_generator_function(function, identifier)
    elif inspect.isgeneratorfunction(function):
        wrapper = _wrap_generator_function(function, identifier)
        if getattr(getattr(function, "__code__", None), "co_flags", 0) & inspect.CO_ITERABLE_COROUTINE:
            wrapper = types.coroutine(wrapper)  # a @types.coroutine generator stays awaitable
    else:
        groups, heap = parse_metrics(metrics)
        wrapper = _native.TracedFunction(function, identifier, groups, heap)
        _copy_metadata(wrapper, function)
        return wrapper
    _copy_metadata(wrapper, function)
    wrapper._opsight_wrapped = function
    wrapper._opsight_name_id = identifier
    return wrapper


def _warn_latency_only(span_name: str, metrics: Iterable[str]) -> None:
    asked = [metric for metric in metrics if metric != "latency"]
    if asked:
        warnings.warn(
            f"opsight: {span_name} is a generator or coroutine function: it records latency "
            f"only, not {', '.join(asked)} (docs/metrics.md)",
            RuntimeWarning,
            stacklevel=4,
        )


def _copy_metadata(wrapper: Any, function: Any) -> None:
    try:
        functools.update_wrapper(wrapper, function)
    except (AttributeError, TypeError):  # some C callables have read-only metadata
        wrapper.__wrapped__ = function


def _wrap_coroutine_function(function: Callable, identifier: int) -> Callable:
    traced_awaitable = _native.TracedAwaitable

    async def traced_coroutine(*args, **kwargs):
        return await traced_awaitable(function(*args, **kwargs), identifier)

    return traced_coroutine


def _wrap_generator_function(function: Callable, identifier: int) -> Callable:
    traced_iterator = _native.TracedIterator

    def traced_generator(*args, **kwargs):
        return (yield from traced_iterator(function(*args, **kwargs), identifier))

    return traced_generator


class TracedAsyncGenerator:
    """An async generator whose every step (``__anext__``, ``asend``, ``athrow``) is a span
    on the track of the asyncio task that awaits it."""

    __slots__ = ("_generator", "_name_id")

    def __init__(self, generator: Any, identifier: int) -> None:
        self._generator = generator
        self._name_id = identifier

    def __aiter__(self) -> "TracedAsyncGenerator":
        return self

    def __anext__(self):
        return _native.TracedAwaitable(self._generator.__anext__(), self._name_id)

    def asend(self, value: Any):
        return _native.TracedAwaitable(self._generator.asend(value), self._name_id)

    def athrow(self, *args: Any):
        return _native.TracedAwaitable(self._generator.athrow(*args), self._name_id)

    def aclose(self):
        return self._generator.aclose()

    def __getattr__(self, attribute: str) -> Any:  # ag_frame, ag_running, ...
        return getattr(self._generator, attribute)

    def __repr__(self) -> str:
        return f"<opsight traced {self._generator!r}>"


def _wrap_async_generator_function(function: Callable, identifier: int) -> Callable:
    def traced_async_generator(*args, **kwargs):
        return TracedAsyncGenerator(function(*args, **kwargs), identifier)

    return traced_async_generator
