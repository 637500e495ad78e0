"""What this process's Python layer has running: at most one recording session (started
through ``opsight._session.lifecycle`` by ``opsight.profile`` or by ``OPSIGHT_OUTPUT`` at
start-up) and at most one instrumenter (the installed targets). Written only under the GIL
by the modules that start them; imports nothing, so that every layer may read it."""

from __future__ import annotations

from typing import Any

#: The native session Python started, or None.
session: Any = None
#: The installed targets (``opsight._capture.instrument.Instrumenter``), or None.
instrumenter: Any = None
