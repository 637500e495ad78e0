"""The top operators: a few extra queries, run after the timed ones, inside
``opsight.profile()`` with operator tracing on; the table is the profile's
:meth:`~opsight.Profile.operators` analysis (the same numbers as ``opsight report --ops``).

PyTorch models use ``opsight.torch.enable(operators=True)``; ONNX Runtime models use
``opsight.onnxruntime`` (a session created under its ``instrumented()``, whose node
events the profile merges when it stops). Where that integration is missing (or records no
operator), the framework's own profiler stands in: ``torch.profiler`` (its Chrome trace) or ONNX Runtime's
session profiling (its JSON profile), both read by opsight's trace readers, and the
result's ``operators_source`` says which one was used.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from .backends import Prepared


@dataclass
class OperatorProfile:
    rows: list[dict[str, Any]]
    source: str
    iterations: int
    #: The profile's trace when it came from an opsight session (same clock as the timed
    #: queries, so it can be stored beside them); None otherwise.
    trace: Any = None
    note: str | None = None


def _profiled_queries(prepared: Prepared, iterations: int) -> None:
    from .._capture.span import Span

    for _ in range(iterations):
        with Span("profiled query", category="bench"):
            prepared.query()


def _operators_in(profile: Any) -> list[dict[str, Any]]:
    return [row for row in profile.operators() if row.get("name") != "profiled query"]


def _with_opsight_torch(prepared: Prepared, iterations: int) -> OperatorProfile | None:
    """``opsight.torch.enable(operators=True)`` in an opsight profile; None when that
    integration is missing or records no operator. The integration's switch is put back as
    it was afterwards."""
    import opsight

    try:
        from opsight import torch as integration
        scope = integration.tracing(operators=True, modules=False, shapes=False)
    except (ImportError, AttributeError):
        return None
    try:
        with scope, opsight.profile(label="opsight bench operators") as profile:
            _profiled_queries(prepared, iterations)
        rows = _operators_in(profile)
    except Exception:  # noqa: BLE001 - the caller falls back to torch.profiler and says so
        return None
    if not rows:
        return None
    return OperatorProfile(rows, "opsight.torch", iterations, profile.trace)


def _compute_feeds(prepared: Prepared) -> Any:
    """What the compute phase gets: the query input through the phases before it."""
    feeds = prepared.query_input
    for name, phase in prepared.phases:
        if name == "compute":
            break
        feeds = phase(feeds)
    return feeds


def _run_session(session: Any, feeds: Any, iterations: int) -> None:
    from .._capture.span import Span

    import onnxruntime

    on_device = isinstance(feeds, dict) and any(isinstance(value, onnxruntime.OrtValue)
                                                for value in feeds.values())
    names = [item.name for item in session.get_outputs()]
    for _ in range(iterations):
        with Span("profiled query", category="bench"):
            if on_device:  # OrtValues on the device
                session.run_with_ort_values(names, feeds)
            else:
                session.run(None, feeds)


def _with_opsight_onnxruntime(prepared: Prepared, iterations: int) -> OperatorProfile | None:
    """A session created under ``opsight.onnxruntime.instrumented()`` runs the queries in an
    opsight profile, which merges ONNX Runtime's node events when it stops; None when that
    integration is missing or records no operator."""
    import onnxruntime
    import opsight

    try:
        from opsight import onnxruntime as integration
        instrumented = integration.instrumented
    except (ImportError, AttributeError):
        return None
    try:
        feeds = _compute_feeds(prepared)
        with opsight.profile(label="opsight bench operators") as profile:
            with instrumented():
                session = onnxruntime.InferenceSession(prepared.onnx_path,
                                                       prepared.session_options(),
                                                       providers=prepared.providers)
                _run_session(session, feeds, iterations)
        rows = _operators_in(profile)
    except Exception:  # noqa: BLE001 - the caller falls back to torch.profiler and says so
        return None
    if not rows:
        return None
    return OperatorProfile(rows, "opsight.onnxruntime", iterations, profile.trace)


def _with_torch_profiler(prepared: Prepared, iterations: int) -> OperatorProfile:
    import opsight
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if prepared.device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with tempfile.TemporaryDirectory(prefix="opsight-bench-") as directory:
        path = os.path.join(directory, "torch-profile.json")
        with _quiet_stderr(), torch.profiler.profile(activities=activities) as profiler:
            for _ in range(iterations):
                prepared.query()
        profiler.export_chrome_trace(path)
        rows = opsight.load(path).operators()
    return OperatorProfile(rows, "torch.profiler", iterations,
                           note="opsight.torch is not available; used torch.profiler")


def _with_onnxruntime_profiling(prepared: Prepared, iterations: int) -> OperatorProfile:
    import onnxruntime
    import opsight

    with tempfile.TemporaryDirectory(prefix="opsight-bench-") as directory:
        options = prepared.session_options(profiling=True)
        options.profile_file_prefix = os.path.join(directory, "ort-profile")
        session = onnxruntime.InferenceSession(prepared.onnx_path, options,
                                               providers=prepared.providers)
        _run_session(session, _compute_feeds(prepared), iterations)
        path = session.end_profiling()
        rows = opsight.load(path).operators()
    return OperatorProfile(rows, "onnxruntime profiling", iterations,
                           note="opsight.onnxruntime is not available; used ONNX Runtime's "
                                "session profiling")


@contextlib.contextmanager
def _quiet_stderr():
    """Kineto writes a few lines of its own to file descriptor 2; they are not the user's."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profile_operators(prepared: Prepared, iterations: int) -> OperatorProfile | None:
    """Profiles ``iterations`` more queries; None when the model has no operators to show."""
    if iterations <= 0 or prepared.operator_kind is None:
        return None
    with prepared.run_context():
        if prepared.operator_kind == "torch":
            return _with_opsight_torch(prepared, iterations) or \
                _with_torch_profiler(prepared, iterations)
        return _with_opsight_onnxruntime(prepared, iterations) or \
            _with_onnxruntime_profiling(prepared, iterations)
