"""``opsight.enable()``/``disable()``: the one switch of tracing in this process.

Off, the decorators' spans cost one check (the core's switch), the installed targets put
their originals back (``opsight._capture.instrument.installed``), and every integration is
told (torch stops observing operators and module calls). ``opsight ctl PID on|off`` and the
live control routes turn the same switch."""

from __future__ import annotations

import opsight._native as _native
from .._capture import instrument
from . import integrations


def set_enabled(enabled: bool) -> None:
    """opsight.enable()/disable(): the decorators' switch, the installed targets and the
    integrations (torch's operators and module calls)."""
    _native.set_tracing_enabled(enabled)
    installed = instrument.installed
    if installed is not None:
        if enabled:
            installed.enable()
        else:
            installed.disable()
    integrations.switched(enabled)
