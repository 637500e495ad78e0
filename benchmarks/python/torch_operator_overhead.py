"""What recording torch operators adds per operator: opsight beside torch.profiler.

A model of many tiny operators (a stack of 16x16 linear layers and activations, batch 1,
one thread) makes the per-operator cost visible. Each variant runs in alternating rounds in
the same process; the figure is the median over rounds of (time per forward with the
tracer - time per forward without) / operators per forward, timed two ways for every
variant alike:

  hot path       the forwards alone, inside the session
  whole session  start to stop as a user pays it: the session's start, the forwards, its
                 stop and post-processing, and its trace written to a file (opsight: the
                 .opsight file; torch.profiler: its exit processing and export_chrome_trace)

  untraced             the model alone (the baseline of every ratio)
  observer, no session opsight's RecordFunction callback installed, no session recording:
                       what torch's own observer machinery costs (the floor)
  opsight operators    opsight.profile() with torch operators (modules off)
  opsight ops+modules  the default: operators and module calls
  opsight +shapes      operators with input shapes
  torch.profiler       torch.profiler.profile(activities=[CPU]) (record_shapes off)

Every opsight variant must record exactly forwards x operators per forward and drop
nothing, or the run stops.

Run: .venv/bin/python benchmarks/python/torch_operator_overhead.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
from interleaved import run_rounds

import opsight
import opsight.torch


def build_model(layers: int) -> torch.nn.Module:
    blocks: list[torch.nn.Module] = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks).eval()


def time_forwards(model: torch.nn.Module, inputs: torch.Tensor, iterations: int) -> int:
    """The forwards' time (ns)."""
    start = time.perf_counter_ns()
    with torch.no_grad():
        for _ in range(iterations):
            model(inputs)
    return time.perf_counter_ns() - start


def untraced(model, inputs, iterations) -> tuple[int, int]:
    elapsed = time_forwards(model, inputs, iterations)
    return elapsed, elapsed


def with_opsight(model, inputs, iterations, operators_per_forward: int, directory: str,
                 **what) -> tuple[int, int]:
    path = os.path.join(directory, "run.opsight")
    whole_start = time.perf_counter_ns()
    with opsight.torch.tracing(**what), opsight.profile(path, buffer_mb=512) as profile:
        hot = time_forwards(model, inputs, iterations)
    whole = time.perf_counter_ns() - whole_start
    # The figure only counts if every operator was recorded, and nothing was dropped.
    info = profile.trace.run_info()
    categories = profile.trace.slice_columns()["category"]
    recorded = sum(1 for category in categories if category == "operator")
    expected = iterations * operators_per_forward if what.get("operators", True) else 0
    if recorded != expected or info["events_dropped"]:
        raise SystemExit(f"{recorded} operators recorded for {iterations} forwards, expected "
                         f"{expected}, {info['events_dropped']} events dropped ({what}): the "
                         "benchmark measured nothing")
    return hot, whole


def with_idle_observer(model, inputs, iterations) -> tuple[int, int]:
    """torch's RecordFunction machinery with opsight's callback installed but no session
    recording: the callback returns after one check. The floor any observer pays."""
    from opsight import _torch_observer

    whole_start = time.perf_counter_ns()
    _torch_observer.install(record_shapes=False)
    try:
        hot = time_forwards(model, inputs, iterations)
    finally:
        _torch_observer.uninstall()
    return hot, time.perf_counter_ns() - whole_start


def with_torch_profiler(model, inputs, iterations, directory: str) -> tuple[int, int]:
    whole_start = time.perf_counter_ns()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        hot = time_forwards(model, inputs, iterations)
    profiler.export_chrome_trace(os.path.join(directory, "torch-profiler.json"))
    return hot, time.perf_counter_ns() - whole_start


def operators_per_forward(model, inputs) -> int:
    with opsight.torch.tracing(operators=True, modules=False), opsight.profile() as profile:
        time_forwards(model, inputs, 10)
    categories = profile.trace.slice_columns()["category"]
    count = sum(1 for category in categories if category == "operator")
    if count % 10:
        raise SystemExit(f"{count} operators in 10 forwards: not the same operators each time")
    return count // 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--layers", type=int, default=32)
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    model = build_model(arguments.layers)
    inputs = torch.randn(1, 16)
    time_forwards(model, inputs, 50)  # warm-up
    operators = operators_per_forward(model, inputs)
    with tempfile.TemporaryDirectory(prefix="opsight-operator-overhead-") as directory:
        iterations = arguments.iterations
        variants = {
            "untraced": lambda: untraced(model, inputs, iterations),
            "observer, no session": lambda: with_idle_observer(model, inputs, iterations),
            "opsight operators": lambda: with_opsight(model, inputs, iterations, operators,
                                                      directory, operators=True, modules=False),
            "opsight ops+modules": lambda: with_opsight(model, inputs, iterations, operators,
                                                        directory),
            "opsight +shapes": lambda: with_opsight(model, inputs, iterations, operators,
                                                    directory, operators=True, modules=False,
                                                    shapes=True),
            "torch.profiler": lambda: with_torch_profiler(model, inputs, iterations, directory),
        }
        medians = run_rounds(variants, arguments.rounds)
    print(f"torch {torch.__version__}, 1 thread, {arguments.layers} linear+relu layers, batch 1: "
          f"{operators} operators per forward, {iterations} forwards x {arguments.rounds} "
          f"rounds (medians), load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<22}{'hot path / forward':>20}{'x':>7}{'per operator':>14}"
          f"{'whole session / forward':>26}{'x':>7}{'per operator':>14}")
    base_hot = medians["untraced"][0] / iterations
    base_whole = medians["untraced"][1] / iterations
    for name in variants:
        h = medians[name][0] / iterations
        w = medians[name][1] / iterations
        print(f"{name:<22}{h / 1000:>17.1f} µs{h / base_hot:>7.2f}{(h - base_hot) / operators:>11.0f} ns"
              f"{w / 1000:>23.1f} µs{w / base_whole:>7.2f}{(w - base_whole) / operators:>11.0f} ns")


if __name__ == "__main__":
    main()
