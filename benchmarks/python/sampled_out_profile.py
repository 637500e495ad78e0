"""What a forward runs under each kind of opsight session, thread by thread (made for the
sampled-out case): the demo's BERT-style encoder (the model of model_overhead.py) in
back-to-back sessions of one kind, for a fixed time or a fixed number of sessions, then
every thread's CPU time per forward (from /proc/self/task/*/schedstat), so that two runs
(say ``untraced`` and ``sampled``) show which thread pays what. Made to run under a
profiler:

    .venv/bin/python benchmarks/python/sampled_out_profile.py --kind sampled --threads 2
    perf record -e cpu-clock -F 4999 -g -o /tmp/sampled.data -- \\
        .venv/bin/python benchmarks/python/sampled_out_profile.py --kind sampled --threads 2
    perf report -i /tmp/sampled.data --no-children --sort comm,dso,sym | head -60
    # instructions: one session of 10 forwards, against the same with --kind untraced
    valgrind --tool=callgrind --separate-threads=yes .venv/bin/python \\
        benchmarks/python/sampled_out_profile.py --kind sampled --threads 1 --sessions 1 \\
        --forwards 10 --warmup 1

Kinds (each session: --settle untimed forwards, then --forwards forwards, then the stop):

  untraced         the forwards alone, no session (the baseline)
  floor            opsight's operator observer installed, no session (torch's
                   RecordFunction floor: model_overhead.py's "torch's floor")
  empty            opsight.profile() with OPSIGHT_TORCH=off: a session that records nothing
  switched         the default session with opsight.disable() inside it
  operators        operators recorded (OPSIGHT_TORCH=operators)
  modules          module spans recorded (OPSIGHT_TORCH=modules)
  default          operators and module spans recorded (the default)
  sampled          the default with sample="1/1000": the first forward of each session is
                   recorded, every other one is sampled out
  sampled-modules  the same with module spans only (OPSIGHT_TORCH=modules: no
                   RecordFunction observer installed)

Sessions are in memory (no file): this is about the forwards, not the stop. Prints the
forwards run, the wall time per forward, and each thread's CPU time per forward (the
calling thread, torch's intra-op workers, opsight's writer), largest first.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

import opsight
from opsight.demo.model import build

_TORCH_MODE = {"empty": "off", "switched": "on", "operators": "operators", "modules": "modules",
               "default": "on", "sampled": "on", "sampled-modules": "modules"}
KINDS = ("untraced", "floor", *_TORCH_MODE)


def thread_cpu_ns() -> dict[int, tuple[str, int]]:
    """{tid: (name, CPU ns so far)} of every thread of this process."""
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as file:
                name = file.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as file:
                cpu_ns = int(file.read().split()[0])
        except OSError:  # the thread exited meanwhile
            continue
        threads[int(tid)] = (name, cpu_ns)
    return threads


def session(kind: str, model, inputs, settle: int, count: int) -> None:
    with torch.inference_mode():
        if kind in ("untraced", "floor"):
            if kind == "floor":
                import opsight._torch_observer as observer

                observer.install()
            try:
                for _ in range(settle + count):
                    model(*inputs)
            finally:
                if kind == "floor":
                    observer.uninstall()
            return
        os.environ["OPSIGHT_TORCH"] = _TORCH_MODE[kind]
        sample = "1/1000" if kind in ("sampled", "sampled-modules") else None
        with opsight.profile(buffer_mb=64, sample=sample):
            if kind == "switched":
                opsight.disable()
            for _ in range(settle + count):
                model(*inputs)
            if kind == "switched":
                opsight.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=KINDS, default="sampled")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (0: default)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sessions", type=int, default=0,
                        help="run exactly this many sessions (instead of --seconds)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed sessions first")
    parser.add_argument("--forwards", type=int, default=20, help="forwards per session")
    parser.add_argument("--settle", type=int, default=3)
    arguments = parser.parse_args()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    model, inputs = build()
    for _ in range(arguments.warmup):  # and every thread started (a session, torch's workers)
        session(arguments.kind, model, inputs, arguments.settle, arguments.forwards)
    main_tid = threading_native_id()
    before = thread_cpu_ns()
    started = time.perf_counter()
    forwards = 0
    sessions = 0
    while (sessions < arguments.sessions if arguments.sessions
           else time.perf_counter() - started < arguments.seconds):
        sessions += 1
        session(arguments.kind, model, inputs, arguments.settle, arguments.forwards)
        forwards += arguments.settle + arguments.forwards
    wall = time.perf_counter() - started
    after = thread_cpu_ns()
    print(f"{arguments.kind}: {forwards} forwards at {torch.get_num_threads()} torch thread(s), "
          f"{wall / forwards * 1e3:.3f} ms wall per forward, load average "
          f"{os.getloadavg()[0]:.1f}")
    rows = []
    for tid, (name, cpu_ns) in after.items():
        spent = cpu_ns - before.get(tid, (name, 0))[1]
        role = "calling thread" if tid == main_tid else name
        rows.append((spent, tid, role))
    total = sum(spent for spent, _, _ in rows)
    print(f"  process: {total / forwards / 1e3:9.1f} µs CPU per forward")
    for spent, tid, role in sorted(rows, reverse=True):
        if spent > 0:
            print(f"  {role:<20} tid {tid:<8} {spent / forwards / 1e3:9.1f} µs CPU per forward")


def threading_native_id() -> int:
    import threading

    return threading.get_native_id()


if __name__ == "__main__":
    main()
