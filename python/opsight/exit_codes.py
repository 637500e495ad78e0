"""The exit statuses of every ``opsight`` command, Python's and the C++ core's alike. The
table is the core's (``include/opsight/exit_codes.hpp``'s ``kExitStatuses``), read through
the binding, so that both halves of the command exit with the same numbers; ``STATUSES``
holds each with what it means:

====  ==========================================================================
0     ok
1     unusable input (a missing file, a model that cannot load) or a failed check
2     damaged input: the part before the damage was used
3     a regression or a bound not held (``compare --fail-on-regression``, bench's p99)
64    bad usage: an unknown command, option or value
75    ``opsight run``: the program exited 0 but an export dropped spans (sysexits'
      EX_TEMPFAIL: try again); ``--allow-export-drops`` keeps 0
====  ==========================================================================

``opsight run`` exits with the traced program's own status, except 64 for a bad export
target (the program is not started) and 75 as above.
"""

from __future__ import annotations

from . import _native

#: Each status by its name: (code, meaning), in the core's order.
STATUSES: dict[str, tuple[int, str]] = {
    name: (code, meaning) for name, code, meaning in _native.exit_statuses()}

OK: int = STATUSES["OK"][0]
ERROR: int = STATUSES["ERROR"][0]
DAMAGED: int = STATUSES["DAMAGED"][0]
REGRESSION: int = STATUSES["REGRESSION"][0]
USAGE_ERROR: int = STATUSES["USAGE_ERROR"][0]
EXPORT_INCOMPLETE: int = STATUSES["EXPORT_INCOMPLETE"][0]
