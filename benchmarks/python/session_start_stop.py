"""What a session's start and stop cost the thread that calls them: ``opsight.profile()``
entered and left around nothing (torch tracing off), in memory and to a ``.opsight`` file,
with the median and 90th percentile of each. A program that profiles short stretches (a
request, a test, one batch) pays these on its own thread every time.

Baseline, measured in the same run: a Python thread started and joined, the least a stop
that waited for its writer thread to exit would pay. (Until 2026-11-27 the stop joined the
writer: on this VM an idle vCPU took 1 to 7 ms to run the woken writer again, and every stop
paid that.) Rounds alternate the variants so that a slow stretch hits them alike.

Run: .venv/bin/python benchmarks/python/session_start_stop.py [--sessions 200]
"""

from __future__ import annotations

import argparse
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


def session(path: str | None) -> tuple[int, int]:
    began = time.perf_counter_ns()
    profile = opsight.profile(path)
    profile.__enter__()
    started = time.perf_counter_ns()
    profile.__exit__(None, None, None)
    return started - began, time.perf_counter_ns() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200, help="sessions per variant")
    arguments = parser.parse_args()
    os.environ["OPSIGHT_TORCH"] = "off"
    with tempfile.TemporaryDirectory(prefix="opsight-start-stop-") as directory:
        path = os.path.join(directory, "run.opsight")
        variants = {
            "thread start + join (baseline)": thread_round_trip,
            "opsight.profile(), in memory": lambda: session(None),
            "opsight.profile(path), a file": lambda: session(path),
        }
        for run in variants.values():  # warm-up: imports, the first session's calibration
            run()
        times: dict[str, list[tuple[int, int]]] = {name: [] for name in variants}
        for round_index in range(arguments.sessions):
            names = list(variants) if round_index % 2 == 0 else list(reversed(variants))
            for name in names:
                times[name].append(variants[name]())
    print(f"opsight {opsight.__version__}, Python {platform.python_version()}, "
          f"{arguments.sessions} sessions per variant, load average {os.getloadavg()[0]:.1f}")
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
