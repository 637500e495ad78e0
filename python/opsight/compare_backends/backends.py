"""The built-in back-ends of :func:`compare_backends` (eager, inductor, torchscript,
onnxruntime), how back-end names and ``(name, compiler)`` pairs resolve to compilers, and
``stdout_to_stderr``, which the ONNX export and ``opsight compare-backends`` share.

Back-end names are every model tool's vocabulary (``opsight.models.BACKENDS`` with its
aliases ``opsight.models.BACKEND_ALIASES``): ``compile`` and ``inductor`` name the same
back-end (a graph compiled by inductor, what ``torch.compile`` does by default),
``ort-cpu`` and ``onnxruntime`` the same ONNX Runtime CPU session. A result is labelled
with the name as given. ``ort-cuda`` and ``ort-tensorrt`` are bench's only: here every
graph runs on the CPU execution provider."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
import warnings
from typing import Any, Callable, Iterable, Mapping

from ..models import canonical_backend

BUILTIN_BACKENDS = ("eager", "inductor", "torchscript", "onnxruntime")
DEFAULT_BACKENDS = BUILTIN_BACKENDS

Compiler = Callable[[Any, list], Callable[..., Any]]


# ---- built-in back-ends ---------------------------------------------------------------------

def _compile_eager(graph_module, example_inputs):
    return graph_module


def _compile_inductor(graph_module, example_inputs):
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(graph_module, example_inputs)


def _compile_torchscript(graph_module, example_inputs):
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.trace(graph_module, tuple(example_inputs), check_trace=False,
                               strict=False)


def _compile_onnxruntime(graph_module, example_inputs, threads: int | None = None):
    import torch

    try:
        import onnxruntime
    except ImportError as error:
        raise RuntimeError(f"onnxruntime is not installed ({error}); "
                           "pip install onnxruntime") from None
    for index, value in enumerate(example_inputs):
        if not isinstance(value, torch.Tensor):
            raise RuntimeError(f"graph input {index} is a {type(value).__name__}, not a tensor: "
                               "the ONNX export takes tensors only")
    names = [f"input_{index}" for index in range(len(example_inputs))]
    buffer = io.BytesIO()
    with warnings.catch_warnings(), stdout_to_stderr():
        warnings.simplefilter("ignore")
        # The TorchScript-based exporter: the torch.export-based one (dynamo=True) needs
        # the onnxscript package. On failure it prints the graph on fd 1: sent to stderr.
        torch.onnx.export(graph_module, tuple(example_inputs), buffer, dynamo=False,
                          input_names=names)
    options = onnxruntime.SessionOptions()
    # ONNX Runtime's threads spin after a run by default, taking the cores from the
    # back-end that runs next in the same call: they wait without spinning here.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(buffer.getvalue(), options,
                                           providers=["CPUExecutionProvider"])
    kept = [(names.index(node.name), node.name) for node in session.get_inputs()]

    def run(*arguments):
        feed = {name: arguments[index].detach().cpu().numpy() for index, name in kept}
        return [torch.from_numpy(output) for output in session.run(None, feed)]

    return run


#: By canonical back-end name (opsight.models.BACKENDS).
_BUILTIN_COMPILERS: dict[str, Compiler] = {
    "eager": _compile_eager,
    "compile": _compile_inductor,
    "torchscript": _compile_torchscript,
    "ort-cpu": _compile_onnxruntime,
}


def _builtin_compiler(name: str, threads: int | None) -> Compiler | None:
    """The compiler of a built-in back-end named ``name`` (or an alias), else None."""
    canonical = canonical_backend(name)
    if canonical in ("ort-cuda", "ort-tensorrt"):
        raise ValueError(f"compare_backends: back-end {name!r} is opsight bench's only: "
                         "compare_backends runs graphs on ONNX Runtime's CPU execution "
                         "provider (ort-cpu, alias onnxruntime)")
    if canonical == "ort-cpu" and threads:
        return functools.partial(_compile_onnxruntime, threads=threads)
    return _BUILTIN_COMPILERS.get(canonical)


def resolve_backends(backends, threads: int | None = None) -> list[tuple[str, Compiler]]:
    if isinstance(backends, str):
        backends = [name.strip() for name in backends.split(",") if name.strip()]
    items: Iterable = backends.items() if isinstance(backends, Mapping) else backends
    resolved: list[tuple[str, Compiler]] = []
    for item in items:
        if isinstance(item, str):
            name, compiler = item, _builtin_compiler(item, threads)
            if compiler is None:
                compiler = _dynamo_backend(item)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) \
                and callable(item[1]):
            name, compiler = item
        else:
            raise ValueError(f"compare_backends: a back-end is a name or a (name, compiler) "
                             f"pair, got {item!r}")
        if any(name == seen for seen, _ in resolved):
            raise ValueError(f"compare_backends: back-end {name!r} is given twice")
        if isinstance(item, str):
            same = [seen for seen, _ in resolved if isinstance(seen, str)
                    and canonical_backend(seen) == canonical_backend(name)
                    and canonical_backend(name) in _BUILTIN_COMPILERS]
            if same:
                raise ValueError(f"compare_backends: back-end {name!r} is given twice "
                                 f"({same[0]!r} names the same one)")
        resolved.append((name, compiler))
    if not resolved:
        raise ValueError("compare_backends: no back-end given")
    return resolved


def _dynamo_backend(name: str) -> Compiler:
    import torch._dynamo

    known = sorted(set(torch._dynamo.list_backends(exclude_tags=())) - {"inductor", "eager"})
    if name not in known:
        raise ValueError(f"compare_backends: unknown back-end {name!r} (built in: "
                         f"{', '.join(BUILTIN_BACKENDS)}, also named compile, ort-cpu; "
                         f"torch.compile back-ends: "
                         f"{', '.join(known)})")
    return torch._dynamo.lookup_backend(name)


@contextlib.contextmanager
def stdout_to_stderr():
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptors to move (an embedding host): Python's only
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
