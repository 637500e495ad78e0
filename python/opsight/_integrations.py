"""Integrations that switch themselves on while a recording session runs, without the
program asking: today torch (operators and module calls, see ``opsight.torch``).

When a session starts (``opsight.profile``, ``OPSIGHT_OUTPUT``, ``opsight run``) and torch
is imported, or as soon as the program imports it later in the session, ``opsight.torch``
starts recording operators and module calls; when the session stops it stops again, unless
the program called ``opsight.torch.enable()`` itself. ``OPSIGHT_TORCH`` chooses what is
recorded: ``on`` (the default: operators and modules), ``shapes`` (also operator input
shapes), ``operators``, ``modules`` or ``off``.

This module imports nothing heavy: torch is never imported on the program's behalf.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

from . import _session_state

_OFF_WORDS = {"off", "0", "false", "no", "none"}
_watcher: Any = None  # the post-import hook waiting for torch during a session


def torch_mode() -> str:
    """OPSIGHT_TORCH, normalised: on, shapes, operators, modules or off."""
    mode = os.environ.get("OPSIGHT_TORCH", "on").strip().lower() or "on"
    if mode in _OFF_WORDS:
        return "off"
    if mode in {"1", "true", "yes"}:
        return "on"
    if mode not in {"on", "shapes", "operators", "modules"}:
        print(f"opsight: ignoring OPSIGHT_TORCH={os.environ['OPSIGHT_TORCH']!r} (expected on, "
              "shapes, operators, modules or off)", file=sys.stderr)
        return "on"
    return mode


def _activate_torch() -> None:
    from .torch import _tracing

    _tracing.session_started(torch_mode())


def _on_session_start() -> None:
    global _watcher
    if torch_mode() == "off":
        return
    if "torch" in sys.modules and getattr(sys.modules["torch"], "nn", None) is not None:
        _activate_torch()
    elif _watcher is None:
        from ._import_hook import _ImportHook

        _watcher = _ImportHook(lambda name: name == "torch", _torch_imported)
        sys.meta_path.insert(0, _watcher)


def _on_session_stop() -> None:
    global _watcher
    if _watcher is not None:
        if _watcher in sys.meta_path:
            sys.meta_path.remove(_watcher)
        _watcher = None
    if "opsight.torch._tracing" in sys.modules:
        sys.modules["opsight.torch._tracing"].session_stopping()


def _torch_imported(module: types.ModuleType) -> None:
    if _session_state.session is not None:
        _session_state._call(_activate_torch)


_session_state.add_listener(_on_session_start, _on_session_stop)
