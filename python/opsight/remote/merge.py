"""One run from many machines: the workers' traces merged with the caller's, one process per
worker, each moved onto the caller's clock by its measured offset, and the run saved in the
run store with every worker's hardware facts as tags.

A worker's trace comes as Chrome JSON (the core's writer); its events are given a process id
of their own (the worker's pid unless two workers share one, as on two machines), a process
name (``worker 2: nodeB/torchscript``) and labels (host, node, CPU, GPU) before the core's
reader and ``Trace.append`` (the merge every opsight front end uses) take it. The caller's
own process shows, per back-end, how long it was queued, how long its worker took to start
and how long it measured."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from .cluster import Outcome
from .facts import facts_line

#: Process ids given to workers whose own pid is taken.
_SYNTHETIC_PID_BASE = 1_000_000


def _events(document: Any) -> list[dict[str, Any]]:
    if isinstance(document, dict):
        return list(document.get("traceEvents") or [])
    return list(document or [])


def _metadata(pid: int, name: str, labels: list[str], sort_index: int) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
         "args": {"labels": ",".join(label.replace(",", ";") for label in labels if label)}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": sort_index}},
    ]


def worker_labels(outcome: Outcome) -> list[str]:
    facts = outcome.facts or {}
    # The spec is the process's name already (worker N: SPEC).
    labels = [f"host {facts.get('host')}", f"node {str(outcome.node_id)[:12]}"]
    labels.extend(part.strip() for part in facts_line({**facts, "node_id": None}).split(", "))
    if outcome.clock_offset_ns is not None:
        labels.append(f"clock offset {outcome.clock_offset_ns / 1e3:+.1f} us "
                      f"(+-{(outcome.clock_uncertainty_ns or 0) / 1e3:.1f} us)")
    return labels


def _worker_pids(outcomes: list[Outcome]) -> list[int]:
    taken = {os.getpid()}
    pids = []
    for index, outcome in enumerate(outcomes):
        pid = int((outcome.facts or {}).get("pid") or 0)
        if not pid or pid in taken:
            pid = _SYNTHETIC_PID_BASE + index + 1
        taken.add(pid)
        pids.append(pid)
    return pids


def _caller_events(outcomes: list[Outcome], title: str) -> list[dict[str, Any]]:
    pid = os.getpid()
    events = _metadata(pid, f"{title} (caller, {os.uname().nodename})", ["caller"], 0)
    for index, outcome in enumerate(outcomes):
        tid = index + 1
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": str(outcome.spec)}})
        end = outcome.ended_ns or outcome.submitted_ns
        args = {"node_id": outcome.node_id or "", "error": outcome.error or ""}
        if outcome.clock_offset_ns is not None:
            args["clock_offset_ns"] = outcome.clock_offset_ns
            args["clock_uncertainty_ns"] = outcome.clock_uncertainty_ns
        events.append({"ph": "X", "name": str(outcome.spec), "cat": "remote", "pid": pid,
                       "tid": tid, "ts": outcome.submitted_ns / 1e3,
                       "dur": (end - outcome.submitted_ns) / 1e3, "args": args})
        stages = [("queued", outcome.submitted_ns, outcome.started_ns),
                  ("starting worker", outcome.started_ns, outcome.measuring_ns),
                  ("measuring", outcome.measuring_ns, outcome.ended_ns)]
        for name, begin, finish in stages:
            if begin is None:
                continue
            finish = finish or end
            events.append({"ph": "X", "name": name, "cat": "remote", "pid": pid, "tid": tid,
                           "ts": begin / 1e3, "dur": max(0, finish - begin) / 1e3})
    return events


def _read_events(events: list[dict[str, Any]], directory: str, stem: str,
                 other: dict[str, Any]) -> Any:
    """The core's reading of a Chrome JSON document of ``events``; ``other`` is its
    ``otherData`` (the writer's run information, and ``time_base_ns``, which its ``ts``
    values count from)."""
    import opsight._native as native

    path = os.path.join(directory, f"{stem}.json")
    with open(path, "w", encoding="utf-8") as file:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}, file)
    return native.read_trace(path)


def _caller_run_info() -> dict[str, Any]:
    import shlex
    import time

    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return {"writer": "opsight", "command_line": shlex.join(argv), "host": os.uname().nodename,
            "pid": os.getpid(), "clock": "clock_gettime",
            "start_unix_ns": time.time_ns(),
            "unix_offset_ns": time.time_ns() - time.perf_counter_ns()}


def merged_trace(outcomes: list[Outcome], title: str) -> Any:
    """The caller's process and one process per worker that sent a trace, on the caller's
    clock (``opsight._native.Trace``)."""
    pids = _worker_pids(outcomes)
    with tempfile.TemporaryDirectory(prefix="opsight-remote-") as directory:
        merged = _read_events(_caller_events(outcomes, title), directory, "caller",
                              _caller_run_info())
        for index, (outcome, pid) in enumerate(zip(outcomes, pids)):
            text = (outcome.value or {}).get("trace_json") if outcome.ok else None
            if not text:
                continue
            document = json.loads(text)
            other = document.get("otherData", {}) if isinstance(document, dict) else {}
            events = []
            for event in _events(document):
                if event.get("ph") == "M" and event.get("name") in (
                        "process_name", "process_labels", "process_sort_index"):
                    continue
                if "pid" in event:
                    event["pid"] = pid
                events.append(event)
            events.extend(_metadata(pid, f"worker {index + 1}: {outcome.spec}",
                                    worker_labels(outcome), index + 1))
            worker = _read_events(events, directory, f"worker-{index + 1}", other)
            merged.append(worker, -(outcome.clock_offset_ns or 0))
    return merged


def worker_tags(outcomes: list[Outcome], costs: list[float | None]) -> dict[str, str]:
    """The run's tags: per worker (numbered from 1, as its process) its spec, node, host,
    hardware, versions, clock offset, cost and error."""
    tags: dict[str, str] = {}
    for number, (outcome, cost) in enumerate(zip(outcomes, costs), start=1):
        facts = outcome.facts or {}
        prefix = f"worker.{number}."
        tags[prefix + "spec"] = str(outcome.spec)
        tags[prefix + "node_id"] = str(outcome.node_id or "")
        for key in ("host", "cpu_model", "cpu_count", "memory_bytes", "nvidia_driver", "cuda"):
            if facts.get(key) is not None:
                tags[prefix + key] = str(facts[key])
        if facts.get("gpus"):
            tags[prefix + "gpus"] = "; ".join(facts["gpus"])
        for package, version in (facts.get("versions") or {}).items():
            tags[prefix + package] = str(version)
        if outcome.clock_offset_ns is not None:
            tags[prefix + "clock_offset_ns"] = str(outcome.clock_offset_ns)
            tags[prefix + "clock_uncertainty_ns"] = str(outcome.clock_uncertainty_ns)
        if cost is not None:
            tags[prefix + "cost_per_million"] = f"{cost:.6g}"
        if outcome.error:
            tags[prefix + "error"] = outcome.error
    return tags


def save(trace: Any, *, name: str, tags: dict[str, str], store: Any, prefix: str) -> Any:
    """Saves the merged run; None (after a warning) when it could not be saved."""
    import shlex

    from .._store import save_run

    command = shlex.join(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    return save_run(trace=trace, name=name, tags=tags, command=command,
                    store=None if store is True else store, prefix=prefix)
