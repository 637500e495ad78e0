"""What ONNX Runtime's own profiler costs per ``run()``, and what opsight.onnxruntime adds,
on a small model, measured side by side in one process; and how well ORT's node events
line up with opsight's run spans once merged.

    .venv/bin/python benchmarks/python/onnxruntime_profiling_overhead.py

The model is built in code (random weights): an MLP of ``--layers`` MatMul+Add+Relu layers
of width ``--width``, run on batches of ``--batch`` rows with one intra-op thread. Three
sessions of the same model:

* ``plain``: ORT's defaults (no profiling);
* ``ORT profiling``: ``SessionOptions.enable_profiling = True`` (what opsight.onnxruntime
  switches on), no opsight;
* ``opsight.onnxruntime``: created under ``opsight.onnxruntime.instrument()`` and run inside
  ``opsight.profile()`` (ORT profiling + an opsight span per run);
* ``opsight span only``: the plain session (created before ``instrument()``: no ORT
  profile) run instrumented inside ``opsight.profile()``: opsight's own wrapper alone.

Each round times a batch of ``--number`` runs of every variant, the variants in a fresh
random order each round (a noisy neighbour hits all alike); per variant: the median over
rounds of the time per run, and its ratio to ``plain`` in the same round (median over
rounds), in wall-clock time and in the calling thread's CPU time; and the whole session
per run as a user pays it, from the profile's start to its end (ORT: ``end_profiling()``
writing its JSON; opsight: the stop that ends ORT's profile, reads it and merges it), which
gives the merge's own cost. ORT's profiler keeps every event in memory until the profile ends, and opsight
ends a session's profile when its recording stops, so both profiled sessions are created
afresh (and warmed up) before each round: each variant's batch runs on a profile holding
only that batch. At the end, the alignment
of the last opsight recording (``opsight.onnxruntime.alignments()``) and the margins
between each ``model_run`` and its run span are printed. A benchmark, not a test: nothing
is asserted on a time.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time

import numpy
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import opsight
import opsight.onnxruntime as opsight_onnxruntime


def build_model(path: str, layers: int, width: int) -> None:
    generator = numpy.random.default_rng(0)
    nodes, initializers = [], []
    current = "x"
    for layer in range(layers):
        weight, bias = f"W{layer}", f"B{layer}"
        initializers += [
            numpy_helper.from_array(generator.standard_normal((width, width), dtype=numpy.float32) * 0.1, weight),
            numpy_helper.from_array(generator.standard_normal(width, dtype=numpy.float32), bias)]
        nodes += [helper.make_node("MatMul", [current, weight], [f"m{layer}"], name=f"matmul{layer}"),
                  helper.make_node("Add", [f"m{layer}", bias], [f"a{layer}"], name=f"add{layer}"),
                  helper.make_node("Relu", [f"a{layer}"], [f"y{layer}"], name=f"relu{layer}")]
        current = f"y{layer}"
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, width])],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT, [None, width])],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def options(profile_prefix: str | None) -> onnxruntime.SessionOptions:
    result = onnxruntime.SessionOptions()
    result.intra_op_num_threads = 1
    result.inter_op_num_threads = 1
    if profile_prefix is not None:
        result.enable_profiling = True
        result.profile_file_prefix = profile_prefix
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--number", type=int, default=500, help="runs per batch")
    parser.add_argument("--rounds", type=int, default=20)
    arguments = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="ort-overhead-")
    model = os.path.join(directory, "mlp.onnx")
    build_model(model, arguments.layers, arguments.width)
    feed = {"x": numpy.ones((arguments.batch, arguments.width), dtype=numpy.float32)}
    providers = ["CPUExecutionProvider"]
    plain = onnxruntime.InferenceSession(model, options(None), providers=providers)

    def new_profiled_sessions():
        ort_only = onnxruntime.InferenceSession(model, options(os.path.join(directory, "ort")),
                                                providers=providers)
        with opsight_onnxruntime.instrumented():
            traced = onnxruntime.InferenceSession(model, options(None), providers=providers)
        return ort_only, traced

    def timed(session, number):
        """(wall, calling thread's CPU) ns per run: with one intra-op thread ORT runs the
        model on the calling thread, and its CPU time is not inflated by preemptions."""
        run = session.run
        start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(number):
            run(None, feed)
        return ((time.perf_counter_ns() - start) / number,
                (time.thread_time_ns() - start_cpu) / number)

    variants = ["plain", "ORT profiling", "opsight.onnxruntime", "opsight span only"]
    per_run: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    # The whole session per run, wall ns: the runs plus what the tool does when its profile
    # ends (ORT: end_profiling() writing its JSON; opsight: the session's start and stop,
    # ORT's profile ended, read and merged into the recording).
    whole_per_run: dict[str, list[float]] = {name: [] for name in variants}
    ratios: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    ort_only = traced = None
    alignment_report = None
    margins: list[tuple[int, int]] = []
    model_runs = 0
    for _ in range(arguments.rounds):
        ort_only, traced = new_profiled_sessions()
        with opsight_onnxruntime.instrumented():
            for session in (plain, ort_only, traced):  # warm-up, outside the timing
                timed(session, 20)
        results = {}
        order = variants[:]
        random.shuffle(order)
        gc.disable()
        for name in order:
            whole_start = time.perf_counter_ns()
            if name == "plain":
                results[name] = timed(plain, arguments.number)
            elif name == "ORT profiling":
                results[name] = timed(ort_only, arguments.number)
                profile_path = ort_only.end_profiling()
            elif name == "opsight span only":
                with opsight_onnxruntime.instrumented():
                    with opsight.profile():
                        results[name] = timed(plain, arguments.number)
            else:
                with opsight_onnxruntime.instrumented():
                    with opsight.profile() as prof:
                        results[name] = timed(traced, arguments.number)
            whole_per_run[name].append((time.perf_counter_ns() - whole_start) / arguments.number)
            if name == "ORT profiling":
                os.remove(profile_path)
            elif name == "opsight.onnxruntime":
                alignment_report = opsight_onnxruntime.alignments()
                margins, model_runs = run_span_margins(prof)
        gc.enable()
        for name in variants:
            per_run[name].append(results[name])
            ratios[name].append((results[name][0] / results["plain"][0],
                                 results[name][1] / results["plain"][1]))

    print(f"model: {arguments.layers} x (MatMul+Add+Relu), width {arguments.width}, batch "
          f"{arguments.batch}; onnxruntime {onnxruntime.__version__}, 1 intra-op thread; "
          f"{arguments.rounds} rounds x {arguments.number} runs per variant")
    print("| variant | per run, wall (median) | per run, thread CPU (median) | × plain, wall "
          "| × plain, thread CPU |")
    print("|---|---|---|---|---|")
    for name in variants:
        wall = statistics.median(value[0] for value in per_run[name])
        cpu = statistics.median(value[1] for value in per_run[name])
        wall_ratio = statistics.median(value[0] for value in ratios[name])
        cpu_ratio = statistics.median(value[1] for value in ratios[name])
        print(f"| {name} | {wall / 1000:.1f} µs | {cpu / 1000:.1f} µs | {wall_ratio:.2f} "
              f"| {cpu_ratio:.2f} |")
    print()
    print("Whole session, as a user pays it (the runs, then the tool's end: ORT's "
          "end_profiling(); opsight's stop, which ends ORT's profile and merges it)")
    print("| variant | per run, wall (median) | × plain | added per run |")
    print("|---|---|---|---|")
    plain_whole = statistics.median(whole_per_run["plain"])
    for name in variants:
        whole = statistics.median(whole_per_run[name])
        print(f"| {name} | {whole / 1000:.1f} µs | {whole / plain_whole:.2f} | "
              f"{(whole - plain_whole) / 1000:+.1f} µs |")
    merge = [whole - hot[0] for whole, hot in zip(whole_per_run["opsight.onnxruntime"],
                                                  per_run["opsight.onnxruntime"])]
    print(f"opsight.onnxruntime's stop (ORT's profile ended, read and merged) per run: "
          f"{statistics.median(merge) / 1000:.1f} µs, {statistics.median(merge) * arguments.number / 1e6:.1f} "
          f"ms per session of {arguments.number} runs (median over rounds)")
    print()
    for entry in alignment_report or []:
        print("alignment (last round):", {key: value for key, value in entry.items() if key != "file"})
    if margins:
        starts = sorted(start for start, _ in margins)
        ends = sorted(end for _, end in margins)
        print(f"model_run inside its run span, {len(margins)} runs: start margin min "
              f"{starts[0] / 1000:.1f} µs, median {starts[len(starts) // 2] / 1000:.1f} µs; end "
              f"margin min {ends[0] / 1000:.1f} µs, median {ends[len(ends) // 2] / 1000:.1f} µs; "
              f"model_run events in the recording: {model_runs}")
    return 0


def run_span_margins(prof) -> tuple[list[tuple[int, int]], int]:
    """(model_run start - run span start, run span end - model_run end) per model_run nested
    in a run span, and the number of model_run events."""
    columns = prof.trace.slice_columns()
    index_of = {span_id: row for row, span_id in enumerate(columns["span_id"])}
    margins = []
    model_runs = 0
    for row, name in enumerate(columns["name"]):
        if name != "model_run":
            continue
        model_runs += 1
        if columns["parent_span_id"][row] is None:
            continue
        parent = index_of[columns["parent_span_id"][row]]
        if not columns["name"][parent].startswith("onnxruntime.run"):
            continue
        margins.append((columns["start"][row] - columns["start"][parent],
                        columns["end"][parent] - columns["end"][row]))
    return margins, model_runs


if __name__ == "__main__":
    sys.exit(main())
