"""A benchmark as a run of the run store (docs/store.md).

The timed queries are written as a Chrome trace after the run (the loop itself records
nothing but timestamps): one ``query`` span per query, from its start (in the server
scenario from its scheduled arrival) to its end, with one child per phase (``queue``,
``preprocess``, ``host_to_device``, ``compute``, ``device_to_host``, ``postprocess``).
Flagged queries carry ``flagged=compilation``. When the top operators were profiled with
an opsight session, that trace (same clock: CLOCK_MONOTONIC) is stored with it.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import threading
from typing import Any

from .scenarios import Timings

#: At most this many queries go into the stored trace (the statistics use all of them).
TRACE_QUERY_LIMIT = 200_000


def chrome_events(timings: Timings, attributes: dict[str, Any],
                  limit: int = TRACE_QUERY_LIMIT) -> list[dict[str, Any]]:
    pid = os.getpid()
    tid = threading.get_native_id()
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "opsight bench"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "worker"}},
    ]
    width = timings.width
    stamps = timings.stamps
    for index in range(min(timings.count, limit)):
        base = index * width
        start = stamps[base]
        begin = timings.arrivals[index] if timings.arrivals is not None else start
        end = stamps[base + width - 1]
        arguments: dict[str, Any] = {"query": index}
        if index == 0:
            arguments.update(attributes)
        if index in timings.flagged:
            arguments["flagged"] = "compilation"
        events.append({"ph": "X", "name": "query", "cat": "bench", "pid": pid, "tid": tid,
                       "ts": begin / 1e3, "dur": (end - begin) / 1e3, "args": arguments})
        if timings.arrivals is not None:
            events.append({"ph": "X", "name": "queue", "cat": "bench", "pid": pid, "tid": tid,
                           "ts": begin / 1e3, "dur": (start - begin) / 1e3})
        for position, name in enumerate(timings.phase_names):
            phase_start = stamps[base + position]
            events.append({"ph": "X", "name": name, "cat": "bench", "pid": pid, "tid": tid,
                           "ts": phase_start / 1e3,
                           "dur": (stamps[base + position + 1] - phase_start) / 1e3})
    return events


def save(timings: Timings, *, name: str, tags: dict[str, Any], extra_tags: list[str],
         operator_trace: Any, store: str | os.PathLike | None) -> dict[str, Any] | None:
    """Saves the run; returns the stored run (``id``...) or None (a warning was printed)."""
    from .._store import save_run

    try:
        with tempfile.TemporaryDirectory(prefix="opsight-bench-") as directory:
            path = os.path.join(directory, "bench.json")
            with open(path, "w", encoding="utf-8") as file:
                json.dump({"traceEvents": chrome_events(timings, tags), "displayTimeUnit": "ms"},
                          file, separators=(",", ":"))
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
    except OSError as error:
        print(f"opsight bench: warning: the run was not saved in the run store: {error}",
              file=sys.stderr)
        return None
