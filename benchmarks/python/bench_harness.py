"""What ``opsight bench`` itself costs per query, and whether its latencies agree with
``torch.utils.benchmark.Timer``.

Run it with the installed package::

    .venv/bin/python benchmarks/python/bench_harness.py            # both parts
    .venv/bin/python benchmarks/python/bench_harness.py --json out.json

1. Harness overhead. A no-op callable runs ``--queries`` times in the single-stream loop
   of ``opsight.bench`` (``scenarios.run_back_to_back`` on a back-end prepared by
   ``backends.prepare``, exactly what ``opsight bench``/``opsight.bench.run`` run), and as
   many times in a bare ``for`` loop that takes ``time.perf_counter_ns()`` around each call
   and appends the difference to a list. The two alternate, in a fresh random order each
   round, for ``--rounds`` rounds; each is timed from outside (wall time of the whole loop
   / queries). The overhead per query is the median over the rounds of (harness − bare loop)
   measured in the same round; also shown: the mean latency each loop measured for the
   call itself (what ends up in the report).
2. Agreement with ``torch.utils.benchmark.Timer``. A small MLP (and a small conv net) with
   one thread, batch 1, under ``torch.inference_mode()``: ``Timer(...).blocked_autorange``
   (its mean per call, and its median of block means) against ``opsight.bench.run(...,
   threads=1)`` (its mean and p50), alternating in a fresh random order for
   ``--agreement-rounds`` rounds; the table gives the median over the rounds of the ratio
   opsight/Timer measured in the same round (mean against mean, p50 against median).

This is a benchmark, not a test: nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time


def noop() -> None:
    pass


def bare_loop(function, queries: int) -> tuple[int, float]:
    clock = time.perf_counter_ns
    latencies = []
    append = latencies.append
    begin = clock()
    for _ in range(queries):
        start = clock()
        function()
        end = clock()
        append(end - start)
    wall = clock() - begin
    return wall, statistics.fmean(latencies)


def harness_loop(prepared, queries: int) -> tuple[int, float]:
    from opsight.bench.scenarios import run_back_to_back
    from opsight.bench.statistics import query_latencies

    clock = time.perf_counter_ns
    begin = clock()
    timings = run_back_to_back(prepared, queries, None, False, "")
    wall = clock() - begin
    return wall, statistics.fmean(query_latencies(timings))


def harness_overhead(queries: int, rounds: int) -> dict:
    from opsight.bench import backends, models

    loaded = models.from_object(noop, inputs=(), source="noop", default_name="noop")
    prepared = backends.prepare(loaded, "eager")
    assert prepared.direct_call is not None
    harness_loop(prepared, queries // 10)  # warm both paths up
    bare_loop(noop, queries // 10)
    rows = []
    for _ in range(rounds):
        order = ["bare", "harness"]
        random.shuffle(order)
        measured = {}
        for which in order:
            if which == "bare":
                measured[which] = bare_loop(noop, queries)
            else:
                measured[which] = harness_loop(prepared, queries)
        rows.append(measured)
    bare_wall = [row["bare"][0] / queries for row in rows]
    harness_wall = [row["harness"][0] / queries for row in rows]
    difference = [h - b for h, b in zip(harness_wall, bare_wall)]
    return {
        "queries": queries, "rounds": rounds,
        "bare_loop_ns_per_query": statistics.median(bare_wall),
        "harness_ns_per_query": statistics.median(harness_wall),
        "overhead_ns_per_query": statistics.median(difference),
        "overhead_ns_per_query_min": min(difference),
        "overhead_ns_per_query_max": max(difference),
        "ratio": statistics.median(h / b for h, b in zip(harness_wall, bare_wall)),
        "bare_measured_latency_ns": statistics.median(row["bare"][1] for row in rows),
        "harness_measured_latency_ns": statistics.median(row["harness"][1] for row in rows),
    }


def models_for_agreement():
    import torch

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 10)).eval()
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(16, 10)).eval()
    return [("mlp 256-512-512-10", mlp, torch.randn(1, 256)),
            ("conv 3x32x32", conv, torch.randn(1, 3, 32, 32))]


def timer_agreement(rounds: int, seconds: float) -> list[dict]:
    import torch
    import torch.utils.benchmark as benchmark

    import opsight.bench

    results = []
    for label, model, example in models_for_agreement():
        timer_medians, timer_means, bench_means, bench_medians = [], [], [], []
        for _ in range(rounds):
            order = ["timer", "bench"]
            random.shuffle(order)
            for which in order:
                if which == "timer":
                    torch.set_num_threads(1)
                    timer = benchmark.Timer(stmt="model(x)", globals={"model": model, "x": example},
                                            num_threads=1)
                    with torch.inference_mode():
                        measurement = timer.blocked_autorange(min_run_time=seconds)
                    timer_medians.append(measurement.median * 1e9)
                    timer_means.append(measurement.mean * 1e9)
                else:
                    result = opsight.bench.run(model, (example,), backend="eager", threads=1,
                                               warmup=100, duration=seconds,
                                               profile_iterations=0)
                    bench_means.append(result.latency["mean_ns"])
                    bench_medians.append(result.latency["p50_ns"])
        timer_median = statistics.median(timer_medians)
        results.append({
            "model": label, "rounds": rounds, "seconds_each": seconds,
            "timer_median_ns": timer_median,
            "timer_mean_ns": statistics.median(timer_means),
            "bench_mean_ns": statistics.median(bench_means),
            "bench_p50_ns": statistics.median(bench_medians),
            "ratio_mean": statistics.median(m / t for m, t in zip(bench_means, timer_means)),
            "ratio_p50": statistics.median(m / t for m, t in zip(bench_medians, timer_medians)),
        })
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--agreement-rounds", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="time per measurement in the agreement part")
    parser.add_argument("--skip-agreement", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    options = parser.parse_args()

    import opsight

    print(f"opsight {opsight.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {platform.processor() or platform.platform()}")
    overhead = harness_overhead(options.queries, options.rounds)
    print(f"\n1. harness overhead, no-op callable, {overhead['queries']} queries x "
          f"{overhead['rounds']} rounds (median over rounds)")
    print(f"  bare for loop with perf_counter_ns:  {overhead['bare_loop_ns_per_query']:7.1f} ns/query "
          f"(measured call: {overhead['bare_measured_latency_ns']:.1f} ns)")
    print(f"  opsight.bench single-stream loop:    {overhead['harness_ns_per_query']:7.1f} ns/query "
          f"(measured call: {overhead['harness_measured_latency_ns']:.1f} ns)")
    print(f"  overhead: {overhead['overhead_ns_per_query']:+.1f} ns/query "
          f"(range {overhead['overhead_ns_per_query_min']:+.1f} .. "
          f"{overhead['overhead_ns_per_query_max']:+.1f}), ratio {overhead['ratio']:.3f}")
    results = {"harness_overhead": overhead}
    if not options.skip_agreement:
        agreement = timer_agreement(options.agreement_rounds, options.seconds)
        results["timer_agreement"] = agreement
        print(f"\n2. agreement with torch.utils.benchmark.Timer, threads=1, batch 1, "
              f"{options.agreement_rounds} rounds of {options.seconds:g} s each (medians over rounds)")
        print(f"  {'model':20} {'Timer mean':>11} {'bench mean':>11} {'mean ratio':>10}   "
              f"{'Timer median':>12} {'bench p50':>10} {'p50 ratio':>9}")
        for row in agreement:
            print(f"  {row['model']:20} {row['timer_mean_ns'] / 1e3:8.2f} µs "
                  f"{row['bench_mean_ns'] / 1e3:8.2f} µs {row['ratio_mean']:10.4f}   "
                  f"{row['timer_median_ns'] / 1e3:9.2f} µs {row['bench_p50_ns'] / 1e3:7.2f} µs "
                  f"{row['ratio_p50']:9.4f}")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
