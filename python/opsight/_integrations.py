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

import importlib.abc
import os
import sys
import threading
import types
from typing import Any

from . import _session_state

_OFF_WORDS = {"off", "0", "false", "no", "none"}
_watcher: "_TorchImportWatcher | None" = None


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
        _watcher = _TorchImportWatcher()
        sys.meta_path.insert(0, _watcher)


def _on_session_stop() -> None:
    global _watcher
    if _watcher is not None:
        if _watcher in sys.meta_path:
            sys.meta_path.remove(_watcher)
        _watcher = None
    if "opsight.torch._tracing" in sys.modules:
        sys.modules["opsight.torch._tracing"].session_stopping()


class _TorchLoader(importlib.abc.Loader):
    """torch's own loader; once torch has run, switches the torch integration on."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        if _session_state.session is not None:
            _session_state._call(_activate_torch)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._loader, attribute)


class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Waits for ``import torch`` during a session (then steps aside)."""

    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "torch" or getattr(self._busy, "active", False):
            return None
        self._busy.active = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.active = False
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _TorchLoader(spec.loader)
        return spec


_session_state.add_listener(_on_session_start, _on_session_stop)
