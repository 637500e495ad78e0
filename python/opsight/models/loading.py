"""Loading a model: what ``opsight bench MODEL`` benchmarks, and the ``module:factory`` that
``opsight compare-backends``, ``opsight explain`` and ``opsight model`` call.

A MODEL is one of three forms:

- ``python``: ``module:factory`` or ``path/to/file.py:factory``; the factory (no arguments)
  returns a :class:`Model`, a ``(model, example_inputs)`` tuple, or a dict with the keys of
  :class:`Model`. The model is any callable: a ``torch.nn.Module`` or a plain function.
- ``torchscript``: a file ending ``.pt``, ``.pth``, ``.ts`` or ``.jit``, read with
  ``torch.jit.load``. It holds no example inputs: give their shapes (``--shape 1x8``).
- ``onnx``: a file ending ``.onnx``. Its inputs are made from the shapes and types the model
  declares (a dimension without a size counts 1), unless ``--shape`` says otherwise.

``inputs`` are one query's worth of example inputs (see :mod:`.inputs`). Failures raise
:class:`~.errors.ModelError` (:class:`~.errors.FactoryError` for a factory that cannot be
found or imported).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import FactoryError, ModelError, error_text

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".jit")
ONNX_SUFFIXES = (".onnx",)


@dataclass
class Model:
    """What a ``module:factory`` returns (or what ``opsight.bench.run`` takes).

    ``preprocess(inputs)`` runs first in each query and returns what the model is called
    with; ``postprocess(outputs)`` runs last. Both are timed as phases of their own."""

    model: Any
    inputs: Any = ()
    preprocess: Callable[[Any], Any] | None = None
    postprocess: Callable[[Any], Any] | None = None
    name: str | None = None


@dataclass
class LoadedModel:
    form: str  # "python", "torchscript" or "onnx"
    model: Any  # the callable, the ScriptModule, or the ONNX file's path
    inputs: Any
    name: str
    source: str
    preprocess: Callable[[Any], Any] | None = None
    postprocess: Callable[[Any], Any] | None = None
    notes: list[str] = field(default_factory=list)


# ---- shapes ---------------------------------------------------------------------------------

def parse_shapes(shapes: Any) -> list[tuple[str | None, tuple[int, ...]]]:
    """``["1x8", "mask=1x128"]`` (or a list of tuples, or a dict name -> shape) to
    ``[(None, (1, 8)), ("mask", (1, 128))]``."""
    if shapes is None:
        return []
    if isinstance(shapes, dict):
        return [(name, tuple(int(size) for size in shape)) for name, shape in shapes.items()]
    if isinstance(shapes, (str, tuple)):
        shapes = [shapes]
    parsed = []
    for shape in shapes:
        if isinstance(shape, (tuple, list)):
            parsed.append((None, tuple(int(size) for size in shape)))
            continue
        name, _, sizes = shape.rpartition("=")
        try:
            dimensions = tuple(int(size) for size in sizes.replace(",", "x").split("x") if size)
        except ValueError:
            raise ModelError(f"--shape {shape!r}: expected sizes like 1x3x224x224 "
                             "(optionally NAME=1x3x224x224)") from None
        if not dimensions or any(size < 0 for size in dimensions):
            raise ModelError(f"--shape {shape!r}: expected sizes like 1x3x224x224")
        parsed.append((name or None, dimensions))
    return parsed


# ---- loading --------------------------------------------------------------------------------

def model_form(spec: str) -> str:
    lower = spec.lower()
    if lower.endswith(ONNX_SUFFIXES):
        return "onnx"
    if lower.endswith(TORCHSCRIPT_SUFFIXES):
        return "torchscript"
    if ":" in spec:
        return "python"
    raise ModelError(f"{spec}: not a model: expected a TorchScript file ({', '.join(TORCHSCRIPT_SUFFIXES)}), "
                     "an ONNX file (.onnx) or module:factory / path/to/file.py:factory")


def load(spec: str, *, shapes: Any = None, dtype: str = "float32") -> LoadedModel:
    """Loads MODEL (see the module's documentation); raises :class:`ModelError`."""
    form = model_form(spec)
    if form == "python":
        return _load_factory(spec)
    if not os.path.exists(spec):
        raise ModelError(f"{spec}: no such file")
    if not os.path.isfile(spec):
        raise ModelError(f"{spec}: not a file")
    name = os.path.splitext(os.path.basename(spec))[0]
    if form == "onnx":
        return LoadedModel("onnx", os.path.abspath(spec), _onnx_inputs(spec, shapes, dtype), name, spec)
    torch = _import_torch(spec)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            module = torch.jit.load(spec, map_location="cpu")
    except Exception as error:  # noqa: BLE001 - any failure means "not loadable"
        raise ModelError(f"{spec}: not a TorchScript file (torch.jit.load: "
                         f"{error_text(error)})") from None
    module.eval()
    parsed = parse_shapes(shapes)
    if not parsed:
        raise ModelError(f"{spec}: a TorchScript file holds no example inputs: give their "
                         "shapes, e.g. --shape 1x3x224x224 (one --shape per input)")
    inputs = _random_tensors(torch, parsed, dtype, spec)
    return LoadedModel("torchscript", module, inputs, name, spec)


def _import_torch(spec: str) -> Any:
    try:
        import torch
    except ImportError:
        raise ModelError(f"{spec}: needs PyTorch (pip install torch)") from None
    return torch


def _random_tensors(torch: Any, parsed, dtype: str, spec: str) -> Any:
    try:
        torch_dtype = getattr(torch, dtype)
        if not isinstance(torch_dtype, torch.dtype):
            raise AttributeError(dtype)
    except AttributeError:
        raise ModelError(f"--dtype {dtype!r}: not a torch dtype (float32, float16, int64...)") from None
    generator = torch.Generator().manual_seed(0)

    def make(shape):
        if torch_dtype.is_floating_point:
            return torch.randn(shape, generator=generator).to(torch_dtype)
        return torch.randint(0, 2, shape, generator=generator).to(torch_dtype)

    if all(name for name, _ in parsed):
        return {name: make(shape) for name, shape in parsed}
    if any(name for name, _ in parsed):
        raise ModelError(f"{spec}: give every --shape a NAME= or none")
    tensors = tuple(make(shape) for _, shape in parsed)
    return tensors


_ONNX_TYPES = {
    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
    "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8",
    "tensor(uint8)": "uint8", "tensor(bool)": "bool",
}


def _onnx_inputs(spec: str, shapes: Any, dtype: str) -> dict[str, Any]:
    """Random inputs for an ONNX file from its declared inputs (read by ONNX Runtime)."""
    try:
        import numpy
        import onnxruntime
    except ImportError:
        raise ModelError(f"{spec}: an ONNX model needs onnxruntime (pip install onnxruntime)") from None
    try:
        session = onnxruntime.InferenceSession(spec, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001
        raise ModelError(f"{spec}: not a loadable ONNX model ({error_text(error)})") from None
    declared = session.get_inputs()
    parsed = parse_shapes(shapes)
    by_name = {name: shape for name, shape in parsed if name}
    positional = [shape for name, shape in parsed if not name]
    unknown = set(by_name) - {item.name for item in declared}
    if unknown:
        raise ModelError(f"{spec}: --shape names no input {', '.join(sorted(unknown))} "
                         f"(inputs: {', '.join(item.name for item in declared)})")
    random = numpy.random.default_rng(0)
    inputs = {}
    for index, item in enumerate(declared):
        if item.name in by_name:
            shape = by_name[item.name]
        elif index < len(positional):
            shape = positional[index]
        else:
            shape = tuple(size if isinstance(size, int) and size > 0 else 1 for size in item.shape)
        type_name = _ONNX_TYPES.get(item.type)
        if type_name is None:
            raise ModelError(f"{spec}: input {item.name!r} has type {item.type}, which opsight "
                             "bench cannot make random values for")
        if type_name.startswith("float"):
            inputs[item.name] = random.standard_normal(shape).astype(type_name)
        else:
            inputs[item.name] = random.integers(0, 2, shape).astype(type_name)
    return inputs


def load_factory(spec: str) -> tuple[Callable[..., Any], str]:
    """The callable a ``module:factory`` or ``path/to/file.py:factory`` names, and its
    attribute path. The one loader of every model tool (``opsight bench``, ``opsight
    compare-backends``, ``opsight explain``, ``opsight model``).

    A module is imported from ``sys.path`` with the current directory first, as ``python
    -m`` does; a ``.py`` file (or any path holding a directory separator) is executed as a
    module of its own (named after its absolute path, so two files of one name do not
    collide), with its directory on ``sys.path`` so that it can import its neighbours.
    ``factory`` may be dotted (``Class.method``). Raises :class:`FactoryError`.
    """
    where, colon, attribute = spec.rpartition(":")
    if not colon or not where or not attribute:
        raise FactoryError(f"{spec}: expected MODULE:FUNCTION (module:factory or "
                           "path/to/file.py:factory)")
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise FactoryError(f"{spec}: no such file {where!r}")
        module_name = "_opsight_factory_" + "".join(
            character if character.isalnum() else "_" for character in path)
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise FactoryError(f"{spec}: cannot import {where!r}")
        module = importlib.util.module_from_spec(module_spec)
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        sys.modules[module_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:  # noqa: BLE001 - the file's own code failed
            sys.modules.pop(module_name, None)
            raise FactoryError(f"{spec}: importing {where!r} raised {error_text(error)}") from None
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as error:
            raise FactoryError(f"{spec}: no module named {error.name or where!r} (cannot "
                               f"import module {where!r})") from None
        except Exception as error:  # noqa: BLE001 - the module's own code failed
            raise FactoryError(f"{spec}: importing {where!r} raised {error_text(error)}") from None
    factory: Any = module
    for part in attribute.split("."):
        try:
            factory = getattr(factory, part)
        except AttributeError:
            raise FactoryError(f"{spec}: module {where!r} has no attribute {attribute!r}") from None
    if not callable(factory):
        raise FactoryError(f"{spec}: {attribute!r} is not callable")
    return factory, attribute


def call_factory(spec: str) -> tuple[Any, str]:
    """What the factory ``module:factory`` / ``file.py:factory`` returns when called with no
    arguments, and its attribute path. Raises :class:`FactoryError` when it cannot be
    loaded, :class:`ModelError` when it raised (the message names the spec)."""
    factory, attribute = load_factory(spec)
    try:
        return factory(), attribute
    except Exception as error:  # noqa: BLE001 - the user's factory failed
        raise ModelError(f"{spec}: the factory raised {error_text(error)}") from None


def _load_factory(spec: str) -> LoadedModel:
    made, attribute = call_factory(spec)
    return from_object(made, source=spec, default_name=attribute)


def from_object(made: Any, *, inputs: Any = None, source: str, default_name: str,
                preprocess: Callable | None = None,
                postprocess: Callable | None = None) -> LoadedModel:
    """A LoadedModel from what a factory returned, or from what ``opsight.bench.run`` got."""
    if isinstance(made, Model):
        model = made
    elif isinstance(made, dict) and "model" in made:
        unknown = set(made) - {"model", "inputs", "preprocess", "postprocess", "name"}
        if unknown:
            raise ModelError(f"{source}: the factory's dict has unknown keys {sorted(unknown)} "
                             "(model, inputs, preprocess, postprocess, name)")
        model = Model(**made)
    elif isinstance(made, tuple) and len(made) == 2 and callable(made[0]):
        model = Model(made[0], made[1])
    elif callable(made) and inputs is not None:
        model = Model(made, inputs)
    elif callable(made) and source == "opsight.bench.run":
        model = Model(made, ())
    else:
        raise ModelError(f"{source}: the factory returned {type(made).__name__}; expected "
                         "(model, example_inputs), a dict with 'model' and 'inputs', or "
                         "opsight.bench.Model(model, inputs, preprocess=, postprocess=)")
    if inputs is not None and isinstance(made, Model):
        model.inputs = inputs
    if not callable(model.model):
        raise ModelError(f"{source}: the model ({type(model.model).__name__}) is not callable")
    for label, function in (("preprocess", model.preprocess), ("postprocess", model.postprocess)):
        if function is not None and not callable(function):
            raise ModelError(f"{source}: {label} is not callable")
    torch = sys.modules.get("torch")
    form = "python"
    if torch is not None and isinstance(model.model, torch.jit.ScriptModule):
        form = "torchscript"
    if torch is not None and isinstance(model.model, torch.nn.Module):
        model.model.eval()
    name = model.name or getattr(model.model, "__name__", None) or type(model.model).__name__
    if name in ("function", "builtin_function_or_method", "Sequential") and default_name:
        name = default_name
    return LoadedModel(form, model.model, model.inputs, name, source,
                       preprocess or model.preprocess, postprocess or model.postprocess)
