"""torch in every recording session, without the program asking: operators and module
calls (see ``opsight.torch``), through ``opsight._session.integrations``.

When a session starts (``opsight.profile``, ``OPSIGHT_OUTPUT``, ``opsight run``) and torch
is imported, or as soon as the program imports it later in the session, ``opsight.torch``
starts recording operators and module calls; when the session stops it stops again, unless
the program called ``opsight.torch.enable()`` itself. ``OPSIGHT_TORCH`` chooses what is
recorded: ``on`` (the default: operators and modules), ``shapes`` (also operator input
shapes), ``operators``, ``modules`` or ``off``.

This module imports nothing heavy: torch is never imported on the program's behalf, and
``opsight.torch`` imports torch only when one of its names is used.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

from .._capture.import_hook import _ImportHook
from .._session import integrations, state

_OFF_WORDS = {"off", "0", "false", "no", "none"}


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


class TorchIntegration(integrations.Integration):
    """Switches torch tracing on while a session runs (see the module's documentation). If
    torch is not imported yet when the session starts, a post-import hook waits for it."""

    name = "opsight.torch"

    def __init__(self) -> None:
        self._watcher: Any = None  # the post-import hook waiting for torch during a session

    def on_start(self) -> None:
        if torch_mode() == "off":
            return
        if "torch" in sys.modules and getattr(sys.modules["torch"], "nn", None) is not None:
            self._activate()
        elif self._watcher is None:
            self._watcher = _ImportHook(lambda name: name == "torch", self._torch_imported)
            sys.meta_path.insert(0, self._watcher)

    def on_stop(self) -> None:
        if self._watcher is not None:
            if self._watcher in sys.meta_path:
                sys.meta_path.remove(self._watcher)
            self._watcher = None
        if "opsight.torch._tracing" in sys.modules:
            sys.modules["opsight.torch._tracing"].session_stopping()

    def on_switch(self, enabled: bool) -> None:
        if "opsight.torch._tracing" in sys.modules:  # torch tracing was ever switched on
            sys.modules["opsight.torch._tracing"].switched(enabled)

    def _activate(self) -> None:
        import opsight._native as _native

        from . import _tracing

        if not _native.tracing_enabled():  # switched off: applies when switched on
            _tracing.switched(False)
        _tracing.session_started(torch_mode())

    def _torch_imported(self, module: types.ModuleType) -> None:
        if state.session is not None:
            integrations.call(self, "_activate")
