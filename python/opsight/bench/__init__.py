"""``opsight.bench``: benchmark a model on a back-end under an MLPerf-style scenario.

Quick start::

    import torch, opsight.bench

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    result = opsight.bench.run(model, (torch.randn(1, 64),), backend="eager",
                               scenario="single-stream", iterations=1000, threads=1)
    result.print()                      # latency table, phases, throughput, top operators
    result.to_dict()["latency"]["p99_ns"]

``opsight bench MODEL`` is the same from the command line (docs/bench.md). Modules:
``models`` (loading MODEL, the :class:`Model` protocol of factories), ``backends`` (the
phases of one query per back-end), ``scenarios`` (single-stream, offline, server),
``statistics``, ``operators`` (the top-operator profile), ``report``
(:class:`BenchResult`), ``store`` (the run in the run store), ``command`` (the CLI).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .backends import BACKENDS, available_backends, check_form, prepare
from .models import (BenchError, LoadedModel, Model, from_object, load, model_form,
                     samples_per_query, tile_inputs)
from .report import BenchResult
from .scenarios import SCENARIOS, Timings, parse_duration, run_back_to_back, run_server, warm_up
from .statistics import counted_elapsed_ns, distribution, phase_durations, query_latencies

__all__ = ["BACKENDS", "SCENARIOS", "BenchError", "BenchResult", "Model", "available_backends",
           "run"]

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
                   p99_bound_ms: float | None, profile_iterations: int) -> None:
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")
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
        seed: int = 0) -> BenchResult:
    """Benchmarks ``model`` and returns a :class:`BenchResult`.

    ``model``: a callable or ``torch.nn.Module`` (with ``inputs``: a tuple of positional
    arguments, a dict of keyword arguments or one tensor), a :class:`Model`, or a MODEL
    string as ``opsight bench`` takes it (a TorchScript/ONNX file, ``module:factory``).
    ``warmup``: iterations or a duration (``"2s"``). ``iterations``/``duration``: how many
    timed queries, or for how long (both: at least that many and that long; neither: 100).
    ``profile_iterations``: extra queries profiled for the top operators (0: none).
    ``store``: True saves the run in the run store, a path in that store file.
    Raises :class:`BenchError` for a model or back-end that cannot run, ValueError for a
    bad option.
    """
    _check_options(scenario, batch_size, threads, qps, p99_bound_ms, profile_iterations)
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
    try:
        with prepared.run_context():
            timings = Timings([], [], None)
            try:
                warm_up(prepared, warmup_iterations, warmup_seconds, timings)
                if scenario == "server":
                    measured = run_server(prepared, float(qps), iterations, duration_seconds,
                                          progress, label, seed)
                else:
                    measured = run_back_to_back(prepared, iterations, duration_seconds,
                                                progress, label)
            except BenchError:
                raise
            except Exception as error:  # noqa: BLE001 - the model's own failure
                from .models import _first_line
                raise BenchError(f"{loaded.source}: the model raised {_first_line(error)} on "
                                 f"{prepared.backend}") from error
            measured.warmup_iterations = timings.warmup_iterations
            measured.warmup_ns = timings.warmup_ns
            measured.warmup_compilations = timings.warmup_compilations
        from .operators import profile_operators
        try:
            operator_profile = profile_operators(prepared, profile_iterations)
        except Exception as error:  # noqa: BLE001 - the table is extra; the numbers stand
            operator_profile = None
            prepared.notes.append(f"top operators not profiled: {type(error).__name__}: {error}")
    finally:
        prepared.close()

    result = _result(loaded, prepared, scenario, batch_size, samples, threads, measured,
                     qps, p99_bound_ms, operator_profile)
    if store:
        from . import store as run_store
        run_tags = {"bench": "1", "backend": prepared.backend, "scenario": scenario,
                    "batch_size": batch_size, "device": prepared.device,
                    "threads": threads or "default", "model": loaded.name}
        if isinstance(tags, dict):
            extra = [f"{key}={value}" for key, value in tags.items()]
        else:
            extra = list(tags or [])
        result.saved_run = run_store.save(
            measured, name=name or f"bench {loaded.name}", tags=run_tags, extra_tags=extra,
            operator_trace=operator_profile.trace if operator_profile else None,
            store=None if store is True else store)
    return result


def _result(loaded: LoadedModel, prepared: Any, scenario: str, batch_size: int, samples: int,
            threads: int | None, timings: Timings, qps: float | None,
            p99_bound_ms: float | None, operator_profile: Any) -> BenchResult:
    latency = distribution(query_latencies(timings))
    phases = []
    for phase_name, durations in phase_durations(timings):
        statistics = distribution(durations)
        mean = latency.get("mean_ns")
        share = (statistics["mean_ns"] / mean) if mean and statistics["mean_ns"] is not None else None
        phases.append({"name": phase_name, **statistics, "share_of_mean": share})
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
                  "p99_bound_ms": p99_bound_ms, "p99_bound_held": held}
    notes = list(loaded.notes) + list(prepared.notes)
    if operator_profile is not None and operator_profile.note:
        notes.append(operator_profile.note)
    if counted == 0:
        notes.append("no query was counted: every timed query was flagged")
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
        notes=notes, versions=dict(package_versions()), timings=timings)
