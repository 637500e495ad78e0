"""``opsight.span``: a span around a ``with`` block, with attributes."""

from __future__ import annotations

from typing import Any

import opsight._native as _native
from .metrics import SpanMetrics, parse_metrics, wants_metrics
from .wrapping import name_id


class Span:
    """``with opsight.span("tokenize", batch=8):`` records the block as one span.

    Attributes (``int``, ``float``, ``str``, ``bool``; anything else as its ``str``) attach
    to the span; :meth:`set` adds more while it is open. An exception leaving the block is
    recorded as ``exception.type`` and ``exception.message`` and propagates unchanged.
    ``metrics=["cpu", "memory"]`` measures those metrics too (docs/metrics.md).
    """

    __slots__ = ("_name_id", "_attributes", "_recorded", "_groups", "_heap", "_measured")

    def __init__(self, name: str, category: str = "python", *,
                 metrics: list[str] | tuple[str, ...] | None = None, **attributes: Any) -> None:
        self._name_id = name_id(name, category)
        self._attributes = attributes
        self._groups, self._heap = parse_metrics(metrics)
        # One entry per open use of this object: a span object may be entered again while
        # open (recursion, a module-level span reused), each exit closes its own use.
        self._recorded: list[bool] = []
        self._measured: list[SpanMetrics | None] = []

    def __enter__(self) -> "Span":
        recorded = _native.tracing_enabled() and _native.begin(self._name_id)
        self._recorded.append(recorded)
        if recorded:
            for key, value in self._attributes.items():
                _native.add_arg(key, value)
        self._measured.append(
            SpanMetrics(self._groups, self._heap)
            if recorded and wants_metrics(self._groups, self._heap) else None
        )
        return self

    def set(self, key: str, value: Any) -> None:
        """Adds an attribute (only while no child span is open)."""
        if self._recorded and self._recorded[-1]:
            _native.add_arg(key, value)

    def __exit__(self, exception_type: Any, exception: Any, traceback: Any) -> None:
        measured = self._measured.pop() if self._measured else None
        if not self._recorded or not self._recorded.pop():
            return
        if measured is not None:
            measured.finish()
        if exception_type is not None:
            module = getattr(exception_type, "__module__", "builtins")
            qualname = getattr(exception_type, "__qualname__", exception_type.__name__)
            _native.add_arg(
                "exception.type", qualname if module == "builtins" else f"{module}.{qualname}"
            )
            _native.add_arg("exception.message", str(exception)[:4096])
        _native.end()


def span(name: str, category: str = "python", *,
         metrics: list[str] | tuple[str, ...] | None = None, **attributes: Any) -> Span:
    """``with opsight.span("name", key=value):``; see :class:`Span`."""
    return Span(name, category, metrics=metrics, **attributes)
