"""What ``opsight bench`` itself costs per query, and whether its latencies agree with
``torch.utils.benchmark.Timer``.

Run it with the installed package::

    .venv/bin/python benchmarks/python/bench_harness.py            # both parts
    .venv/bin/python benchmarks/python/bench_harness.py --json out.json

1. Harness overhead. A no-op callable runs ``--queries`` times in the single-stream loop
   of ``opsight.bench`` (``scenarios.run_back_to_back`` on a back-end prepared by
   ``backends.prepare``, exactly what ``opsight bench``/``opsight.bench.run`` run), and as
   many times in a bare ``for`` loop that takes ``time.perf_counter_ns()`` around each call
   and appends both stamps to a list. Both compute their latencies after their clock stops.
   A third loop records each call as a span of a recording session instead
   (``_native.begin``/``end`` inside the loop: what recording *in* the loop would cost).
   The three alternate, in a fresh random order each round, for ``--rounds`` rounds; each
   is timed from outside (wall time of the whole loop / queries). The overhead per query is
   the median over the rounds of (loop − bare loop) measured in the same round; also shown:
   the mean latency each loop measured for the call itself (what ends up in the report),
   and what writing the queries into the core's trace after the run costs per query
   (``recording.QueryRecorder.finish``: spans at the measured times, the session stopped,
   the trace built; outside the timed queries).
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
    stamps = []
    append = stamps.append
    begin = clock()
    for _ in range(queries):
        start = clock()
        function()
        end = clock()
        append(start)
        append(end)
    wall = clock() - begin
    # As the harness: the latencies are computed once the clock has stopped.
    return wall, statistics.fmean(stamps[index + 1] - stamps[index]
                                  for index in range(0, len(stamps), 2))


def harness_loop(prepared, queries: int) -> tuple[int, float]:
    from opsight.bench.scenarios import run_back_to_back
    from opsight.bench.statistics import query_latencies

    clock = time.perf_counter_ns
    begin = clock()
    timings = run_back_to_back(prepared, queries, None, False, "")
    wall = clock() - begin
    return wall, statistics.fmean(query_latencies(timings))


def native_span_loop(function, queries: int) -> tuple[int, float]:
    """Each call recorded as a span in the loop (``_native.begin``/``end`` in a session)."""
    import json

    from opsight import _native

    session = _native.Session("", 16 + queries * 48 // (1 << 20), 100, 0)
    query = _native.register_name("query", "bench")
    begin_span, end_span = _native.begin, _native.end
    clock = time.perf_counter_ns
    begin = clock()
    for _ in range(queries):
        begin_span(query)
        function()
        end_span()
    wall = clock() - begin
    session.stop()
    trace = _native.trace_from_native_bytes(session.take_native_bytes(), "loop")
    summary = {row["name"]: row for row in json.loads(trace.render("summary", "json"))}
    return wall, summary["query"]["mean_ns"]


def recording_cost(prepared, queries: int) -> float:
    """ns per query that QueryRecorder.finish takes after a run of ``queries``."""
    from opsight.bench.recording import QueryRecorder
    from opsight.bench.scenarios import run_back_to_back

    recorder = QueryRecorder()
    recorder.start(queries, len(prepared.phases))
    timings = run_back_to_back(prepared, queries, None, False, "")
    time.sleep(0.025)  # past the clock mapping's minimum window: finish does not wait
    begin = time.perf_counter_ns()
    recorder.finish(timings)
    return (time.perf_counter_ns() - begin) / queries


def harness_overhead(queries: int, rounds: int) -> dict:
    from opsight import models
    from opsight.bench import backends

    loaded = models.from_object(noop, inputs=(), source="noop", default_name="noop")
    prepared = backends.prepare(loaded, "eager")
    assert prepared.direct_call is not None
    loops = {"bare": lambda: bare_loop(noop, queries),
             "harness": lambda: harness_loop(prepared, queries),
             "native": lambda: native_span_loop(noop, queries)}
    harness_loop(prepared, queries // 10)  # warm the paths up
    bare_loop(noop, queries // 10)
    native_span_loop(noop, queries // 10)
    rows = []
    recording = []
    for _ in range(rounds):
        order = list(loops)
        random.shuffle(order)
        rows.append({which: loops[which]() for which in order})
        recording.append(recording_cost(prepared, queries))
    bare_wall = [row["bare"][0] / queries for row in rows]
    harness_wall = [row["harness"][0] / queries for row in rows]
    native_wall = [row["native"][0] / queries for row in rows]
    difference = [h - b for h, b in zip(harness_wall, bare_wall)]
    return {
        "native_span_loop_ns_per_query": statistics.median(native_wall),
        "native_span_overhead_ns_per_query": statistics.median(
            n - b for n, b in zip(native_wall, bare_wall)),
        "native_measured_latency_ns": statistics.median(row["native"][1] for row in rows),
        "recording_after_run_ns_per_query": statistics.median(recording),
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
    print(f"  spans recorded in the loop instead:  {overhead['native_span_loop_ns_per_query']:7.1f} ns/query "
          f"(measured call: {overhead['native_measured_latency_ns']:.1f} ns; "
          f"{overhead['native_span_overhead_ns_per_query']:+.1f} ns/query against the bare loop)")
    print(f"  writing the queries into the core's trace after the run: "
          f"{overhead['recording_after_run_ns_per_query']:.1f} ns/query (outside the timed queries)")
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
