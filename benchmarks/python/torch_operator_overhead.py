"""What recording torch operators adds per operator: opsight beside torch.profiler.

A model of many tiny operators (a stack of 16x16 linear layers and activations, batch 1,
one thread) makes the per-operator cost visible. Each variant runs in alternating rounds in
the same process; the figure is the median over rounds of (time per forward with the
tracer - time per forward without) / operators per forward:

  untraced             the model alone (the baseline of every ratio)
  observer, no session opsight's RecordFunction callback installed, no session recording:
                       what torch's own observer machinery costs (the floor)
  opsight operators    opsight.profile() with torch operators (modules off)
  opsight ops+modules  the default: operators and module calls
  opsight +shapes      operators with input shapes
  torch.profiler       torch.profiler.profile(activities=[CPU]) (record_shapes off),
                       its own post-processing at exit included, as a user pays it

Run: .venv/bin/python benchmarks/python/torch_operator_overhead.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import opsight
import opsight.torch


def build_model(layers: int) -> torch.nn.Module:
    blocks: list[torch.nn.Module] = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks).eval()


def time_forwards(model: torch.nn.Module, inputs: torch.Tensor, iterations: int) -> float:
    start = time.perf_counter_ns()
    with torch.no_grad():
        for _ in range(iterations):
            model(inputs)
    return (time.perf_counter_ns() - start) / iterations


def with_opsight(model, inputs, iterations, **what) -> float:
    with opsight.torch.tracing(**what), opsight.profile(buffer_mb=512) as profile:
        elapsed = time_forwards(model, inputs, iterations)
    # The figure only counts if every operator was recorded.
    categories = profile.trace.slice_columns()["category"]
    recorded = sum(1 for category in categories if category == "operator")
    if recorded < iterations * 300:
        raise SystemExit(f"only {recorded} operators recorded for {iterations} forwards "
                         f"({what}): the benchmark measured nothing")
    return elapsed


def with_idle_observer(model, inputs, iterations) -> float:
    """torch's RecordFunction machinery with opsight's callback installed but no session
    recording: the callback returns after one check. The floor any observer pays."""
    from opsight import _torch_observer

    _torch_observer.install(record_shapes=False)
    try:
        return time_forwards(model, inputs, iterations)
    finally:
        _torch_observer.uninstall()


def with_torch_profiler(model, inputs, iterations) -> float:
    start = time.perf_counter_ns()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        time_forwards(model, inputs, iterations)
    return (time.perf_counter_ns() - start) / iterations


def operators_per_forward(model, inputs) -> float:
    with opsight.torch.tracing(operators=True, modules=False), opsight.profile() as profile:
        time_forwards(model, inputs, 10)
    categories = profile.trace.slice_columns()["category"]
    return sum(1 for category in categories if category == "operator") / 10


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
    variants = {
        "untraced": lambda: time_forwards(model, inputs, arguments.iterations),
        "observer, no session": lambda: with_idle_observer(model, inputs, arguments.iterations),
        "opsight operators": lambda: with_opsight(model, inputs, arguments.iterations,
                                                  operators=True, modules=False),
        "opsight ops+modules": lambda: with_opsight(model, inputs, arguments.iterations),
        "opsight +shapes": lambda: with_opsight(model, inputs, arguments.iterations,
                                                operators=True, modules=False, shapes=True),
        "torch.profiler": lambda: with_torch_profiler(model, inputs, arguments.iterations),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(arguments.rounds):
        for name, run in variants.items():
            samples[name].append(run())
    baseline = statistics.median(samples["untraced"])
    print(f"torch {torch.__version__}, 1 thread, {arguments.layers} linear+relu layers, batch 1: "
          f"{operators:.0f} operators per forward, {arguments.iterations} forwards x "
          f"{arguments.rounds} rounds (medians)")
    print(f"{'variant':<22}{'per forward':>14}{'x untraced':>12}{'added per operator':>21}")
    for name, values in samples.items():
        median = statistics.median(values)
        added = (median - baseline) / operators
        print(f"{name:<22}{median / 1000:>11.1f} µs{median / baseline:>11.2f}x{added:>18.0f} ns")


if __name__ == "__main__":
    main()
