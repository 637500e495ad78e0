"""A flat-out loop of traced no-op calls, to run under a profiler: what docs/performance.md's
"What opsight's +70 ns is made of" profiled (ten million traced calls) and the quick
``asyncio.run`` loop of awaits of a traced ``async def``. Prints the time per call on the
calling thread and every thread's CPU time (so the background writer's share shows)::

    .venv/bin/python benchmarks/python/traced_call_profile.py --mode traced --calls 10000000
    perf record -e cpu-clock -F 4999 -g -o /tmp/traced.data -- \\
        .venv/bin/python benchmarks/python/traced_call_profile.py --mode traced
    perf report -i /tmp/traced.data --no-children --sort comm,dso,sym | head -60

Modes:

  plain           the no-op function, untraced (the baseline)
  traced          ``@opsight.trace`` inside ``opsight.profile()`` (in memory)
  no-session      ``@opsight.trace`` with no session running
  disabled        ``@opsight.trace`` inside a session, after ``opsight.disable()``
  async-plain     ``asyncio.run`` of a loop awaiting a no-op ``async def``
  async-traced    the same ``async def`` under ``@opsight.trace``, in a session
  async-disabled  the same after ``opsight.disable()``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import threading
import time

import opsight

MODES = ("plain", "traced", "no-session", "disabled", "async-plain", "async-traced",
         "async-disabled")


def noop() -> None:
    pass


async def anoop() -> None:
    pass


def thread_cpu_ns() -> dict[int, tuple[str, int]]:
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as file:
                name = file.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as file:
                threads[int(tid)] = (name, int(file.read().split()[0]))
        except OSError:
            continue
    return threads


def run(mode: str, calls: int) -> tuple[float, float, dict[int, tuple[str, int]]]:
    """(wall s, calling thread CPU s, every thread's CPU ns at the end) of ``calls`` calls."""
    is_async = mode.startswith("async")
    function = anoop if is_async else noop
    if mode not in ("plain", "async-plain"):
        function = opsight.trace(function)
    session = None
    if mode in ("traced", "disabled", "async-traced", "async-disabled"):
        session = opsight.profile(buffer_mb=max(64, calls * 32 // (1 << 20) + 64)).__enter__()
        if mode.endswith("disabled"):
            opsight.disable()

    async def awaits() -> None:
        for _ in range(calls):
            await function()

    gc.disable()
    wall, cpu = time.perf_counter(), time.thread_time()
    if is_async:
        asyncio.run(awaits())
    else:
        for _ in range(calls):
            function()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    gc.enable()
    threads = thread_cpu_ns()  # before the stop: the writer's share of the calls
    if session is not None:
        if mode.endswith("disabled"):
            opsight.enable()
        session.__exit__(None, None, None)
    return wall, cpu, threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=MODES, default="traced")
    parser.add_argument("--calls", type=int, default=10_000_000)
    arguments = parser.parse_args()
    before = thread_cpu_ns()
    wall, cpu, after = run(arguments.mode, arguments.calls)
    calls = arguments.calls
    print(f"{arguments.mode}: {calls} calls, {wall / calls * 1e9:.1f} ns wall and "
          f"{cpu / calls * 1e9:.1f} ns calling-thread CPU per call; load average "
          f"{os.getloadavg()[0]:.1f}")
    main_tid = threading.get_native_id()
    for tid, (name, cpu_ns) in sorted(after.items()):
        spent = cpu_ns - before.get(tid, (name, 0))[1]
        role = "calling thread" if tid == main_tid else name
        print(f"  {role:<20} tid {tid:<8} {spent / 1e6:9.1f} ms CPU "
              f"({spent / 1e9 / wall * 100:5.1f}% of a core)")


if __name__ == "__main__":
    main()
