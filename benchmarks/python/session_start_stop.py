"""What a session's start and stop cost the thread that calls them: ``opsight.profile()``
entered and left around nothing (torch tracing off), in memory and to a ``.opsight`` file,
with the median and 90th percentile of each; and in memory with ``cuda=False``, which
shows what the default's wait for torch to initialise CUDA costs (docs/gpu.md). A program that profiles short stretches (a
request, a test, one batch) pays these on its own thread every time.

Baseline, measured in the same run: a Python thread started and joined, the least a stop
that waited for its writer thread to exit would pay. Each variant runs its sessions in one
block (alternating them would keep the other core awake between sessions, which a program
between two requests does not do).

--busy N keeps N processes spinning meanwhile, as on a loaded server: there a thread that
has to be woken waits for a core, several milliseconds under Linux's scheduler. Until
2026-11-27 the stop joined the session's writer thread and so paid that wait every time;
now the stopping thread does the last drain itself and leaves the writer's thread to exit
on its own.

Run: .venv/bin/python benchmarks/python/session_start_stop.py [--sessions 200] [--busy 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import tempfile
import threading
import time

import opsight


def thread_round_trip() -> tuple[int, int]:
    began = time.perf_counter_ns()
    thread = threading.Thread(target=lambda: None)
    thread.start()
    started = time.perf_counter_ns()
    thread.join()
    return started - began, time.perf_counter_ns() - started


def session(path: str | None, cuda: bool | None = None) -> tuple[int, int]:
    began = time.perf_counter_ns()
    profile = opsight.profile(path, cuda=cuda)
    profile.__enter__()
    started = time.perf_counter_ns()
    profile.__exit__(None, None, None)
    return started - began, time.perf_counter_ns() - started


def spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200, help="sessions per variant")
    parser.add_argument("--busy", type=int, default=0,
                        help="processes kept spinning meanwhile (a loaded machine)")
    arguments = parser.parse_args()
    os.environ["OPSIGHT_TORCH"] = "off"
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(arguments.busy)]
    for spinner in spinners:
        spinner.start()
    try:
        times = measure(arguments.sessions)
    finally:
        for spinner in spinners:
            spinner.terminate()
    print(f"opsight {opsight.__version__}, Python {platform.python_version()}, "
          f"{arguments.sessions} sessions per variant, {arguments.busy} busy process(es), "
          f"load average {os.getloadavg()[0]:.1f}")
    report(times)


def measure(sessions: int) -> dict[str, list[tuple[int, int]]]:
    with tempfile.TemporaryDirectory(prefix="opsight-start-stop-") as directory:
        path = os.path.join(directory, "run.opsight")
        variants = {
            "thread start + join (baseline)": thread_round_trip,
            "opsight.profile(), in memory": lambda: session(None),
            # What deciding about the GPU costs (cuda=None waits for torch to start CUDA).
            "profile(cuda=False), in memory": lambda: session(None, cuda=False),
            "opsight.profile(path), a file": lambda: session(path),
        }
        for run in variants.values():  # warm-up: imports, the first session's calibration
            run()
        times: dict[str, list[tuple[int, int]]] = {name: [] for name in variants}
        for name, run in variants.items():  # in blocks: see the module's documentation
            for _ in range(sessions):
                times[name].append(run())
    return times


def report(times: dict[str, list[tuple[int, int]]]) -> None:
    baseline_total = statistics.median(a + b for a, b in times["thread start + join (baseline)"])
    print(f"{'variant':<34}{'start p50':>11}{'p90':>9}{'stop p50':>11}{'p90':>9}"
          f"{'start+stop / baseline':>24}")
    for name, pairs in times.items():
        starts = sorted(a for a, _ in pairs)
        stops = sorted(b for _, b in pairs)
        total = statistics.median(a + b for a, b in pairs)

        def p90(values: list[int]) -> float:
            return values[int(len(values) * 0.9)] / 1e3

        print(f"{name:<34}{statistics.median(starts) / 1e3:>8.1f} µs{p90(starts):>6.0f} µs"
              f"{statistics.median(stops) / 1e3:>8.1f} µs{p90(stops):>6.0f} µs"
              f"{total / baseline_total:>23.2f}x")


if __name__ == "__main__":
    main()
