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

import sys

from .._session import integrations


def torch_mode() -> str:
    """OPSIGHT_TORCH, normalised: on, shapes, operators, modules or off."""
    return integrations.mode_from_environment("OPSIGHT_TORCH",
                                              ("on", "shapes", "operators", "modules"))


class TorchIntegration(integrations.Integration):
    """Switches torch tracing on while a session runs (see the module's documentation). If
    torch is not imported yet when the session starts, a post-import hook waits for it."""

    name = "opsight.torch"

    def __init__(self) -> None:
        # Waits for torch during a session (torch.nn set: the package is imported whole).
        self._watch = integrations.ImportWatch(
            self, "torch", "_activate", ready=lambda torch: getattr(torch, "nn", None) is not None)

    def on_start(self) -> None:
        if torch_mode() != "off":
            self._watch.start()

    def on_stop(self) -> None:
        self._watch.stop()
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
