"""One query's example inputs: a tuple (positional arguments), a dict (keyword arguments;
for ONNX, input name to array) or a single value (the one argument)."""

from __future__ import annotations

import sys
from typing import Any

from .errors import ModelError


def split_inputs(example_inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A factory's example inputs -> (args, kwargs): a dict is keyword arguments, a tuple or
    list positional ones, anything else the one argument."""
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def tile_inputs(inputs: Any, batch_size: int, source: str) -> Any:
    """Repeats every tensor/array of ``inputs`` ``batch_size`` times along dimension 0."""
    if batch_size == 1:
        return inputs
    tiled_any = False

    def tile(value: Any) -> Any:
        nonlocal tiled_any
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            if value.dim() == 0:
                return value
            tiled_any = True
            return value.repeat(batch_size, *([1] * (value.dim() - 1)))
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray):
            if value.ndim == 0:
                return value
            tiled_any = True
            return numpy.concatenate([value] * batch_size, axis=0)
        if isinstance(value, tuple):
            return tuple(tile(item) for item in value)
        if isinstance(value, list):
            return [tile(item) for item in value]
        if isinstance(value, dict):
            return {key: tile(item) for key, item in value.items()}
        return value

    tiled = tile(inputs)
    if not tiled_any:
        raise ModelError(f"{source}: --batch-size {batch_size}: the example inputs hold no "
                         "tensor or array to repeat along dimension 0")
    return tiled


def samples_per_query(inputs: Any, batch_size: int) -> int:
    """Dimension 0 of the first tensor/array of the (tiled) inputs, else ``batch_size``."""
    stack = [inputs]
    while stack:
        value = stack.pop(0)
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0 and hasattr(value, "dtype"):
            return int(shape[0])
        if isinstance(value, (tuple, list)):
            stack[:0] = list(value)
        elif isinstance(value, dict):
            stack[:0] = list(value.values())
    return batch_size
