"""What a model's tree gets from running it: the input and output shapes of one forward
(forward hooks on every module, the first call of each recorded) and, from a profile, each
module's latency (opsight's ``module`` spans: the outermost module called is named by its
class, every other by its path, ``encoder.layer.3.attention``; docs/torch.md).

Percentiles interpolate linearly between ranks, as every opsight report does
(``numpy.percentile``'s default), so a p99 here is the p99 of ``opsight report``."""

from __future__ import annotations

import math
import os
from typing import Any

from .tree import Latency, ModuleNode

MODULE_CATEGORY = "module"


def _shape_of(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, dict):
        shapes = {str(key): _shape_of(item) for key, item in value.items()}
        return {key: item for key, item in shapes.items() if item is not None} or None
    if isinstance(value, (tuple, list)):
        shapes = [_shape_of(item) for item in value]
        shapes = [item for item in shapes if item is not None]
        return shapes or None
    return None


def _as_list(shapes: Any) -> list[Any]:
    if shapes is None:
        return []
    return shapes if isinstance(shapes, list) and shapes and not isinstance(shapes[0], int) \
        else [shapes]


def record_shapes(model: Any, example_inputs: Any) -> dict[str, tuple[list, list]]:
    """Runs ``model`` once on ``example_inputs`` (no gradients) and returns, per module path
    ("" for the model), the shapes of its first call's tensor inputs and outputs."""
    import torch

    from ..models import split_inputs

    seen: dict[str, tuple[list, list]] = {}
    handles = []

    def hook_for(path: str):
        def hook(module, args, kwargs, output):
            if path not in seen:
                inputs = _as_list(_shape_of(list(args))) + _as_list(_shape_of(kwargs))
                seen[path] = (inputs, _as_list(_shape_of(output)))
        return hook

    for path, module in model.named_modules():
        handles.append(module.register_forward_hook(hook_for(path), with_kwargs=True))
    args, kwargs = split_inputs(example_inputs)
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def attach_shapes(root: ModuleNode, shapes: dict[str, tuple[list, list]]) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.path in shapes:
            node.input_shapes, node.output_shapes = shapes[node.path]
        stack.extend(node.children)


def module_durations(profile: Any, store: str | None = None) -> dict[str, list[int]]:
    """The durations (ns) of every module span of ``profile``: an ``opsight.profile()``, a
    TraceFile, an ``opsight._native.Trace``, or a trace file / run id (``latest``)."""
    import opsight._native as _native

    trace = getattr(profile, "trace", profile)
    if isinstance(trace, (str, os.PathLike)):
        trace = _native.load(os.fspath(trace), os.fspath(store) if store else "")
    columns = trace.slice_columns()
    durations: dict[str, list[int]] = {}
    for name, category, duration in zip(columns["name"], columns["category"], columns["dur"]):
        if category == MODULE_CATEGORY:
            durations.setdefault(name, []).append(int(duration))
    return durations


def percentile(sorted_values: list[int], percent: float) -> float:
    """numpy.percentile(values, percent) with its default linear method."""
    if not sorted_values:
        return math.nan
    index = percent / 100 * (len(sorted_values) - 1)
    lower = math.floor(index)
    upper = min(lower + 1, len(sorted_values) - 1)
    fraction = index - lower
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * fraction


def attach_latencies(root: ModuleNode, durations: dict[str, list[int]]) -> bool:
    """Sets each node's latency from ``durations`` (by span name); a folded node pools its
    members' calls, and so do the nodes below it. Returns False when the profile has no span
    of this model (nothing attached)."""
    root_calls = durations.get(root.class_name) or durations.get("")
    if not root_calls:
        return False
    root_total = sum(root_calls)

    def visit(node: ModuleNode, paths: list[str]) -> None:
        calls = []
        for path in paths:
            calls.extend(durations.get(path or root.class_name, []))
        if calls:
            calls.sort()
            node.latency = Latency(calls=len(calls), p50_ns=percentile(calls, 50),
                                   p99_ns=percentile(calls, 99), total_ns=sum(calls),
                                   share=sum(calls) / root_total if root_total else 0.0)
        for child in node.children:
            # The child's own path(s) below this node, under each of this node's actual
            # paths (several when an ancestor is folded).
            canonical = child.member_paths or [child.path]
            suffixes = [path[len(node.path):] for path in canonical]
            visit(child, [f"{path}{suffix}" if path else suffix.lstrip(".")
                          for path in paths for suffix in suffixes])

    visit(root, [""])
    return True
