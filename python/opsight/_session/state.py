"""What this process's Python layer has running: at most one recording session (started
through ``opsight._session.lifecycle`` by ``opsight.profile`` or by ``OPSIGHT_OUTPUT`` at
start-up). Written only under the GIL by the modules that start it; imports nothing. (The
installed targets are ``opsight._capture.instrument.installed``.)"""

from __future__ import annotations

from typing import Any

#: The native session Python started, or None.
session: Any = None