"""``opsight.bench``: benchmark a model on a back-end under an MLPerf-style scenario.

Quick start::

    import torch, opsight.bench

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    result = opsight.bench.run(model, (torch.randn(1, 64),), backend="eager",
                               scenario="single-stream", iterations=1000, threads=1)
    result.print()                      # latency table, phases, throughput, top operators
    result.to_dict()["latency"]["p99_ns"]

``opsight bench MODEL`` is the same from the command line (docs/bench.md). Loading MODEL,
the :class:`Model` protocol of factories and the back-ends' names are :mod:`opsight.models`'
(shared with ``opsight compare-backends``, ``explain`` and ``model``). Modules: ``backends``
(the phases of one query per back-end), ``scenarios`` (single-stream, offline, server),
``recording`` (the timed queries as a trace of the core, whose breakdown gives every
statistic), ``statistics`` (what the raw timestamps give directly), ``operators`` (the
top-operator profile), ``report`` (:class:`BenchResult`), ``store`` (the run in the run
store), ``command`` (the CLI).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..models import (BACKEND_ALIASES, BACKENDS, LoadedModel, Model, ModelError, canonical_backend,
                      error_text, from_object, load, model_form, samples_per_query, tile_inputs)
from .backends import available_backends, check_form, prepare
from .report import BenchResult
from .recording import QueryRecorder, query_statistics
from .scenarios import (SCENARIOS, Timings, offline_query_count, parse_duration, run_back_to_back,
                        run_offline, run_server, warm_up)
from .statistics import counted_elapsed_ns, phase_durations, query_latencies  # noqa: F401

#: A model, input or back-end that cannot be benchmarked (:class:`opsight.models.ModelError`:
#: the same class, so that it also catches what loading the model raised).
BenchError = ModelError

__all__ = ["BACKENDS", "BACKEND_ALIASES", "SCENARIOS", "BenchError", "BenchResult", "Model",
           "available_backends", "run"]

DEFAULT_ITERATIONS = 100


def _resolve(model: Any, inputs: Any, shapes: Any, dtype: str, preprocess: Callable | None,
             postprocess: Callable | None, backend: str | None) -> LoadedModel:
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        check_form(model_form(os.fspath(model)), os.fspath(model), backend)
        loaded = load(os.fspath(model), shapes=shapes, dtype=dtype)
        if inputs is not None:
            loaded.inputs = inputs
        if preprocess is not None:
            loaded.preprocess = preprocess
        if postprocess is not None:
            loaded.postprocess = postprocess
        return loaded
    return from_object(model, inputs=inputs, source="opsight.bench.run", default_name="",
                       preprocess=preprocess, postprocess=postprocess)


def _check_options(scenario: str, batch_size: int, threads: int | None, qps: float | None,
                   p99_bound_ms: float | None, profile_iterations: int, workers: int) -> None:
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers {workers!r}: expected an integer >= 1")
    if workers > 1 and scenario == "single-stream":
        raise ValueError("workers (--workers) is for the offline and server scenarios: "
                         "single-stream issues one query at a time")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch size {batch_size!r}: expected an integer >= 1")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads {threads!r}: expected an integer >= 1")
    if scenario == "server":
        if qps is None or not qps > 0:
            raise ValueError("the server scenario needs a query rate: qps > 0 (--qps)")
    elif qps is not None:
        raise ValueError(f"qps is for the server scenario, not {scenario}")
    if p99_bound_ms is not None and (scenario != "server" or not p99_bound_ms > 0):
        raise ValueError("p99_bound_ms (--p99-bound-ms) is a positive bound for the server scenario")
    if profile_iterations < 0:
        raise ValueError("profile_iterations must be >= 0")


def run(model: Any, inputs: Any = None, *, backend: str | None = None,
        scenario: str = "single-stream", batch_size: int = 1, threads: int | None = None,
        warmup: int | str = 10, iterations: int | None = None,
        duration: str | float | None = None, qps: float | None = None,
        p99_bound_ms: float | None = None, device: str = "cpu",
        compile_backend: str = "inductor", compile_mode: str | None = None,
        preprocess: Callable | None = None, postprocess: Callable | None = None,
        shapes: Any = None, dtype: str = "float32", profile_iterations: int = 5,
        store: bool | str | os.PathLike = False, name: str | None = None,
        tags: dict[str, Any] | list[str] | None = None, progress: bool = False,
        seed: int = 0, workers: int = 1) -> BenchResult:
    """Benchmarks ``model`` and returns a :class:`BenchResult`.

    ``model``: a callable or ``torch.nn.Module`` (with ``inputs``: a tuple of positional
    arguments, a dict of keyword arguments or one tensor), a :class:`Model`, or a MODEL
    string as ``opsight bench`` takes it (a TorchScript/ONNX file, ``module:factory``).
    ``warmup``: iterations or a duration (``"2s"``). ``iterations``/``duration``: how many
    timed queries, or for how long (both: at least that many and that long; neither: 100).
    ``profile_iterations``: extra queries profiled for the top operators (0: none).
    ``store``: True saves the run in the run store, a path in that store file.
    ``workers``: threads serving the queries (offline and server scenarios).
    ``backend``: a name of :data:`BACKENDS` or an alias of :data:`BACKEND_ALIASES`.
    Raises :class:`BenchError` for a model or back-end that cannot run, ValueError for a
    bad option.
    """
    _check_options(scenario, batch_size, threads, qps, p99_bound_ms, profile_iterations, workers)
    if backend is not None:
        backend = canonical_backend(backend)
    warmup_iterations, warmup_seconds = parse_duration(warmup, "warmup")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        if not duration >= 0:
            raise ValueError(f"duration {duration!r}: expected seconds >= 0")
        duration_seconds = float(duration)
    else:
        count, duration_seconds = parse_duration(duration, "duration")
        if count is not None:
            raise ValueError(f"duration {duration!r}: expected a duration with a unit (10s)")
    if iterations is not None and (not isinstance(iterations, int) or iterations < 1):
        raise ValueError(f"iterations {iterations!r}: expected an integer >= 1")
    if iterations is None and duration_seconds is None:
        iterations = DEFAULT_ITERATIONS

    loaded = _resolve(model, inputs, shapes, dtype, preprocess, postprocess, backend)
    loaded.inputs = tile_inputs(loaded.inputs, batch_size, loaded.source)
    samples = samples_per_query(loaded.inputs, batch_size)
    prepared = prepare(loaded, backend, device=device, threads=threads,
                       compile_backend=compile_backend, compile_mode=compile_mode)
    label = f"opsight bench {loaded.name} {prepared.backend} {scenario}"
    recorder = QueryRecorder()
    try:
        with prepared.run_context():
            timings = Timings([], [], None)
            try:
                warm_up(prepared, warmup_iterations, warmup_seconds, timings)
                count = None
                if scenario == "offline":
                    count = offline_query_count(iterations, duration_seconds,
                                                timings.warmup_iterations, timings.warmup_ns,
                                                lambda: _time_one_query(prepared))
                elif iterations is not None and duration_seconds is None:
                    count = iterations
                recorder.start(count, len(prepared.phases))
                if scenario == "server":
                    measured = run_server(prepared, float(qps), iterations, duration_seconds,
                                          progress, label, seed, workers)
                elif scenario == "offline":
                    measured = run_offline(prepared, count, workers, progress, label)
                else:
                    measured = run_back_to_back(prepared, iterations, duration_seconds,
                                                progress, label)
            except BenchError:
                recorder.abort()
                raise
            except Exception as error:  # noqa: BLE001 - the model's own failure
                recorder.abort()
                raise BenchError(f"{loaded.source}: the model raised {error_text(error)} on "
                                 f"{prepared.backend}") from error
            measured.warmup_iterations = timings.warmup_iterations
            measured.warmup_ns = timings.warmup_ns
            measured.warmup_compilations = timings.warmup_compilations
        trace = recorder.finish(measured, f"opsight bench {loaded.name}")
        from .operators import profile_operators
        try:
            operator_profile = profile_operators(prepared, profile_iterations)
        except Exception as error:  # noqa: BLE001 - the table is extra; the numbers stand
            operator_profile = None
            prepared.notes.append(f"top operators not profiled: {type(error).__name__}: {error}")
    finally:
        recorder.abort()
        prepared.close()

    result = _result(loaded, prepared, scenario, batch_size, samples, threads, measured,
                     qps, p99_bound_ms, operator_profile, trace, workers)
    if store:
        from . import store as run_store
        run_tags = {"bench": "1", "backend": prepared.backend, "scenario": scenario,
                    "batch_size": batch_size, "device": prepared.device,
                    "threads": threads or "default", "model": loaded.name}
        if workers > 1:
            run_tags["workers"] = workers
        if isinstance(tags, dict):
            extra = [f"{key}={value}" for key, value in tags.items()]
        else:
            extra = list(tags or [])
        result.saved_run = run_store.save(
            trace, name=name or f"bench {loaded.name}", tags=run_tags, extra_tags=extra,
            operator_trace=operator_profile.trace if operator_profile else None,
            store=None if store is True else store)
    return result


def _time_one_query(prepared: Any) -> int:
    """One untimed query's duration (ns): the offline scenario's rate when there was no
    warm-up to read it from."""
    import time
    begin = time.perf_counter_ns()
    prepared.query()
    return time.perf_counter_ns() - begin


def _result(loaded: LoadedModel, prepared: Any, scenario: str, batch_size: int, samples: int,
            threads: int | None, timings: Timings, qps: float | None,
            p99_bound_ms: float | None, operator_profile: Any, trace: Any,
            workers: int) -> BenchResult:
    phase_order = (["queue"] if timings.arrivals is not None else []) + list(timings.phase_names)
    latency, phases = query_statistics(trace, phase_order)
    counted = timings.count - len(timings.flagged)
    elapsed = counted_elapsed_ns(timings)
    queries_per_second = counted / (elapsed / 1e9) if elapsed > 0 and counted else None
    throughput = {"queries_per_second": queries_per_second,
                  "samples_per_second": queries_per_second * samples if queries_per_second else None}
    server = None
    if scenario == "server":
        p99 = latency.get("p99_ns")
        held = None if p99_bound_ms is None or p99 is None else p99 <= p99_bound_ms * 1e6
        server = {"target_qps": float(qps), "achieved_qps": queries_per_second,
                  "p99_bound_ms": p99_bound_ms, "p99_bound_held": held, "workers": workers}
    notes = list(loaded.notes) + list(prepared.notes)
    if operator_profile is not None and operator_profile.note:
        notes.append(operator_profile.note)
    if counted == 0:
        notes.append("no query was counted: every timed query was flagged")
    if workers > 1 and prepared.compilations is not None:
        notes.append("with several workers a compilation is flagged on the query that saw "
                     "the counter change, which may be another worker's")
    from .._store import package_versions
    return BenchResult(
        model=loaded.name, source=loaded.source, form=loaded.form, backend=prepared.backend,
        device=prepared.device, scenario=scenario, batch_size=batch_size,
        samples_per_query=samples, threads=threads,
        warmup={"iterations": timings.warmup_iterations, "seconds": timings.warmup_ns / 1e9,
                "compilations": timings.warmup_compilations},
        queries=timings.count, counted=counted, flagged=len(timings.flagged),
        elapsed_ns=elapsed, latency=latency, phases=phases, throughput=throughput,
        server=server,
        operators=operator_profile.rows if operator_profile is not None else None,
        operators_source=operator_profile.source if operator_profile is not None else None,
        operators_iterations=operator_profile.iterations if operator_profile is not None else 0,
        notes=notes, versions=dict(package_versions()), timings=timings, workers=workers,
        trace=trace)
