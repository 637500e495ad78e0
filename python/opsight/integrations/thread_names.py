"""Python's thread names on the timeline.

The recorder knows a thread by its system id; the name a Python program gives a thread
(``threading.Thread(name="prefetcher")``, ``ThreadPoolExecutor-0_0``, ``MainThread``) lives
only in the ``threading`` module. While a session records, this integration hands each
Python thread's name to the core by its native id: the threads alive when the session
starts, and each thread started during it (``threading.Thread.start`` is wrapped while the
session runs, as the hand-off hooks are). A name the thread gave itself through
the core (C++ ``OPSIGHT_THREAD_NAME``, ``opsight::set_thread_name``) wins; a thread renamed later
keeps the name it had when it was handed over. Cost: one call into the core per thread
started, none per event.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable

import opsight._native as _native
from .._session.integrations import Integration

_MARK = "__opsight_thread_names__"


def _hand_over(thread: threading.Thread) -> None:
    native_id = getattr(thread, "native_id", None)
    if native_id is not None and thread.name:
        _native.name_thread_if_unnamed(native_id, thread.name)


def _named_start(original: Callable) -> Callable:
    @functools.wraps(original)
    def start(self, *args, **kwargs):
        result = original(self, *args, **kwargs)  # returns once the thread runs: native_id set
        if _native.recording():
            _hand_over(self)
        return result

    setattr(start, _MARK, original)
    return start


class ThreadNameIntegration(Integration):
    """Gives the core the names of Python's threads (see the module's documentation)."""

    name = "thread names"

    def on_start(self) -> None:
        for thread in threading.enumerate():
            _hand_over(thread)
        current = threading.Thread.__dict__.get("start")
        if current is not None and not hasattr(current, _MARK):
            threading.Thread.start = _named_start(current)

    def on_stop(self) -> None:
        current = threading.Thread.__dict__.get("start")
        original = getattr(current, _MARK, None)
        if original is not None:
            threading.Thread.start = original


__all__ = ["ThreadNameIntegration"]
