"""Python's thread names on the timeline.

The recorder knows a thread by its system id; the name a Python program gives a thread
(``threading.Thread(name="prefetcher")``, ``ThreadPoolExecutor-0_0``, ``MainThread``) lives
only in the ``threading`` module. While a session records, this integration hands each
Python thread's name to the core by its native id: the threads alive when the session
starts, and each thread started during it, from the thread itself before its ``run``
(``threading.Thread._bootstrap_inner`` is wrapped while the session runs, as the hand-off
hooks are), so that even a thread that ends at once is named; a name the thread never used
is dropped when it ends. A name the thread gave itself through the core (C++
``OPSIGHT_THREAD_NAME``, ``opsight::set_thread_name``) wins; a thread renamed later keeps
the name it had when it was handed over. Cost: two calls into the core per thread started,
none per event.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable

import opsight._native as _native
from .._session.integrations import Integration

_MARK = "__opsight_thread_names__"


def _named_bootstrap(original: Callable) -> Callable:
    @functools.wraps(original)
    def _bootstrap_inner(self, *args, **kwargs):
        native_id = threading.get_native_id()
        if self.name:
            _native.name_thread_if_unnamed(native_id, self.name)
        try:
            return original(self, *args, **kwargs)
        finally:
            _native.forget_unclaimed_thread_name(native_id)

    setattr(_bootstrap_inner, _MARK, original)
    return _bootstrap_inner


class ThreadNameIntegration(Integration):
    """Gives the core the names of Python's threads (see the module's documentation)."""

    name = "thread names"

    def on_start(self) -> None:
        for thread in threading.enumerate():
            native_id = getattr(thread, "native_id", None)
            if native_id is not None and thread.name:
                _native.name_thread_if_unnamed(native_id, thread.name)
        current = threading.Thread.__dict__.get("_bootstrap_inner")
        if current is not None and not hasattr(current, _MARK):
            threading.Thread._bootstrap_inner = _named_bootstrap(current)

    def on_stop(self) -> None:
        current = threading.Thread.__dict__.get("_bootstrap_inner")
        original = getattr(current, _MARK, None)
        if original is not None:
            threading.Thread._bootstrap_inner = original


__all__ = ["ThreadNameIntegration"]
