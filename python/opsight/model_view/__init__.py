"""``opsight.print_model``: a model's structure, folded and measured (docs/explain.md).

``print_model(model, profile=None, depth=None)`` prints one line per module with repeated
identical blocks folded (``encoder.layer.0–11 × 12``), parameter counts and bytes, dtypes
and quantization, frozen/trainable marks, buffers, the shapes of one forward when
``inputs`` are given and, given a profile (``opsight.profile()``, a trace file or a stored
run), each module's p50/p99 latency and share. ``model_tree`` returns the same as data
(:class:`ModuleNode`, ``.to_dict()`` for JSON).

Modules: ``tree`` (the folded tree), ``measure`` (shapes, latencies), ``render`` (text);
the command ``opsight model`` is ``opsight._cli.model``.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from .tree import Latency, ModuleNode


def model_tree(model: Any, *, inputs: Any = None, profile: Any = None,
               store: str | None = None) -> ModuleNode:
    """The folded tree of ``model`` (an ``nn.Module``), with the shapes of one forward on
    ``inputs`` (a tuple of positional arguments, a dict of keyword arguments, or one
    tensor) and the latencies of ``profile`` when given."""
    import torch

    from .measure import attach_latencies, attach_shapes, module_durations, record_shapes
    from .tree import build_tree

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"print_model: expected a torch.nn.Module, got {type(model).__name__}")
    root = build_tree(model)
    if inputs is not None:
        attach_shapes(root, record_shapes(model, inputs))
    if profile is not None:
        if not attach_latencies(root, module_durations(profile, store)):
            raise ValueError(f"print_model: the profile has no module span of "
                             f"{root.class_name} (record it with torch module tracing on: "
                             f"OPSIGHT_TORCH=on or modules, the default)")
    return root


def wants_ascii(file: IO[str]) -> bool:
    encoding = getattr(file, "encoding", None) or "ascii"
    try:
        "❄●◐└─│×→".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def print_model(model: Any, profile: Any = None, depth: int | None = None, *,
                inputs: Any = None, ascii: bool | None = None, file: IO[str] | None = None,
                format: str = "text") -> None:
    """Prints ``model``'s folded tree (see the module's documentation); ``depth`` limits
    the levels shown (counts still cover everything below), ``ascii`` forces or forbids the
    ASCII marks (default: ASCII when ``file`` cannot encode the others), ``format="json"``
    prints the tree as JSON."""
    import json

    from .render import prune, render_text

    file = file or sys.stdout
    if depth is not None and (not isinstance(depth, int) or depth < 0):
        raise ValueError(f"print_model: depth must be an integer >= 0, got {depth!r}")
    root = model_tree(model, inputs=inputs, profile=profile)
    if format == "json":
        file.write(json.dumps(prune(root, depth), indent=2) + "\n")
    elif format == "text":
        file.write(render_text(root, depth=depth,
                               ascii=wants_ascii(file) if ascii is None else ascii))
    else:
        raise ValueError(f"print_model: format must be 'text' or 'json', got {format!r}")


__all__ = ["Latency", "ModuleNode", "model_tree", "print_model"]
