"""What this process's Python layer has running: at most one recording session (started by
``opsight.profile`` or by ``OPSIGHT_OUTPUT`` at start-up) and at most one instrumenter
(the installed targets). Written only under the GIL by the modules that start them."""

from __future__ import annotations

from typing import Any

#: The native session Python started, or None.
session: Any = None
#: The installed targets (``opsight._instrument.Instrumenter``), or None.
instrumenter: Any = None

# ---- listeners: integrations that act while a session runs (opsight.torch, ...) ----------
#: (on_start, on_stop) pairs, called in order at each session start and before its stop.
_listeners: list[tuple[Any, Any]] = []


def add_listener(on_start: Any, on_stop: Any) -> None:
    """Registers callables run when a session starts (or at once, if one runs) and just
    before it stops. A listener that raises is reported on stderr, never propagated:
    integrations must not change the traced program's outcome."""
    _listeners.append((on_start, on_stop))
    if session is not None:
        _call(on_start)


def session_started() -> None:
    """Called by whatever started `session` (opsight.profile, OPSIGHT_OUTPUT start-up)."""
    for on_start, _ in list(_listeners):
        _call(on_start)


def session_stopping() -> None:
    """Called by whatever stops `session`, before it stops."""
    for _, on_stop in reversed(list(_listeners)):
        _call(on_stop)


def _call(function: Any) -> None:
    import sys

    try:
        function()
    except Exception as error:  # noqa: BLE001 - an integration's failure is a warning
        print(f"opsight: warning: {getattr(function, '__qualname__', function)}: "
              f"{type(error).__name__}: {error}", file=sys.stderr)


# The integrations register their listeners when imported; importing them here makes every
# way of starting a session (which all import this module) see them.
from . import _integrations  # noqa: E402,F401
