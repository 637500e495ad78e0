"""A benchmark as a run of the run store (docs/store.md).

What is stored is the trace the timed queries were recorded in (:mod:`.recording`), written
by the core in its native format: one ``query`` span per counted query, from its start (in
the server scenario from its scheduled arrival) to its end, with one child per phase
(``queue``, ``preprocess``, ``host_to_device``, ``compute``, ``device_to_host``,
``postprocess``); a query that compiled is a ``compiling query`` span with
``flagged=compilation``. When the top operators were profiled with an opsight session,
that trace (same clock) is stored with it. ``opsight report RUN --summary`` and
``--breakdown query`` on the run therefore give the bench report's numbers.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from typing import Any


def save(trace: Any, *, name: str, tags: dict[str, Any], extra_tags: list[str],
         operator_trace: Any, store: str | os.PathLike | None) -> dict[str, Any] | None:
    """Saves the run; returns the stored run (``id``...) or None (a warning was printed)."""
    from .._store import save_run

    try:
        with tempfile.TemporaryDirectory(prefix="opsight-bench-") as directory:
            path = os.path.join(directory, "bench.opsight")
            trace.write(path)
            files = [path]
            if operator_trace is not None:
                operators_path = os.path.join(directory, "operators.opsight")
                try:
                    operator_trace.write(operators_path)
                    files.append(operators_path)
                except (RuntimeError, OSError):
                    pass
            all_tags = [f"{key}={value}" for key, value in tags.items()] + list(extra_tags)
            command = shlex.join(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
            return save_run(files, name=name, tags=all_tags, command=command, store=store,
                            prefix="opsight bench")
    except (OSError, RuntimeError) as error:
        print(f"opsight bench: warning: the run was not saved in the run store: {error}",
              file=sys.stderr)
        return None
