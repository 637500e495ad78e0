"""Connecting to a Ray cluster and running measurements on its labelled nodes, in parallel
and fairly.

``connect(address, labels)`` joins the cluster (``ray://HOST:PORT`` through Ray Client,
``HOST:PORT`` as a driver on the cluster's network, ``auto``, or ``local``: a Ray instance
started on this machine whose node carries every hardware label asked for, so the same
command runs on a laptop). An address is first reached over TCP within a bound, so one that
does not answer is a clear error, not a wait.

``run_jobs`` places each job on a node that has its hardware label (a Ray custom resource)
and runs it in a fresh :class:`.worker.Worker` actor pinned to that node
(``NodeAffinitySchedulingStrategy``, not soft). Fairness: the jobs of one node run one after
another (a queue per node, kept by the caller), and each actor also takes one unit of its
label's resource and the whole of the node's own ``node:IP`` resource, so that two
measurements never share a node even across callers, even on different labels of one node;
jobs on different nodes run at once. A job whose worker dies or overruns its time limit gets
an error and its actor is killed; the others go on. Before a job is measured, its worker's
clock is read against the caller's (the round trip with the smallest delay gives the offset,
half that delay its uncertainty) so that its trace can be put on the caller's timeline."""

from __future__ import annotations

import collections
import logging
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..models import error_text
from .specs import BackendSpec, RemoteError

#: The Ray release opsight is tested with (requirements/test.txt pins it).
RAY_VERSION = "2.60.0"
#: How long reaching a cluster's address may take.
CONNECT_TIMEOUT_S = 10.0
#: Tries to open a Ray Client session (``ray://``): its server side fails to start a session
#: now and then (ray-project/ray#63202); each try takes a second or two.
CLIENT_ATTEMPTS = 4
#: Clock readings per worker; the one with the shortest round trip is used.
CLOCK_READINGS = 7

_connected: dict[str, Any] = {"address": None}


def import_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise RemoteError(f"running on a cluster needs Ray, which is not installed ({error}): "
                          f"pip install 'ray[client]=={RAY_VERSION}'") from None
    return ray


def _host_port(address: str) -> tuple[str, int]:
    rest = address.removeprefix("ray://")
    host, colon, port = rest.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RemoteError(f"--cluster {address!r}: expected ray://HOST:PORT (Ray Client), "
                          "HOST:PORT (the head's GCS address), auto or local")
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raises :class:`RemoteError` when nothing accepts a TCP connection at ``address``
    within ``timeout_s``."""
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as error:
        reason = "no answer" if isinstance(error, (socket.timeout, TimeoutError)) \
            else (error.strerror or str(error))
        raise RemoteError(
            f"the Ray cluster at {address} does not answer ({reason} within "
            f"{timeout_s:g} s): is it started (ray start --head"
            + (" --ray-client-server-port PORT" if address.startswith("ray://") else "")
            + ") and is the address right?") from None


def connect(address: str, labels: list[str], *, timeout_s: float = CONNECT_TIMEOUT_S) -> str:
    """Joins the cluster at ``address`` (see the module's documentation); returns a
    description of it. A process already connected to Ray (``ray.init`` called by the
    program or an earlier call) keeps that connection."""
    if not isinstance(address, str) or not address.strip():
        raise RemoteError("--cluster: expected ray://HOST:PORT, HOST:PORT, auto or local")
    address = address.strip()
    if address not in ("local", "auto"):
        _host_port(address)
    ray = import_ray()
    if ray.is_initialized():
        if _connected["address"] in (None, address) or address == "auto":
            return _connected["address"] or "the Ray instance this process is connected to"
        ray.shutdown()
    if address not in ("local", "auto"):
        check_reachable(address, timeout_s)
    options: dict[str, Any] = {"namespace": "opsight", "logging_level": logging.WARNING,
                               "log_to_driver": False}
    attempts = CLIENT_ATTEMPTS if address.startswith("ray://") else 1
    for attempt in range(1, attempts + 1):
        try:
            if address == "local":
                ray.init(resources={label: 1 for label in labels}, include_dashboard=False,
                         **options)
            else:
                ray.init(address=address, **options)
            break
        except Exception as error:  # noqa: BLE001 - Ray's own errors, said in one line
            lost_server = (isinstance(error, ConnectionAbortedError)
                           and "Initialization failure from server" in str(error))
            if lost_server and attempt < attempts:
                # Ray Client's proxy forks a server per client; under load that fork dies
                # at times (ray-project/ray#63202): a new client gets a new server.
                print(f"opsight remote: the Ray Client server at {address} failed to start "
                      f"this client's session (ray-project/ray#63202); retrying "
                      f"({attempt}/{attempts - 1})", file=sys.stderr, flush=True)
                _shutdown_quietly(ray)
                continue
            message = f"cannot join the Ray cluster at {address}: {error_text(error)}"
            if lost_server:
                message += (f" (the head's Ray Client server failed to start a session "
                            f"{attempts} times: see its ray_client_server_*.err logs and "
                            "ray-project/ray#63202; HOST:PORT, the GCS address, avoids Ray "
                            "Client from a machine on the cluster's network)")
            raise RemoteError(message) from None
    _connected["address"] = address
    return address


def _shutdown_quietly(ray: Any) -> None:
    try:
        ray.shutdown()
    except Exception:  # noqa: BLE001 - a half-open client session; nothing to keep
        pass


def nodes_by_label(labels: list[str]) -> dict[str, list[str]]:
    """The alive nodes (ids) carrying each label; :class:`RemoteError` for a label no alive
    node carries, with the labels the cluster has."""
    ray = import_ray()
    found: dict[str, list[str]] = {label: [] for label in labels}
    custom: set[str] = set()
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources") or {}
        for name in resources:
            if not name.startswith("node:") and name not in ("CPU", "GPU", "memory",
                                                              "object_store_memory"):
                custom.add(name)
        for label in labels:
            if resources.get(label, 0) > 0:
                found[label].append(node["NodeID"])
    missing = [label for label, nodes in found.items() if not nodes]
    if missing:
        have = ", ".join(sorted(custom)) or "none"
        raise RemoteError(
            f"no alive node of the Ray cluster carries the hardware label "
            f"{missing[0]!r} (labels found: {have}); tag its nodes with "
            f"ray start --resources '{{\"{missing[0]}\": 1}}' (docs/remote.md)")
    return found


def node_resources() -> dict[str, dict[str, float]]:
    """Per alive node (id), the resource a measurement takes so that it has the node to
    itself: the whole of the node's own ``node:IP`` resource (quantity 1, which Ray gives
    every node), so that two measurements on one node never overlap even when the node
    carries two hardware labels and two callers each hold a unit of a different one. A node
    without one gets nothing more than its label's unit."""
    ray = import_ray()
    found: dict[str, dict[str, float]] = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        own = [name for name, quantity in (node.get("Resources") or {}).items()
               if name.startswith("node:") and name != "node:__internal_head__"
               and quantity == 1]
        if len(own) == 1:
            found[node["NodeID"]] = {own[0]: 1}
    return found


@dataclass
class Job:
    """One measurement: ``method`` of :class:`.worker.Worker` called with ``arguments``
    (object refs or plain values) on a node labelled ``spec.hardware``."""
    spec: BackendSpec
    method: str
    arguments: tuple


@dataclass
class Outcome:
    """What became of a job. Times are the caller's ``perf_counter_ns``."""
    spec: BackendSpec
    value: Any = None
    error: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    node_id: str | None = None
    clock_offset_ns: int | None = None       # worker clock - caller clock
    clock_uncertainty_ns: int | None = None  # half the shortest round trip
    submitted_ns: int = 0
    started_ns: int | None = None    # the worker was asked for (the node was free)
    measuring_ns: int | None = None  # the worker was up and started measuring
    ended_ns: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _clock_offset(ray: Any, actor: Any) -> tuple[int, int]:
    best: tuple[int, int] | None = None
    for _ in range(CLOCK_READINGS):
        before = time.perf_counter_ns()
        remote = ray.get(actor.clock.remote(), timeout=30)
        after = time.perf_counter_ns()
        round_trip = after - before
        if best is None or round_trip < best[1] * 2:
            best = (remote - (before + after) // 2, round_trip // 2)
    assert best is not None
    return best


class Progress:
    """Status lines on stderr: a bar of jobs done, and what changed."""

    def __init__(self, total: int, file=None):
        self.total, self.file = total, file or sys.stderr

    def __call__(self, event: str, outcome: Outcome, counts: dict[str, int]) -> None:
        done = counts["done"]
        width = 20
        filled = width * done // max(1, self.total)
        bar = "#" * filled + "-" * (width - filled)
        where = ""
        if outcome.facts:
            where = (f" on {outcome.facts.get('host')} (node {str(outcome.node_id)[:8]}, "
                     f"pid {outcome.facts.get('pid')})")
        what = {"queued": "queued for a free node", "starting": "starting a worker",
                "measuring": "measuring" + where,
                "done": ("failed: " + str(outcome.error)) if outcome.error else "done"}[event]
        print(f"opsight remote [{bar}] {done}/{self.total} done, {counts['running']} running, "
              f"{counts['queued']} queued: {outcome.spec}: {what}", file=self.file, flush=True)


def run_jobs(jobs: list[Job], *, timeout_s: float = 600.0, start_timeout_s: float = 300.0,
             progress: Callable[[str, Outcome, dict[str, int]], None] | None = None
             ) -> list[Outcome]:
    """Runs every job (see the module's documentation); returns an outcome per job, in order.
    ``timeout_s`` bounds a measurement, ``start_timeout_s`` the wait for its worker to come
    up (which includes waiting for the node's label to be free). ``progress(event, outcome,
    counts)`` is told of each change (events ``queued``, ``starting``, ``measuring``,
    ``done``)."""
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .worker import Worker

    actor_class = ray.remote(Worker)
    placement = nodes_by_label(sorted({job.spec.hardware for job in jobs}))
    whole_node = node_resources()
    outcomes = [Outcome(job.spec) for job in jobs]
    load: collections.Counter = collections.Counter()
    queues: dict[str, collections.deque] = collections.defaultdict(collections.deque)
    for index, job in enumerate(jobs):
        candidates = placement[job.spec.hardware]
        node = min(candidates, key=lambda candidate: (load[candidate], candidates.index(candidate)))
        load[node] += 1
        queues[node].append(index)
        outcomes[index].node_id = node
    now = time.perf_counter_ns()
    for outcome in outcomes:
        outcome.submitted_ns = now
    running: dict[str, dict[str, Any]] = {}
    done = 0

    def counts() -> dict[str, int]:
        return {"done": done, "running": len(running),
                "queued": sum(len(queue) for queue in queues.values())}

    def tell(event: str, index: int) -> None:
        if progress is not None:
            try:
                progress(event, outcomes[index], counts())
            except Exception as error:  # noqa: BLE001 - a progress hook never stops the run
                print(f"opsight remote: progress hook raised {error_text(error)}",
                      file=sys.stderr)

    def finish(node: str, error: str | None = None, value: Any = None) -> None:
        nonlocal done
        state = running.pop(node)
        outcome = outcomes[state["index"]]
        outcome.ended_ns = time.perf_counter_ns()
        outcome.error, outcome.value = error, value
        try:
            ray.kill(state["actor"], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        done += 1
        tell("done", state["index"])

    for index in range(len(jobs)):
        tell("queued", index)
    while done < len(jobs):
        for node, queue in queues.items():
            if node in running or not queue:
                continue
            index = queue.popleft()
            job = jobs[index]
            actor = actor_class.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                num_cpus=0, resources={job.spec.hardware: 1, **whole_node.get(node, {})},
                max_restarts=0,
                max_task_retries=0, name=None).remote()
            outcomes[index].started_ns = time.perf_counter_ns()
            running[node] = {"index": index, "actor": actor, "stage": "starting",
                             "ref": actor.facts.remote(),
                             "deadline": time.monotonic() + start_timeout_s}
            tell("starting", index)
        refs = [state["ref"] for state in running.values()]
        ready, _ = ray.wait(refs, num_returns=1, timeout=0.2) if refs else ([], [])
        # By id: through Ray Client, ray.wait answers with new reference objects.
        ready_ids = {ref.binary() for ref in ready}
        for node, state in list(running.items()):
            index, outcome = state["index"], outcomes[state["index"]]
            if state["ref"].binary() not in ready_ids:
                if time.monotonic() > state["deadline"]:
                    limit = start_timeout_s if state["stage"] == "starting" else timeout_s
                    what = ("its worker did not start" if state["stage"] == "starting"
                            else "the measurement did not finish")
                    finish(node, f"timed out: {what} within {limit:g} s (the worker was killed)")
                continue
            try:
                value = ray.get(state["ref"])
            except Exception as error:  # noqa: BLE001 - the worker died or raised
                finish(node, _failure_text(ray, error, state["stage"]))
                continue
            if state["stage"] == "starting":
                outcome.facts = value
                outcome.node_id = value.get("node_id") or node
                try:
                    outcome.clock_offset_ns, outcome.clock_uncertainty_ns = \
                        _clock_offset(ray, state["actor"])
                except Exception as error:  # noqa: BLE001
                    finish(node, _failure_text(ray, error, "clock"))
                    continue
                job = jobs[index]
                outcome.measuring_ns = time.perf_counter_ns()
                state.update(stage="measuring", deadline=time.monotonic() + timeout_s,
                             ref=getattr(state["actor"], job.method).remote(*job.arguments))
                tell("measuring", index)
            else:
                finish(node, None, value)
    return outcomes


def _failure_text(ray: Any, error: BaseException, stage: str) -> str:
    from ray import exceptions

    if isinstance(error, exceptions.RayTaskError):
        cause = getattr(error, "cause", None)
        if cause is not None and not isinstance(cause, exceptions.RayError):
            return error_text(cause)
    if isinstance(error, exceptions.RayActorError):
        return ("the worker process died" + (" while measuring" if stage == "measuring" else
                                             " before measuring")
                + f" ({_first(str(error))})")
    return error_text(error)


def _first(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return "no reason given"
