"""What runs on a cluster's node: one :class:`Worker` (a Ray actor, one process per
measurement) that reports its machine's facts and clock, then measures with opsight's own
harness and sends back the numbers and the trace.

The model arrives as an artifact (:mod:`.artifacts`: ONNX or TorchScript bytes, a
torch.export program), never as the caller's Python code. ``bench`` is
:func:`opsight.bench.run` on it (the same warm-up, compilation flagging, recording and
statistics as a local ``opsight bench``); ``compare_graphs`` compiles each graph with
:mod:`opsight.compare_backends`' own recorder (the same priming runs, timing and output
check as a local ``compare_backends``) and runs the graphs in the order the function
calls them. The trace goes back as Chrome JSON text, on this machine's clock; the caller
measures the offset (:meth:`Worker.clock`) and moves it onto its own.

This module imports neither ray nor torch at import time: Ray imports it on the worker."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any


def _trace_json(trace: Any) -> str:
    with tempfile.TemporaryDirectory(prefix="opsight-remote-") as directory:
        path = os.path.join(directory, "worker.json")
        trace.write(path)
        with open(path, encoding="utf-8") as file:
            return file.read()


class Worker:
    """One measurement's process on a node. Thread-safety: Ray calls its methods one at a
    time (an actor)."""

    def facts(self) -> dict[str, Any]:
        """The machine's facts (:func:`.facts.hardware_facts`) with the Ray node id."""
        from .facts import hardware_facts

        node_id = None
        try:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - outside Ray (tests of the worker alone)
            pass
        return hardware_facts(node_id)

    def clock(self) -> int:
        """This machine's trace clock now (CLOCK_MONOTONIC ns, as ``perf_counter_ns``)."""
        return time.perf_counter_ns()

    # ---- opsight bench ---------------------------------------------------------------------
    def bench(self, artifact: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """Benchmarks the artifact with :func:`opsight.bench.run`; returns its ``to_dict()``
        (``result``) and its trace as Chrome JSON (``trace_json``)."""
        from .. import bench
        from .artifacts import materialize

        with tempfile.TemporaryDirectory(prefix="opsight-remote-") as directory:
            model, inputs = materialize(artifact, directory)
            result = bench.run(model, inputs, store=False, progress=False, **options)
            return {"result": result.to_dict(), "trace_json": _trace_json(result.trace)}

    # ---- compare_backends ------------------------------------------------------------------
    def compare_graphs(self, graphs: list[dict[str, Any]], path: list[int], backend: str,
                       options: dict[str, Any]) -> dict[str, Any]:
        """Compiles every graph for ``backend`` and runs them in ``path``'s order (graph ids,
        as one call of the function runs them) ``warmups + repeats`` times. Returns per
        position the run times (ns) of the measured calls, the errors and output mismatches,
        and the trace (one ``call`` span per call, a ``graph #N`` span per graph run)."""
        import opsight._native as native
        import torch

        from ..compare_backends.backends import resolve_backends
        from ..compare_backends.measure import _Recorder
        from .artifacts import load_graph

        warmups, repeats = int(options["warmups"]), int(options["repeats"])
        threads = options.get("threads")
        if threads:
            torch.set_num_threads(int(threads))
        compilers = resolve_backends([backend], threads)
        recorder = _Recorder(compilers, float(options["rtol"]), float(options["atol"]),
                             lambda: None)
        runners: dict[int, Any] = {}
        inputs: dict[int, list] = {}
        compile_ns: dict[int, int] = {}
        for graph in graphs:
            module, arguments = load_graph(graph)
            started = time.perf_counter_ns()
            runners[graph["graph_id"]] = recorder(module, arguments)
            compile_ns[graph["graph_id"]] = time.perf_counter_ns() - started
            inputs[graph["graph_id"]] = arguments
        session = native.Session("", 64, 100, 0)
        if not session.ok:
            raise RuntimeError(f"cannot start a recording session: {session.error}")
        call_name = native.register_name("call", "compare_backends")
        graph_names = {graph_id: native.register_name(f"graph #{graph_id}", "compare_backends")
                       for graph_id in runners}
        samples: list[list[int | None]] = [[] for _ in path]
        try:
            with torch.no_grad():
                for number in range(warmups + repeats):
                    native.begin(call_name)
                    native.add_arg("measured", number >= warmups)
                    for position, graph_id in enumerate(path):
                        native.begin(graph_names[graph_id])
                        runners[graph_id](*inputs[graph_id])
                        elapsed = recorder.calls[-1].times_ns.get(backend)
                        native.add_arg("backend", backend)
                        if elapsed is not None:
                            native.add_arg("run_ns", int(elapsed))
                        native.end()
                        if number >= warmups:
                            samples[position].append(elapsed)
                    native.end()
        finally:
            session.stop()
        trace = native.trace_from_native_bytes(session.take_native_bytes(),
                                               f"compare_backends {backend}")
        measured_calls = recorder.calls[warmups * len(path):]
        errors: list[list[str]] = [[] for _ in path]
        mismatches = [0] * len(path)
        largest: list[float | None] = [None] * len(path)
        for index, call in enumerate(measured_calls):
            position = index % len(path)
            error = call.errors.get(backend)
            if error and error not in errors[position]:
                errors[position].append(error)
            if backend in call.mismatched:
                mismatches[position] += 1
                difference = call.mismatched[backend]
                if difference is not None:
                    largest[position] = max(largest[position] or 0.0, difference)
        return {"samples_ns": samples, "errors": errors, "mismatches": mismatches,
                "max_abs_diff": largest, "compile_ns": compile_ns,
                "trace_json": _trace_json(trace)}
