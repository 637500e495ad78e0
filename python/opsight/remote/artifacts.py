"""Models and graphs as artifacts: bytes that travel through Ray's object store and that a
worker turns back into something to run, so that no closure of the caller's code is ever
pickled.

| artifact ``kind`` | bytes | made from | a worker runs it as |
|---|---|---|---|
| ``onnx`` | an ONNX model | an ONNX file as is; a module exported by ``torch.onnx.export`` (bench's exporter) | ``opsight.bench.run`` on the file (ort-*) |
| ``torchscript`` | ``torch.jit.save`` | a TorchScript file as is; ``torch.jit.trace`` of a module | the ScriptModule (torchscript) |
| ``torch.export`` | ``torch.export.save`` | ``torch.export.export`` of a module or of a captured FX graph | its ``module()`` (eager, compile; compare_backends' graphs on every back-end) |

Inputs travel beside them as tensors or arrays (data, not code)."""

from __future__ import annotations

import io
import os
import warnings
from typing import Any

from ..models import LoadedModel, ModelError, canonical_backend, error_text
from .specs import RemoteError


# ---- made by the caller ---------------------------------------------------------------------

def _file_bytes(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _detached(value: Any) -> Any:
    """Tensors as plain tensors (a Parameter would carry autograd state), recursively."""
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_detached(item) for item in value)
    if isinstance(value, list):
        return [_detached(item) for item in value]
    if isinstance(value, dict):
        return {key: _detached(item) for key, item in value.items()}
    return value


def _export_program(module: Any, arguments: tuple, what: str) -> bytes:
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.export.export(module, arguments, strict=False)
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
    except Exception as error:  # noqa: BLE001
        raise RemoteError(f"{what}: torch.export failed, so it cannot be sent to a remote "
                          f"worker: {error_text(error)}") from None
    return buffer.getvalue()


def model_artifact(loaded: LoadedModel, backend: str) -> dict[str, Any]:
    """The artifact that lets a worker run ``loaded`` on ``backend`` (canonical name), with
    its inputs. Raises :class:`RemoteError` for what cannot travel."""
    if loaded.preprocess is not None or loaded.postprocess is not None:
        raise RemoteError(f"{loaded.source}: a remote benchmark sends the model as an artifact "
                          "(ONNX, TorchScript, torch.export), not Python code, so a factory's "
                          "preprocess/postprocess cannot run there: benchmark them locally, "
                          "or return the model alone for --cluster")
    backend = canonical_backend(backend)
    inputs = _detached(loaded.inputs)
    if loaded.form == "onnx":
        if not backend.startswith("ort-"):
            raise RemoteError(f"{loaded.source}: an ONNX file runs only on the ONNX Runtime "
                              f"back-ends (ort-cpu, ort-cuda, ort-tensorrt), not on {backend}")
        return {"kind": "onnx", "bytes": _file_bytes(loaded.model), "inputs": inputs,
                "name": loaded.name}
    import torch

    arguments = inputs if isinstance(inputs, tuple) else (inputs,)
    if isinstance(inputs, dict):
        raise RemoteError(f"{loaded.source}: a remote benchmark needs positional example "
                          "inputs (a tuple of tensors), not a dict")
    if backend.startswith("ort-"):
        from ..bench.backends import _export_onnx
        import tempfile

        with tempfile.TemporaryDirectory(prefix="opsight-remote-") as directory:
            try:
                path = _export_onnx(loaded, inputs, directory)
            except ModelError as error:
                raise RemoteError(str(error)) from None
            data = _file_bytes(path)
        feeds = {f"input_{index}": value.detach().cpu().numpy()
                 for index, value in enumerate(arguments)}
        return {"kind": "onnx", "bytes": data, "inputs": feeds, "name": loaded.name}
    if backend == "torchscript":
        module = loaded.model
        if not isinstance(module, torch.jit.ScriptModule):
            try:
                with warnings.catch_warnings(), torch.no_grad():
                    warnings.simplefilter("ignore")
                    module = torch.jit.trace(module, arguments)
            except Exception as error:  # noqa: BLE001
                raise RemoteError(f"{loaded.source}: torch.jit.trace failed: "
                                  f"{error_text(error)}") from None
        buffer = io.BytesIO()
        torch.jit.save(module, buffer)
        return {"kind": "torchscript", "bytes": buffer.getvalue(), "inputs": inputs,
                "name": loaded.name}
    if loaded.form == "torchscript":
        raise RemoteError(f"{loaded.source}: a TorchScript model runs on the torchscript "
                          f"back-end or, exported to ONNX, on ort-*; not on {backend}")
    if not isinstance(loaded.model, torch.nn.Module):
        raise RemoteError(f"{loaded.source}: only a torch.nn.Module can be sent to a remote "
                          f"worker (the model is a {type(loaded.model).__name__})")
    with torch.no_grad():
        data = _export_program(loaded.model, arguments, loaded.source)
    return {"kind": "torch.export", "bytes": data, "inputs": inputs, "name": loaded.name}


def graph_artifact(graph_id: int, graph_module: Any, example_inputs: list) -> dict[str, Any]:
    """A graph dynamo captured (an FX GraphModule and the arguments it was called with)."""
    arguments = tuple(_detached(list(example_inputs)))
    data = _export_program(graph_module, arguments, f"graph #{graph_id}")
    return {"kind": "torch.export", "graph_id": graph_id, "bytes": data,
            "inputs": list(arguments)}


# ---- turned back into something to run, on the worker ---------------------------------------

def _load_program_module(data: bytes) -> Any:
    """The program's module as a plain ``torch.fx.GraphModule`` (the one
    ``ExportedProgram.module()`` returns refuses ``train()``, which the ONNX and TorchScript
    exporters call)."""
    import torch

    program = torch.export.load(io.BytesIO(data))
    module = program.module()
    return torch.fx.GraphModule(module, module.graph)


def materialize(artifact: dict[str, Any], directory: str) -> tuple[Any, Any]:
    """``(model, inputs)`` for :func:`opsight.bench.run`: an ONNX file's path, a
    ScriptModule or a GraphModule."""
    kind = artifact.get("kind")
    if kind == "onnx":
        path = os.path.join(directory, f"{artifact.get('name') or 'model'}.onnx")
        with open(path, "wb") as file:
            file.write(artifact["bytes"])
        return path, artifact["inputs"]
    import torch

    if kind == "torchscript":
        module = torch.jit.load(io.BytesIO(artifact["bytes"]), map_location="cpu")
        module.eval()
        return module, artifact["inputs"]
    if kind == "torch.export":
        return _load_program_module(artifact["bytes"]), artifact["inputs"]
    raise RemoteError(f"unknown artifact kind {kind!r}")


def load_graph(artifact: dict[str, Any]) -> tuple[Any, list]:
    """A captured graph's module and arguments, on the worker."""
    return _load_program_module(artifact["bytes"]), list(artifact["inputs"])
