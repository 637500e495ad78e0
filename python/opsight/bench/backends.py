"""Back-ends: turning a loaded model into the phases of one query.

``prepare`` returns a :class:`Prepared`: the query's phases in order (``preprocess``,
``host_to_device``, ``compute``, ``device_to_host``, ``postprocess``; only those that exist
for the model and device), each a function of the previous phase's result, plus what the
scenarios need (a compilation counter where one can be read, a context to run in, the
operator profiler's kind).

| back-end | runs | from |
|---|---|---|
| ``eager`` | the Python callable / ``nn.Module`` as is | ``module:factory`` |
| ``compile`` (alias ``inductor``) | ``torch.compile(model, backend=compile_backend)`` | ``module:factory`` |
| ``torchscript`` | a ScriptModule (``torch.jit.trace`` of a factory's model) | TorchScript file, ``module:factory`` |
| ``ort-cpu``, ``ort-cuda``, ``ort-tensorrt`` (aliases ``onnxruntime``, ``onnxruntime-cuda``, ``onnxruntime-tensorrt``) | an ONNX Runtime session with that execution provider | ONNX file; TorchScript file and ``module:factory`` through ``torch.onnx.export`` (the TorchScript-based exporter, ``dynamo=False``: it needs no extra package) |

Thread-safety: a Prepared object is used by one thread at a time.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from ..models import (BACKENDS, ORT_PROVIDERS, LoadedModel, ModelError, canonical_backend,
                      error_text)

DEFAULT_BACKEND = {"python": "eager", "torchscript": "torchscript", "onnx": "ort-cpu"}


@dataclass
class Prepared:
    backend: str
    device: str
    #: (phase name, function of the previous phase's result), in order.
    phases: list[tuple[str, Callable[[Any], Any]]]
    #: What the first phase gets, the same in every query.
    query_input: Any
    #: ``(function, arguments)`` when the query is the compute phase alone: the single-stream
    #: loop then calls ``function(*arguments)`` with nothing in between.
    direct_call: tuple[Callable[..., Any], tuple] | None
    #: Total graph compilations so far (torch.compile), or None where none can be counted.
    compilations: Callable[[], int] | None
    #: "torch", "onnxruntime" or None: how operators are profiled.
    operator_kind: str | None
    run_context: Callable[[], Any] = contextlib.nullcontext
    notes: list[str] = field(default_factory=list)
    session: Any = None  # the ONNX Runtime session, for operator profiling
    onnx_path: str | None = None
    session_options: Callable[[], Any] | None = None
    providers: list[str] | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    def query(self) -> Any:
        value = self.query_input
        for _, phase in self.phases:
            value = phase(value)
        return value

    def close(self) -> None:
        for function in reversed(self.cleanup):
            with contextlib.suppress(Exception):
                function()
        self.cleanup.clear()


def ort_available_providers() -> list[str]:
    try:
        import onnxruntime
    except ImportError:
        return []
    return list(onnxruntime.get_available_providers())


def torch_cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def unavailable_reason(backend: str) -> str | None:
    """None when ``backend`` can run here, else why not (imports only what it needs)."""
    if backend == "eager":
        return None
    if backend in ("compile", "torchscript"):
        try:
            import torch  # noqa: F401
        except ImportError:
            return "PyTorch is not installed"
        return None
    providers = ort_available_providers()
    if not providers:
        return "onnxruntime is not installed"
    if ORT_PROVIDERS[backend] not in providers:
        return f"ONNX Runtime has no {ORT_PROVIDERS[backend]} here"
    return None


def available_backends() -> dict[str, str | None]:
    """Each back-end: None when it can run here, else why not."""
    return {backend: unavailable_reason(backend) for backend in BACKENDS}


def _availability_text() -> str:
    providers = ort_available_providers()
    usable = [name for name, reason in available_backends().items() if reason is None]
    return (f"available here: {', '.join(usable)} (onnxruntime providers: "
            f"{', '.join(providers) if providers else 'none, onnxruntime not installed'}; "
            f"torch.cuda.is_available(): {torch_cuda_available()})")


def _call_for(model: Callable[..., Any], example: Any) -> Callable[[Any], Any]:
    """The compute phase: calls the model with a query's inputs as the example's shape says."""
    if isinstance(example, tuple):
        return lambda value: model(*value)
    if isinstance(example, dict):
        return lambda value: model(**value)
    return model


def _direct(model: Callable[..., Any], example: Any) -> tuple[Callable[..., Any], tuple]:
    if isinstance(example, tuple):
        return model, example
    if isinstance(example, dict):
        import functools
        return functools.partial(model, **example), ()
    return model, (example,)


def check_form(form: str, source: str, backend: str | None) -> None:
    """Refuses a back-end the model's form cannot run on, before anything is loaded."""
    backend = canonical_backend(backend) if backend is not None else None
    if backend is None or backend.startswith("ort-") or backend not in BACKENDS:
        return
    if form == "onnx":
        raise ModelError(f"{source}: an ONNX file runs only on the ONNX Runtime back-ends "
                         f"(--backend ort-cpu, ort-cuda, ort-tensorrt), not on {backend}")
    if form == "torchscript" and backend != "torchscript":
        raise ModelError(f"{source}: a TorchScript model runs on the torchscript back-end "
                         f"or, exported to ONNX, on ort-*; not on {backend}")


def prepare(loaded: LoadedModel, backend: str | None, *, device: str = "cpu",
            threads: int | None = None, compile_backend: str = "inductor",
            compile_mode: str | None = None) -> Prepared:
    backend = canonical_backend(backend) if backend else DEFAULT_BACKEND[loaded.form]
    if backend not in BACKENDS:
        raise ModelError(f"--backend {backend!r}: unknown back-end (one of {', '.join(BACKENDS)}); "
                         + _availability_text())
    reason = unavailable_reason(backend)
    if reason is not None:
        raise ModelError(f"--backend {backend}: {reason}; {_availability_text()}")
    if backend.startswith("ort-"):
        if device != "cpu" and device != ("cuda" if backend != "ort-cpu" else "cpu"):
            raise ModelError(f"--device {device}: back-end {backend} decides the device itself "
                             "(ort-cpu: cpu; ort-cuda, ort-tensorrt: cuda)")
        return _prepare_onnxruntime(loaded, backend, threads)
    check_form(loaded.form, loaded.source, backend)
    if device not in ("cpu", "cuda"):
        raise ModelError(f"--device {device!r}: expected cpu or cuda")
    if device == "cuda" and not torch_cuda_available():
        raise ModelError(f"--device cuda: torch.cuda.is_available() is False here; "
                         + _availability_text())
    return _prepare_torch(loaded, backend, device, threads, compile_backend, compile_mode)


# ---- PyTorch --------------------------------------------------------------------------------

def _map_tensors(value: Any, function: Callable[[Any], Any], tensor_type: type) -> Any:
    if isinstance(value, tensor_type):
        return function(value)
    if isinstance(value, tuple):
        return tuple(_map_tensors(item, function, tensor_type) for item in value)
    if isinstance(value, list):
        return [_map_tensors(item, function, tensor_type) for item in value]
    if isinstance(value, dict):
        return {key: _map_tensors(item, function, tensor_type) for key, item in value.items()}
    return value


def _model_inputs(loaded: LoadedModel) -> Any:
    """The example of what the model is called with (the preprocessed inputs)."""
    if loaded.preprocess is None:
        return loaded.inputs
    try:
        return loaded.preprocess(loaded.inputs)
    except Exception as error:  # noqa: BLE001
        raise ModelError(f"{loaded.source}: preprocess raised {error_text(error)}") from None


def _prepare_torch(loaded: LoadedModel, backend: str, device: str, threads: int | None,
                   compile_backend: str, compile_mode: str | None) -> Prepared:
    torch = sys.modules.get("torch")
    if torch is None and backend != "eager":
        import torch  # noqa: F811 - compile and torchscript need it
    example = _model_inputs(loaded)
    model = loaded.model
    notes: list[str] = []
    if device == "cuda":
        if isinstance(model, torch.nn.Module):
            model = model.to("cuda")
        example = _map_tensors(example, lambda tensor: tensor.to("cuda"), torch.Tensor)
    compilations = None
    if backend == "compile":
        try:
            model = torch.compile(model, backend=compile_backend, mode=compile_mode)
        except Exception as error:  # noqa: BLE001
            raise ModelError(f"{loaded.source}: torch.compile failed: {error_text(error)}") from None
        from torch._dynamo.utils import counters

        def compilations() -> int:
            return int(counters["stats"]["unique_graphs"])
        notes.append(f"torch.compile(backend={compile_backend!r}"
                     + (f", mode={compile_mode!r}" if compile_mode else "") + "): iterations in "
                     "which Dynamo compiled a graph (torch._dynamo counters "
                     "stats.unique_graphs) are flagged and left out of the statistics")
    elif backend == "torchscript" and loaded.form != "torchscript":
        if not isinstance(model, torch.jit.ScriptModule):
            if isinstance(example, dict):
                raise ModelError(f"{loaded.source}: torch.jit.trace needs positional example "
                                 "inputs (a tuple), not a dict")
            arguments = example if isinstance(example, tuple) else (example,)
            try:
                with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
                    warnings.simplefilter("ignore")
                    model = torch.jit.trace(model, arguments)
            except Exception as error:  # noqa: BLE001
                raise ModelError(f"{loaded.source}: torch.jit.trace failed: "
                                 f"{error_text(error)}") from None
            notes.append("converted with torch.jit.trace")
    elif backend == "torchscript":
        notes.append("TorchScript's profiling executor optimizes the graph during its first "
                     "runs; that is not detectable from outside, so nothing is flagged: use "
                     "enough warm-up")

    phases: list[tuple[str, Callable[[Any], Any]]] = []
    query_input = loaded.inputs
    if loaded.preprocess is not None:
        phases.append(("preprocess", loaded.preprocess))
    elif device == "cuda":
        query_input = _map_tensors(loaded.inputs, lambda tensor: tensor.cpu(), torch.Tensor)
    compute_call = _call_for(model, example)
    if device == "cuda":
        tensor_type = torch.Tensor
        phases.append(("host_to_device", lambda value: _map_tensors(
            value, lambda tensor: tensor.to("cuda"), tensor_type)))
        synchronize = torch.cuda.synchronize

        def compute(value: Any) -> Any:
            result = compute_call(value)
            synchronize()
            return result
        phases.append(("compute", compute))
        phases.append(("device_to_host", lambda value: _map_tensors(
            value, lambda tensor: tensor.cpu(), tensor_type)))
    else:
        phases.append(("compute", compute_call))
    if loaded.postprocess is not None:
        phases.append(("postprocess", loaded.postprocess))
    direct = _direct(model, example) if len(phases) == 1 else None

    uses_torch = torch is not None and (isinstance(model, torch.nn.Module) or backend != "eager"
                                        or _holds_tensor(example, torch))
    run_context = torch.inference_mode if uses_torch and backend != "compile" else (
        torch.no_grad if uses_torch else contextlib.nullcontext)
    prepared = Prepared(backend, device, phases, query_input, direct, compilations,
                        "torch" if uses_torch else None, run_context, notes)
    if threads and torch is not None:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        prepared.cleanup.append(lambda: torch.set_num_threads(previous))
    elif threads and not uses_torch:
        notes.append("--threads has no effect on a model that is not PyTorch")
    return prepared


def _holds_tensor(value: Any, torch: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_holds_tensor(item, torch) for item in value)
    if isinstance(value, dict):
        return any(_holds_tensor(item, torch) for item in value.values())
    return False


# ---- ONNX Runtime ---------------------------------------------------------------------------

def _export_onnx(loaded: LoadedModel, example: Any, directory: str) -> str:
    import torch

    if isinstance(example, dict):
        raise ModelError(f"{loaded.source}: exporting to ONNX needs positional example inputs "
                         "(a tuple of tensors), not a dict")
    arguments = example if isinstance(example, tuple) else (example,)
    if not all(isinstance(argument, torch.Tensor) for argument in arguments):
        raise ModelError(f"{loaded.source}: exporting to ONNX needs tensor inputs")
    if not isinstance(loaded.model, torch.nn.Module):
        raise ModelError(f"{loaded.source}: only a torch.nn.Module can be exported to ONNX "
                         f"(the model is a {type(loaded.model).__name__})")
    path = os.path.join(directory, "model.onnx")
    names = [f"input_{index}" for index in range(len(arguments))]
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(loaded.model, arguments, path, input_names=names, dynamo=False)
    except Exception as error:  # noqa: BLE001
        raise ModelError(f"{loaded.source}: torch.onnx.export (dynamo=False) failed: "
                         f"{error_text(error)}") from None
    return path


def _to_numpy(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    return value


def _feeds(example: Any, names: list[str]) -> dict[str, Any]:
    if isinstance(example, dict):
        return {key: _to_numpy(value) for key, value in example.items()}
    values = example if isinstance(example, (tuple, list)) else (example,)
    return {name: _to_numpy(value) for name, value in zip(names, values)}


def _prepare_onnxruntime(loaded: LoadedModel, backend: str, threads: int | None) -> Prepared:
    import onnxruntime

    notes: list[str] = []
    cleanup: list[Callable[[], None]] = []
    example = _model_inputs(loaded)
    if loaded.form == "onnx":
        path = loaded.model
    else:
        directory = tempfile.mkdtemp(prefix="opsight-bench-")
        import shutil
        cleanup.append(lambda: shutil.rmtree(directory, ignore_errors=True))
        try:
            path = _export_onnx(loaded, example, directory)
        except ModelError:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        notes.append("converted with torch.onnx.export(dynamo=False)")
    provider = ORT_PROVIDERS[backend]
    providers = [provider] + (["CUDAExecutionProvider"] if backend == "ort-tensorrt" else []) \
        + (["CPUExecutionProvider"] if provider != "CPUExecutionProvider" else [])

    def session_options(profiling: bool = False) -> Any:
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        if profiling:
            options.enable_profiling = True
        return options

    try:
        session = onnxruntime.InferenceSession(path, session_options(), providers=providers)
    except Exception as error:  # noqa: BLE001
        for function in cleanup:
            function()
        raise ModelError(f"{loaded.source}: ONNX Runtime cannot load the model on {backend}: "
                         f"{error_text(error)}") from None
    names = [item.name for item in session.get_inputs()]
    phases: list[tuple[str, Callable[[Any], Any]]] = []
    if loaded.preprocess is not None:
        preprocess = loaded.preprocess
        phases.append(("preprocess", lambda value: _feeds(preprocess(value), names)))
        query_input = loaded.inputs
    else:
        query_input = _feeds(example, names)
    if backend == "ort-cpu":
        run = session.run
        phases.append(("compute", lambda feeds: run(None, feeds)))
        direct = (run, (None, query_input)) if len(phases) == 1 else None
        device = "cpu"
    else:
        ort_value = onnxruntime.OrtValue
        run_with_ort_values = session.run_with_ort_values
        output_names = [item.name for item in session.get_outputs()]
        phases.append(("host_to_device", lambda feeds: {
            key: ort_value.ortvalue_from_numpy(value, "cuda", 0) for key, value in feeds.items()}))
        phases.append(("compute", lambda feeds: run_with_ort_values(output_names, feeds)))
        phases.append(("device_to_host", lambda outputs: [output.numpy() for output in outputs]))
        direct = None
        device = "cuda"
        if backend == "ort-tensorrt":
            notes.append("TensorRT builds its engines at the first run; that is not detectable "
                         "from outside, so nothing is flagged: use enough warm-up")
    if loaded.postprocess is not None:
        phases.append(("postprocess", loaded.postprocess))
    active = session.get_providers()
    if provider not in active:
        notes.append(f"ONNX Runtime fell back to {', '.join(active)}")
    prepared = Prepared(backend, device, phases, query_input, direct, None, "onnxruntime",
                        notes=notes, session=session, onnx_path=path,
                        session_options=session_options, providers=providers, cleanup=cleanup)
    if loaded.form != "onnx" and threads:
        torch = sys.modules.get("torch")
        if torch is not None and loaded.preprocess is not None:
            previous = torch.get_num_threads()
            torch.set_num_threads(threads)
            prepared.cleanup.append(lambda: torch.set_num_threads(previous))
    return prepared
