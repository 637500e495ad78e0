"""The flight recorder's options for a session (docs/production.md): a ring of the most
recent events kept in memory instead of a file, and what dumps it.

``opsight.profile(ring="60s")``, ``opsight run --ring 60s`` (``OPSIGHT_RING`` for the program
it starts) and the native core (``SessionOptions::ring``) share one spec: an age (``60s``,
``5m``), a size (``256MiB``) or both (``60s,1GiB``); the core parses it and names what is
wrong. A dump (:func:`dump`, ``opsight ctl PID dump``, SIGUSR2, an exception leaving a root
span, a root span slower than a ``dump_on_slow`` rule, the session's end) writes an
ordinary ``.opsight`` run: ``<dump prefix>.dump-N.opsight``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import state


@dataclass(frozen=True)
class RingOptions:
    """What a session's flight recorder keeps and when it dumps; ``ring`` empty: no
    flight recorder (the session streams everything to its output)."""

    ring: str = ""
    dump_prefix: str = ""
    dump_on_slow: str = ""
    dump_on_exception: bool = True

    def native_arguments(self) -> dict[str, object]:
        return {"ring": self.ring, "dump_prefix": self.dump_prefix,
                "dump_on_slow": self.dump_on_slow, "dump_on_exception": self.dump_on_exception}


def from_environment() -> RingOptions:
    """The options ``opsight run`` hands the program it starts: ``OPSIGHT_RING``,
    ``OPSIGHT_DUMP_ON_SLOW``, ``OPSIGHT_DUMP_DIR`` (dumps go to ``DIR/<pid>.dump-N.opsight``)
    and ``OPSIGHT_DUMP_ON_EXCEPTION`` (``0`` turns that trigger off)."""
    ring = os.environ.get("OPSIGHT_RING", "")
    if not ring:
        return RingOptions()
    directory = os.environ.get("OPSIGHT_DUMP_DIR", "")
    prefix = os.path.join(directory, str(os.getpid())) if directory else ""
    return RingOptions(ring=ring, dump_prefix=prefix,
                       dump_on_slow=os.environ.get("OPSIGHT_DUMP_ON_SLOW", ""),
                       dump_on_exception=os.environ.get("OPSIGHT_DUMP_ON_EXCEPTION", "1") != "0")


def dump(trigger: str = "opsight.dump()") -> str:
    """Writes what the running session's flight recorder holds to its next dump file and
    returns the file's path. Raises ``RuntimeError`` when no session runs, or when it runs
    without a ring (``opsight.profile(ring="60s")``, ``opsight run --ring 60s``)."""
    session = state.session
    if session is None:
        raise RuntimeError("opsight.dump: no recording session is running")
    return session.dump(trigger)
